"""End to end: build example_project with real frontends in isolated environments.

The plugin is served from a wheelhouse built fresh for each test session (a new path every time,
so no frontend cache can hand back a stale plugin), and example_project pins its exact version.
The build environments install hatchling, onnx, onnxruntime and numpy from the package index.

``python -m build`` runs in the default suite, the other three in the ``extended`` tier that CI runs
after it (they need PyPI for the build environments); ``SHRINKRAY_E2E_FRONTENDS=build`` (or any
comma-separated subset of ``build,pip-wheel,uv,hatch``) narrows them. A frontend whose tool is not installed is skipped
(the ``test`` extra installs all of them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "example_project"
MODEL = "src/digits_classifier/models/digits_mlp.onnx"
IN_WHEEL = "digits_classifier/models/digits_mlp.onnx"
IN_SDIST = f"digits_classifier-1.0.0/{MODEL}"
MANIFEST = "digits_classifier-1.0.0/.shrinkray-manifest.json"
PY = sys.executable



def readme_frontends() -> dict[str, str]:
    """frontend -> the README's command line for it ("Installing hatch-shrinkray before it is on the
    index"), run verbatim by ``sh -c`` with ``$WHEELHOUSE`` set and this venv's tools first on PATH."""
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- frontends -->", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line for line in block.strip().splitlines()
             if "pip wheel --no-deps -w \"$WHEELHOUSE\"" not in line and not line.startswith("export WHEELHOUSE=")]
    names = {"python -m build": "build", "python -m pip wheel": "pip-wheel", "uv build": "uv", "hatch build": "hatch"}
    return {next(n for k, n in names.items() if k in line): line for line in lines}


FRONTENDS = readme_frontends()


def selected(name: str) -> bool:
    wanted = os.environ.get("SHRINKRAY_E2E_FRONTENDS", "all")
    return wanted == "all" or name in wanted.split(",")


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    for source in (REPO, REPO / "metapackage"):
        subprocess.run([PY, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(source)],
                       check=True, capture_output=True)
    assert len(list(out.glob("hatch_shrinkray_core-*.whl"))) == 1
    assert len(list(out.glob("hatch_shrinkray-*.whl"))) == 1
    return out


@pytest.fixture
def build_env(wheelhouse: Path, tmp_path: Path, index: None) -> dict[str, str]:
    """The environment of a frontend whose build environment installs from the index (``index``)."""
    env = os.environ.copy()
    env.update(PIP_FIND_LINKS=str(wheelhouse), UV_FIND_LINKS=str(wheelhouse),
               WHEELHOUSE=str(wheelhouse), PATH=f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}",
               HATCH_DATA_DIR=str(tmp_path / "hatch-data"),
               HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "shrinkray-cache"))
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN", "HATCH_QUIET",
                 "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "digits"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("dist", "build", "__pycache__", ".venv"))
    return root


