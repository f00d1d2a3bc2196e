"""The docs follow the code: the generated references cover every configuration key and every
command and flag, the runtime table has the compatibility tests' axes, every error line quoted in
docs/troubleshooting.md is what the code prints today, and the README stays a README."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hardening import cli

from hatch_shrinkray.cli import parser
from hatch_shrinkray.shipping import config
from hatch_shrinkray.shipping.config import ConfigurationError, load_config

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MODEL = REPO / "example_project" / "src" / "digits_classifier" / "models" / "digits_mlp.onnx"
COMMANDS = ("info", "shrink", "compare", "wheel", "bundle", "record", "check")


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()


def _accepted(key: str) -> bool:
    """Whether the configuration loader takes ``key`` as a known key (whatever it thinks of the value)."""
    try:
        load_config({"models": ["*.onnx"], key: object()}, REPO)
    except ConfigurationError as exc:
        return not any(e.startswith(f"Unknown field `tool.hatch.build.hooks.shrinkray.{key}`") for e in exc.errors)
    return True


def test_configuration_reference_has_every_key() -> None:
    table = HOOKS.config_reference()
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M)
    accepted = {*config._HOOK_KEYS, *config.ENGINE_KEYS}
    assert sorted(documented) == sorted(accepted) == sorted(HOOKS.config_keys()), (
        "every key the table accepts needs one row (hatch_shrinkray/option_table.py)")
    assert all(_accepted(key) for key in documented)
    assert not _accepted("no-such-key")
    for key in config.RESERVED_KEYS:
        assert f"`{key}`" in table


def _options(p: argparse.ArgumentParser) -> list[str]:
    return [s for a in p._actions for s in a.option_strings if s not in ("-h", "--help")]


def test_cli_reference_has_every_command_and_flag() -> None:
    text = HOOKS.cli_reference()
    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)
    assert set(HOOKS.commands()) == set(COMMANDS)
    missing = [name for name in sub.choices if f"## hatch-shrinkray {name}\n" not in text]
    for name, command in sub.choices.items():
        section = text.split(f"## hatch-shrinkray {name}\n", 1)[1].split("\n## ", 1)[0]
        missing += [f"{name} {flag}" for flag in _options(command) if f"`{flag}" not in section]
        positionals = [a for a in command._actions if not a.option_strings and a.dest != "help"]
        missing += [f"{name} {a.dest}" for a in positionals
                    if f"`{a.metavar if isinstance(a.metavar, str) else a.dest}`" not in section]
    missing += [flag for flag in _options(top) if f"`{flag}" not in text]
    assert not missing, f"the command reference misses: {missing}"


def test_runtime_table_has_the_compatibility_tests_axes() -> None:
    import json

    import test_runtime_matrix as matrix

    data = json.loads(matrix.MATRIX.read_text(encoding="utf-8"))
    assert data["runtimes"] == list(matrix.RUNTIMES)
    assert list(data["cells"]) == matrix.encodings()
    assert all(list(cells) == list(matrix.RUNTIMES) for cells in data["cells"].values())
    table = HOOKS.runtimes_table()
    assert table.count("\n") == len(data["cells"]) + 1
    assert "<!-- generated: runtimes -->" in (DOCS / "runtimes.md").read_text(encoding="utf-8")


def _pages() -> dict[str, str]:
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}
    return {"README.md": (REPO / "README.md").read_text(encoding="utf-8"), **pages}


def test_every_command_is_spelled_in_full() -> None:
    """In prose and examples a command is `hatch-shrinkray <cmd>`, never the bare `<cmd>`."""
    names = "|".join(c for c in COMMANDS if c != "wheel")  # `wheel` alone is also a `target` value
    bare = re.compile(r"(?<![\w/-])`((?:" + names + r")(?: [^`]*)?|wheel [^`]+)`")
    found = [f"{name}: `{m.group(1)}`" for name, text in _pages().items() for m in bare.finditer(text)]
    assert not found, found


def test_readme_is_short_and_keeps_the_test_command() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert ".venv/bin/python -m pytest\n" in text  # .ci/run runs "the README's test command"
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / link).is_file(), link
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert sorted(re.findall(r": (\w+\.md)$", nav, flags=re.M)) == sorted(p.name for p in DOCS.glob("*.md"))


def _block(text: str, marker: str) -> str:
    return text.split(f"<!-- {marker} -->\n```sh\n", 1)[1].split("\n```\n", 1)[0]


@pytest.mark.parametrize("marker", ["install-cli", "frontends"])
def test_install_recipes_are_the_readmes(marker: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert _block(readme, marker) == _block((DOCS / "quickstart.md").read_text(encoding="utf-8"), marker)


@pytest.mark.slow
def test_install_recipes_for_the_command_line(tmp_path: Path) -> None:
    """Each line of the README's command-line recipe, run as written (the checkout for
    /path/to/hatch-shrinkray), in a fresh venv: `hatch-shrinkray` then runs."""
    block = _block((REPO / "README.md").read_text(encoding="utf-8"), "install-cli")
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()
             if line.strip() and not line.startswith(("#", "export WHEELHOUSE="))]  # the test sets $WHEELHOUSE
    first, wheels = lines[0], lines[1:]
    for n, recipe in enumerate([[first], wheels]):
        venv = tmp_path / f"venv{n}"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = {**os.environ, "WHEELHOUSE": str(tmp_path / "wheelhouse"), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
        env.pop("VIRTUAL_ENV", None)
        for line in recipe:
            proc = subprocess.run(["sh", "-c", line.replace("/path/to/hatch-shrinkray", str(REPO))], env=env,
                                  capture_output=True, text=True, check=False, timeout=1800)
            assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
        run = subprocess.run([str(venv / "bin" / "hatch-shrinkray"), "info", str(MODEL)], capture_output=True,
                             text=True, check=False)
        assert run.returncode == 0 and "fc0.weight" in run.stdout, run.stderr


SETUPTOOLS_PROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "mypkg"
version = "1.0"

[tool.setuptools]
packages = ["mypkg"]

[tool.setuptools.package-data]
mypkg = ["models/*.onnx"]

[tool.hatch-shrinkray]
models = ["mypkg/models/*.onnx"]
"""