def tree(root: Path) -> dict[str, str]:
    """Digest of every file in the project except the frontends' output directory."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.relative_to(root).parts[0] != "dist"}


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


def members(sdist: Path) -> dict[str, bytes]:
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        assert len(names) == len(set(names)), "duplicate entries in the sdist"
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def venv_with(requirement: list[str], tmp_path: Path, env: dict[str, str]) -> Path:
    """A fresh virtual environment with ``requirement`` installed; returns its python."""
    venv = tmp_path / "venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if has_module("uv"):
        subprocess.run([PY, "-m", "uv", "venv", "--quiet", str(venv)], check=True, env=env)
        install = [PY, "-m", "uv", "pip", "install", "--quiet", "--python", str(python)]
    else:
        subprocess.run([PY, "-m", "venv", str(venv)], check=True, env=env)
        install = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*install, *requirement], check=True, env=env)
    return python


def installed_accuracy(wheel: Path, tmp_path: Path, env: dict[str, str]) -> dict[str, object]:
    """Install the wheel into a fresh venv and score its ``predict()`` on the test split."""
    python = venv_with([str(wheel)], tmp_path, env)
    script = (
        "import json, pathlib, numpy as np, digits_classifier as d\n"
        f"t = np.load({str(EXAMPLE / 'data/digits_test.npz')!r})\n"
        "acc = float((d.predict(t['pixels'].astype(np.float32)) == t['labels']).mean())\n"
        "print(json.dumps({'accuracy': acc, 'file': d.__file__, 'model_bytes': len(d.model_bytes())}))\n"
    )
    out = subprocess.run([str(python), "-c", script], check=True, capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    return dict(json.loads(out.stdout))


@pytest.mark.parametrize("frontend", [f if f == "build" else pytest.param(f, marks=pytest.mark.extended)
                                      for f in FRONTENDS])  # the default suite: `python -m build`
def test_frontend_builds_a_shrunk_verified_package(frontend: str, project: Path, build_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    if not selected(frontend):
        pytest.skip("not in SHRINKRAY_E2E_FRONTENDS")
    tool = {"build": "build", "uv": "uv", "hatch": "hatch"}.get(frontend)
    if tool and not has_module(tool):
        pytest.skip(f"{tool} is not installed")
    original = (project / MODEL).read_bytes()
    before = tree(project)
    readme_env = {k: v for k, v in build_env.items() if k not in ("PIP_FIND_LINKS", "UV_FIND_LINKS")}
    done = run(["sh", "-c", FRONTENDS[frontend]], project, readme_env)
    log = done.stdout + done.stderr
    (tmp_path / "build.log").write_text(log)
    assert done.returncode == 0, log
    assert tree(project) == before, "the build changed the project tree"

    (wheel,) = (project / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert names.count(IN_WHEEL) == 1
        shipped = zf.read(IN_WHEEL)
        assert not [n for n in names if "shrinkray-manifest" in n]
    assert len(shipped) < len(original) * 0.3

    sdists = list((project / "dist").glob("*.tar.gz"))
    if sdists:
        files = members(sdists[0])
        assert files[IN_SDIST] == shipped
        manifest = json.loads(files[MANIFEST])
        assert manifest[MODEL]["shrunk_sha256"] == hashlib.sha256(shipped).hexdigest()
        assert manifest[MODEL]["original_sha256"] == hashlib.sha256(original).hexdigest()
    if frontend in ("build", "uv"):
        assert f"shrinkray: {MODEL}: shipped shrunk, 6.59 -> 1.68 MB (25.5%), already shrunk" in log, log
    if frontend == "build":  # the wheel built from the sdist installs no engine
        sdist_step, _, wheel_step = log.partition("Building wheel from sdist")
        assert "onnxruntime>=" in sdist_step and "rich" not in sdist_step, log
        assert "[engine]" not in wheel_step and "onnxruntime" not in wheel_step, log
    if frontend != "pip-wheel":
        assert f"shrinkray: {MODEL}: shipped shrunk, 6.59 -> " in log, log
        assert "shrinkray: total 1 model" in log, log
    if frontend == "build":
        assert quoted_lines() == printed_lines(log), "README.md quotes other lines than a fresh build prints"

    report = installed_accuracy(wheel, tmp_path, build_env)
    assert "site-packages" in str(report["file"])
    assert report["model_bytes"] == len(shipped)
    baseline = json.loads((EXAMPLE / "training_report.json").read_text())["test_accuracy"]
    assert float(report["accuracy"]) >= baseline - 0.005  # type: ignore[arg-type]


def _timeless(line: str) -> str:
    """A build line with its timings as ``N.N s`` (they vary from run to run)."""
    return re.sub(r"\b\d+(\.\d+)? s\b", "N.N s", line)


def quoted_lines() -> list[str]:
    """The build's ``shrinkray:`` lines README.md quotes for example_project (its "What the first
    command prints" block), timings aside."""
    text = (REPO / "README.md").read_text()
    block = text.split("What the first command prints", 1)[1].split("```", 2)[1]
    return [_timeless(line) for line in block.splitlines() if line.startswith("shrinkray: src/")]


def printed_lines(log: str) -> list[str]:
    """The per-model lines a build of example_project printed (both archives), timings aside."""
    return [_timeless(line) for line in log.splitlines() if line.startswith(f"shrinkray: {MODEL}: ")]


def test_light_install_says_what_to_install(wheelhouse: Path, build_env: dict[str, str], tmp_path: Path) -> None:
    """hatch-shrinkray-core alone (what a build environment gets): the engine's commands stop with one line."""
    (core,) = wheelhouse.glob("hatch_shrinkray_core-*.whl")
    python = venv_with([str(core)], tmp_path, build_env)
    script = Path(python).parent / "hatch-shrinkray"
    done = subprocess.run([str(script), "info", str(EXAMPLE / "src/digits_classifier/models/digits_mlp.onnx")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: the shrinking engine is not installed (numpy is missing) "
        "(pip install 'hatch-shrinkray==0.1.0', or 'hatch-shrinkray-core[engine]==0.1.0')"], done.stderr


@pytest.mark.extended
def test_second_build_is_served_from_the_cache(project: Path, build_env: dict[str, str]) -> None:
    first = run([PY, "-m", "build", "--wheel", "--outdir", "dist"], project, build_env)
    assert first.returncode == 0, first.stderr
    shutil.rmtree(project / "dist")
    second = run([PY, "-m", "build", "--wheel", "--outdir", "dist"], project, build_env)
    assert second.returncode == 0, second.stderr
    assert any(line.endswith(", cached") for line in (second.stdout + second.stderr).splitlines())
    assert "shrinkray: total 1 model: 1 shipped shrunk; " in second.stdout + second.stderr
    # A hit ships only once its outputs agree with the original's: the isolated environment gets the engine.
    assert "onnxruntime>=" in second.stdout + second.stderr, second.stdout + second.stderr


def test_verification_failure_leaves_no_artifact_and_no_trace(project: Path, build_env: dict[str, str]) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'method = "int8"', 'method = "int8"\nmax-rel-l2 = 0.0\nstrict = true\njudges = { probabilities = "values" }'))
    before = tree(project)
    done = run([PY, "-m", "build", "--outdir", "dist"], project, build_env)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"shrinkray: {MODEL}: failed: int8 broke its limits on " in log and "FAIL" in log, log
    assert not (project / "dist").exists() or not list((project / "dist").iterdir())
    assert tree(project) == before


def test_bad_config_lists_every_error(project: Path, build_env: dict[str, str]) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('method = "int8"', 'method = "int9"\nlevles = 3'))
    done = run([PY, "-m", "build", "--wheel", "--outdir", "dist"], project, build_env)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    table = "tool.hatch.build.hooks.shrinkray"
    assert f"- Unknown field `{table}.levles`; did you mean `levels`?" in log, log
    assert f"- Field `{table}.method` must be one of" in log, log
    # found when hatchling asks for the build dependencies, before the engine is installed for nothing
    assert "get_requires_for_build_wheel" in log and "onnxruntime" not in log, log


def test_editable_install_ships_nothing_extra(project: Path, build_env: dict[str, str], tmp_path: Path) -> None:
    """An editable install serves the model from the tree; no copy may land in site-packages."""
    python = venv_with(["-e", str(project)], tmp_path, build_env)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    assert not list(Path(site).rglob("digits_mlp.onnx"))
    assert not (Path(site) / "digits_classifier").exists()
    where = subprocess.run([str(python), "-c", "import digits_classifier as d; print(d.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    assert Path(where).resolve().is_relative_to(project.resolve())


def _doc_block(marker: str, lang: str = "sh") -> str:
    text = (REPO / "docs/quickstart.md").read_text(encoding="utf-8")
    return text.split(f"<!-- {marker} -->\n```{lang}\n", 1)[1].split("\n```\n", 1)[0]


MYPKG = '''\
from pathlib import Path

import numpy as np
import onnxruntime as ort

MODELS = Path(__file__).parent / "models"


def predict(x):
    session = ort.InferenceSession(str(MODELS / "model.onnx"), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.asarray(x, np.float32)})[0].argmax(axis=1)
'''
MYPKG_TEST = '''\
import numpy as np
import pytest

import mypkg


@pytest.mark.parametrize("seed", range(20))
def test_predicts_a_label_per_row(seed):
    x = np.random.default_rng(seed).standard_normal((16, 256))
    assert mypkg.predict(x).shape == (16,)
'''


@pytest.mark.extended
def test_the_quick_start_as_written(wheelhouse: Path, build_env: dict[str, str], tmp_path: Path) -> None:
    """docs/quickstart.md's hook section on a fresh project, literally: its table (with the
    project's own `[project]`), the record steps in a fresh venv that holds only the user's test runner and
    frontend, the `inputs` key added under the hook's table, then the build line of the frontends
    block. The wheel ships smaller models, judged on the recording."""
    sys.path.insert(0, str(REPO / "tests"))
    from hatch_shrinkray import __version__

    from onnx_builders import mlp, save

    table = _doc_block("hook-table", "toml")
    assert f'"hatch-shrinkray-core=={__version__}"' in table  # pinned to the version being documented
    root = tmp_path / "mypkg"
    (root / "src/mypkg/models").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src/mypkg/__init__.py").write_text(MYPKG)
    (root / "tests/test_mypkg.py").write_text(MYPKG_TEST)
    for name in ("model", "sensitive"):
        save(mlp(), root / f"src/mypkg/models/{name}.onnx")
    project = '[project]\nname = "mypkg"\nversion = "1.0"\ndependencies = ["onnxruntime", "numpy"]\n\n'
    (root / "pyproject.toml").write_text(project + table + "\n")
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", str(venv)], check=True)
    env = {**build_env, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PIP_FIND_LINKS")  # the steps say where they need it
    assert run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "pytest", "build"], root, env).returncode == 0
    for line in _doc_block("record-steps").splitlines():
        done = run(["sh", "-c", line.split("  #", 1)[0]], root, env)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert list((root / "tests/shrinkray-inputs").glob("*.npz"))
    key = _doc_block("inputs-key", "toml").split("  #", 1)[0].strip()
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('method = "int8"', f'method = "int8"\n{key}', 1))
    # docs/recording.md's step 3 before the build: the tests judge the shrunk models.
    check_line = next(line for line in _recording_steps() if line.startswith("hatch-shrinkray check"))
    checked = run(["sh", "-c", check_line], root, env)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "verdict: nothing regressed" in checked.stdout, checked.stdout
    build_line = next(line for line in _block_lines("frontends") if "python -m build" in line)
    done = run(["sh", "-c", build_line], root, {**env, "PIP_FIND_LINKS": str(wheelhouse)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same labels on 20 recorded tests" in done.stdout + done.stderr, done.stdout + done.stderr
    (wheel,) = (root / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        for name, share in (("model", 0.3), ("sensitive", 0.55)):  # int8, and fp16 for the override
            shipped = zf.getinfo(f"mypkg/models/{name}.onnx").file_size
            assert shipped < share * (root / f"src/mypkg/models/{name}.onnx").stat().st_size, name


def _recording_steps() -> list[str]:
    """The commands of docs/recording.md's first block, comments dropped."""
    block = (REPO / "docs/recording.md").read_text().split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line and not line.startswith("#")]


def _block_lines(marker: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split(f"<!-- {marker} -->", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if not line.startswith("export ")]