@pytest.mark.slow
def test_slim_sdist_recipe(tmp_path: Path) -> None:
    """The quick start's slim sdist on the `hatch-shrinkray wheel` path, as written, on a setuptools
    project: the sdist has no model, the wheel has the shrunk one."""
    import tarfile
    import zipfile

    text = (DOCS / "quickstart.md").read_text(encoding="utf-8").split("<!-- slim-sdist -->\n", 1)[1]
    manifest_in = text.split("```text\n", 1)[1].split("```", 1)[0]
    commands = text.split("```sh\n", 1)[1].split("```", 1)[0]
    root = tmp_path / "mypkg"
    (root / "mypkg" / "models").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    shutil.copyfile(MODEL, root / "mypkg" / "models" / "model.onnx")
    (root / "pyproject.toml").write_text(SETUPTOOLS_PROJECT)
    (root / "MANIFEST.in").write_text("\n".join(line for line in manifest_in.splitlines()
                                                if not line.startswith("# ")) + "\n")
    env = _env(tmp_path / "cache")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("VIRTUAL_ENV", None)
    for line in commands.splitlines():
        command = line.split("  #", 1)[0].strip()
        proc = subprocess.run(["sh", "-c", command], cwd=root, env=env, capture_output=True, text=True,
                              check=False, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    (sdist,) = (root / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        assert not [n for n in tar.getnames() if n.endswith(".onnx")]
    (wheel,) = (root / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.getinfo("mypkg/models/model.onnx").file_size < MODEL.stat().st_size / 3


def test_the_pages_hold_their_generated_references_as_the_code_makes_them() -> None:
    """The configuration and command references read whole on the repository's site too: the pages
    hold what the site generates, and a change of a key, flag or help text that was not written into
    them (``python docs/hooks.py``) fails here."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}
    stale = [name for name, text in pages.items() if HOOKS.fill(text) != text]
    assert stale == [], f"run python docs/hooks.py: {stale}"
    assert all(HOOKS.END in pages[name] for name in ("cli.md", "configuration.md", "runtimes.md"))
    assert "`--max-flip-rate" in pages["cli.md"] and "`rounding`" in pages["configuration.md"]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]'); CI builds it")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    cli_page = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "--max-flip-rate" in cli_page and "generated:" not in cli_page


# -- Troubleshooting: each quoted block is what a real run prints -----------------------------------

HOME = "/home/me/mypkg"
SHARED_CACHE = "/srv/shared-cache"
TABLE = """\
[build-system]
requires = ["hatchling>=1.21", "hatch-shrinkray-core"]
build-backend = "hatchling.build"

[project]
name = "mypkg"
version = "1.0"

[tool.hatch.build.targets.wheel]
packages = ["src/mypkg"]

[tool.hatch.build.hooks.shrinkray]
"""


def _project(root: Path, table: str) -> Path:
    models = root / "src" / "mypkg" / "models"
    models.mkdir(parents=True)
    (root / "src" / "mypkg" / "__init__.py").write_text("")
    shutil.copyfile(MODEL, models / "model.onnx")
    (root / "pyproject.toml").write_text(TABLE + table)
    return root


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HATCH_BUILD")}
    env["HATCH_SHRINKRAY_CACHE_DIR"] = str(cache)
    return env


def _build(root: Path, cache: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(root.parent / "dist")],
                          cwd=root, capture_output=True, text=True, check=False, env=_env(cache), timeout=600)
    return proc.stdout + proc.stderr


VALUES = 'judges = { probabilities = "values" }\n'
"""The example's output judged as plain values, so that a tolerance gates it (its labels all hold)."""


def _scenario(name: str, tmp: Path) -> tuple[str, dict[str, str]]:
    """What the scenario prints, and the paths to show as the docs do."""
    root = tmp / "mypkg"
    cache = tmp / "cache"
    models = '"src/mypkg/models/*.onnx"'
    if name == "config":
        out = _build(_project(root, 'models = ["src/mypkg/model/*.onnx"]\nmehtod = "int8"\nsamples = "8"\n'), cache)
    elif name == "inputs-missing":
        _project(root, f'models = [{models}]\ninputs = "tests/shrinkray-inputs"\n')
        (root / "tests").mkdir()
        out = _build(root, cache)
    elif name in ("generated-only", "manifest-ignored"):
        _project(root, f"models = [{models}]\n")
        (root / ".shrinkray-manifest.json").write_text("{}")
        out = _build(root, cache)
    elif name == "verification":
        out = _build(_project(root, f"models = [{models}]\nmax-rel-l2 = 0.001\nstrict = true\n{VALUES}"), cache)
    elif name == "unverified-original":  # noise fails a strict limit, in a project with tests
        _project(root, f"models = [{models}]\nmax-rel-l2 = 0.001\n{VALUES}")
        (root / "tests").mkdir()
        out = _build(root, cache)
    elif name == "unrecorded-original":  # the recording holds another model only; noise fails a strict limit
        import numpy as np

        from hatch_shrinkray.recording.format import Recording
        from hatch_shrinkray.recording.storage import write_recording

        _project(root, f'models = [{models}]\ninputs = "tests/shrinkray-inputs"\nmax-rel-l2 = 0.001\n{VALUES}')
        (root / "tests/shrinkray-inputs").mkdir(parents=True)
        write_recording(root / "tests/shrinkray-inputs", Recording(
            "0" * 64, "other.onnx", ("x",), ({"x": np.zeros((1, 4), np.float32)},), 1, (0,), ("call:0",)))
        out = _build(root, cache)
    elif name == "cache-private":
        cache.mkdir(mode=0o777)
        cache.chmod(0o777)
        out = _build(_project(root, f"models = [{models}]\n"), cache)
        return out, {str(root): HOME, str(cache): SHARED_CACHE}
    elif name in ("auto-no-inputs", "output-exists", "already-quantized"):
        root.mkdir()
        shutil.copyfile(MODEL, root / "model.onnx")
        env = _env(cache)
        if name == "auto-no-inputs":
            proc = cli("shrink", "model.onnx", "-o", "out", "--method", "auto", cwd=root, env=env)
        else:
            assert cli("shrink", "model.onnx", "-o", "out", cwd=root, env=env).returncode == 0
            args = ("out/model.onnx", "-o", "out3") if name == "already-quantized" else ("model.onnx", "-o", "out")
            proc = cli("shrink", *args, cwd=root, env=env)
        out = proc.stdout + proc.stderr
    elif name == "engine-missing":
        root.mkdir()
        shutil.copyfile(MODEL, root / "model.onnx")
        hide = "import sys\nfor m in ('onnx', 'onnxruntime', 'numpy'): sys.modules[m] = None\n"
        run = "from hatch_shrinkray.cli import main\nsys.exit(main(['shrink', 'model.onnx', '-o', 'out']))\n"
        proc = subprocess.run([sys.executable, "-c", hide + run], cwd=root, capture_output=True, text=True,
                              check=False, env=_env(cache))
        out = proc.stdout + proc.stderr
    elif name in ("pinned-digest", "pinned-rewritten"):
        _project(root, f"models = [{models}]\n" + ('pins = "rewrite"\n' if name == "pinned-rewritten" else ""))
        digest = hashlib.sha256(MODEL.read_bytes()).hexdigest()
        (root / "src/mypkg/models.json").write_text(f'{{"model.onnx": "{digest}"}}\n')
        out = _build(root, cache)
    elif name == "no-session":
        proc = cli("check", "--", "python", "-c", "print(1)", cwd=_project(root, f"models = [{models}]\n"),
                   env=_env(cache))
        out = proc.stdout + proc.stderr
    elif name == "record-incomplete":  # a full disk: the process cannot write what it recorded at exit
        script = ("import resource, numpy as np, onnxruntime as ort; "
                  "s = ort.InferenceSession('src/mypkg/models/model.onnx'); "
                  "s.run(None, {s.get_inputs()[0].name: np.zeros((1, 64), np.float32)}); "
                  "resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))")
        proc = cli("record", "-o", "tests/shrinkray-inputs", "--", sys.executable, "-c", script,
                   cwd=_project(root, f"models = [{models}]\n"), env=_env(cache))
        out = proc.stdout + proc.stderr
    elif name == "usage-slip":
        root.mkdir()
        proc = cli("check", "python", "-m", "pytest", "tests", cwd=root, env=_env(cache))
        out = proc.stdout + proc.stderr
    elif name == "idle-flag":
        root.mkdir()
        shutil.copyfile(MODEL, root / "model.onnx")
        proc = cli("shrink", "model.onnx", "-o", "out", "--rounding", "nearest", cwd=root, env=_env(cache))
        out = proc.stdout + proc.stderr
    elif name == "no-pyproject":
        root.mkdir()
        (root / "mypkg-1.0-py3-none-any.whl").write_bytes(b"")
        proc = cli("wheel", "mypkg-1.0-py3-none-any.whl", cwd=root, env=_env(cache))
        out = proc.stdout + proc.stderr
    else:
        raise AssertionError(f"docs/troubleshooting.md quotes `{name}`, which this test cannot run: add it here")
    return out, {str(root): HOME}


QUOTED = dict(re.findall(r"<!-- error: ([\w-]+) -->\n```text\n(.*?)```",
                         (DOCS / "troubleshooting.md").read_text(encoding="utf-8"), flags=re.S))


def test_troubleshooting_quotes_every_scenario() -> None:
    assert len(QUOTED) == (DOCS / "troubleshooting.md").read_text(encoding="utf-8").count("<!-- error: ")
    assert len(QUOTED) >= 10


@pytest.mark.parametrize("name", sorted(QUOTED))
def test_troubleshooting_lines_are_what_the_code_prints(name: str, tmp_path: Path) -> None:
    out, paths = _scenario(name, tmp_path)
    for real, shown in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        out = out.replace(real, shown)
    printed = out.splitlines()
    for line in QUOTED[name].splitlines():
        ok = any(p.startswith(line[:-4]) for p in printed) if line.endswith(" ...") else line in printed
        assert ok, (f"docs/troubleshooting.md ({name}) quotes a line the code no longer prints:\n{line}\n\n"
                    f"It printed:\n{out}")


def test_every_environment_variable_and_pytest_option_is_documented() -> None:
    """Every variable the code reads or sets (``os.environ``, ``*_ENV`` constants, the capture
    transport) and every option the pytest plugin adds is named in the configuration reference."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "hatch_shrinkray").rglob("*.py"))
    variables = set(re.findall(r"\"(HATCH_SHRINKRAY_[A-Z_]+)\"", source))
    variables |= set(re.findall(r"os\.environ(?:\.get)?[\[(]\"([A-Z_]+)\"", source))
    options = set(re.findall(r"addoption\(\"(--[a-z-]+)\"", source))
    assert "HATCH_SHRINKRAY_CACHE_DIR" in variables and "--shrinkray-record" in options
    reference = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = sorted(name for name in variables | options if f"`{name}" not in reference)
    assert missing == []


def test_the_quick_start_pins_the_version_it_documents() -> None:
    """Its text says to pin the core in `requires`; its table does, at this version."""
    from hatch_shrinkray import __version__

    text = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    table = text.split("<!-- hook-table -->\n```toml\n", 1)[1].split("\n```\n", 1)[0]
    assert f'"hatch-shrinkray-core=={__version__}"' in table
    assert "inputs" not in table  # added at the step that creates the recording (a missing directory fails)
    assert text.split("<!-- install-cli -->\n```sh\n", 1)[1].startswith('export WHEELHOUSE=')  # set before used
