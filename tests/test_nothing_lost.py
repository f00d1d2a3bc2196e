"""Nothing lost: a build never changes a byte (or a mode) of the project tree, whether it succeeds,
fails verification, has a bad config or is interrupted, and never leaves half-written outputs:
no partial archive, no staging files in TMPDIR, no incomplete cache entries.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hardening import (
    CONSOLE_SCRIPT,
    MODEL,
    MODELS_DIR,
    build,
    files_under,
    leftovers,
    tree_digest,
    write_project,
)
from onnx import helper

import hatch_shrinkray.engine
from hatch_shrinkray import ShrinkrayError, shrink

from onnx_builders import init, mlp, model, vi, weight


def rich_project(root: Path, hook_table: str = "") -> Path:
    """Two models (one with external data), sample inputs, a read-only file, a symlink, a .gitignore."""
    write_project(root, hook_table)
    onnx.save(mlp(), str(root / MODEL))
    nested = root / MODELS_DIR / "nested"
    nested.mkdir()
    onnx.save(mlp(256, 512), str(nested / "b.onnx"), save_as_external_data=True, location="b.onnx.data",
              size_threshold=1024)
    (root / "data").mkdir()
    np.savez(root / "data" / "inputs.npz", x=np.ones((2, 256), dtype=np.float32))
    (root / "README.md").write_text("toymodel\n")
    (root / "LICENSE").write_text("MIT\n")
    (root / "LICENSE").chmod(0o444)
    (root / ".gitignore").write_text("dist/\n*.pyc\n")
    (root / "src/toymodel/link.onnx").symlink_to("models/a.onnx")
    return root


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Private cache and temp directories, outside the project, watched by the tests."""
    dirs = {"cache": tmp_path / "cache", "tmp": tmp_path / "tmp", "dist": tmp_path / "dist"}
    dirs["tmp"].mkdir()
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(dirs["cache"]))
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(dirs["tmp"]))
    return dirs


def assert_no_partial_cache(cache: Path) -> None:
    """Every cache entry is a complete pair; no temporary files are left."""
    names = files_under(cache)
    onnx_keys = {n.removesuffix(".onnx") for n in names if n.endswith(".onnx")}
    json_keys = {n.removesuffix(".json") for n in names if n.endswith(".json")}
    assert onnx_keys == json_keys, names
    # beside the pairs: the engine-free alias of an entry and the note that onnxruntime loads some
    # bytes (shipping/cache.py), each one small file written atomically
    assert all(n.endswith((".onnx", ".json", ".latest", ".loads")) for n in names), names


def assert_clean(root: Path, before: dict[str, str], env: dict[str, Path]) -> None:
    assert tree_digest(root) == before
    assert files_under(env["dist"]) == []
    assert files_under(env["tmp"]) == [] and list(env["tmp"].iterdir()) == []
    assert_no_partial_cache(env["cache"])


def test_successful_builds_change_nothing(tmp_path: Path, env: dict[str, Path]) -> None:
    root = rich_project(tmp_path / "toymodel", 'inputs = "data/inputs.npz"\n')
    before = tree_digest(root)
    wheel = build(root, "wheel", env["dist"])
    sdist = build(root, "sdist", env["dist"])
    build(root, "wheel", tmp_path / "again")  # served from the cache
    assert tree_digest(root) == before
    assert list(env["tmp"].iterdir()) == []
    assert_no_partial_cache(env["cache"])
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
    with tarfile.open(sdist) as tar:
        assert len(tar.getnames()) == len(set(tar.getnames()))


def test_verification_failure_changes_nothing(tmp_path: Path, env: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = rich_project(tmp_path / "toymodel",
                        'max-rel-l2 = 0.0\nmin-cosine = 1.0\nstrict = true\njudges = { y = "values" }\n')
    before = tree_digest(root)
    for target in ("wheel", "sdist"):
        with pytest.raises(SystemExit):
            build(root, target, env["dist"])
        assert ": failed: int8 broke its limits on " in capsys.readouterr().err
        assert_clean(root, before, env)


def test_bad_config_changes_nothing(tmp_path: Path, env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root = rich_project(tmp_path / "toymodel", 'methd = "int8"\nlevels = 1\n')
    before = tree_digest(root)
    with pytest.raises(SystemExit):
        build(root, "wheel", env["dist"])
    assert "Invalid configuration for build hook `shrinkray`" in capsys.readouterr().err
    assert_clean(root, before, env)


def test_engine_error_on_the_second_model_changes_nothing(tmp_path: Path, env: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The first model is already shrunk into the work directory when the second one fails."""
    root = rich_project(tmp_path / "toymodel")
    (root / MODELS_DIR / "nested" / "c.onnx").write_bytes(b"\x08\x07garbage")
    before = tree_digest(root)
    with pytest.raises(SystemExit):
        build(root, "wheel", env["dist"])
    assert "is not a valid ONNX model" in capsys.readouterr().err
    assert_clean(root, before, env)


def test_keyboard_interrupt_inside_the_engine_changes_nothing(tmp_path: Path, env: dict[str, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the second model is being verified (its shrunk bytes already staged)."""
    root = rich_project(tmp_path / "toymodel", "cache = false\n")
    before = tree_digest(root)
    real_verify = hatch_shrinkray.engine.verify_against
    calls: list[int] = []

    def interrupt_second(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_verify(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hatch_shrinkray.engine, "verify_against", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        build(root, "wheel", env["dist"])
    assert len(calls) == 2
    assert_clean(root, before, env)


def test_api_interrupted_or_failing_shrink_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "m.onnx"
    onnx.save(mlp(), str(src))
    out = tmp_path / "out"

    def interrupt(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(hatch_shrinkray.engine, "verify_against", interrupt)
    with pytest.raises(KeyboardInterrupt):
        shrink(src, out / "m.onnx")
    assert files_under(out) == [] and (not out.exists() or list(out.iterdir()) == [])
    monkeypatch.undo()
    # an existing output survives a failed re-run untouched
    out.mkdir(exist_ok=True)
    (out / "m.onnx").write_bytes(b"previous output")
    from hatch_shrinkray import ShrinkOptions, VerifyOptions

    strict = VerifyOptions(max_rel_l2=0.0, min_cosine=1.0, judges=(("y", "values"),))
    with pytest.raises(ShrinkrayError):
        shrink(src, out / "m.onnx", ShrinkOptions(verify=strict, strict=True))
    assert (out / "m.onnx").read_bytes() == b"previous output"
    assert list(out.iterdir()) == [out / "m.onnx"]


# --- a real `python -m hatchling build` interrupted by a signal mid-shrink ---------------------


def _popen(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
    """Popen with SIGINT deliverable in the child. A shell runs background jobs (``cmd &``, CI
    runners) with SIGINT ignored, an ignored signal stays ignored across exec, and Python then
    never installs its KeyboardInterrupt handler. A handler (unlike SIG_IGN) resets to the default
    on exec, so install one around the spawn."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(*args, **kwargs)
    finally:
        signal.signal(signal.SIGINT, old)


def slow_model(path: Path) -> None:
    """Six 2048 x 2048 layers (100 MB): shrinking and verifying takes a few seconds."""
    n, layers = 2048, 6
    nodes, inits = [], []
    for i in range(layers):
        src = "x" if i == 0 else f"r{i - 1}"
        nodes += [helper.make_node("MatMul", [src, f"W{i}"], [f"h{i}"]),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"])]
        inits.append(init(f"W{i}", weight((n, n), i) * 0.6))
    nodes[-1] = helper.make_node("Identity", [f"h{layers - 1}"], ["y"])
    onnx.save(model(nodes, [vi("x", ["b", n])], [vi("y", ["b", n])], inits), str(path))


EXIT = {signal.SIGINT: -signal.SIGINT, signal.SIGTERM: -signal.SIGTERM}
"""How a build dies: by the signal it got, after cleaning up (Python re-raises an unhandled
KeyboardInterrupt as SIGINT; the hook re-raises SIGTERM), so a shell shows 130 or 143."""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_build_changes_nothing(sig: signal.Signals, tmp_path: Path) -> None:
    root = rich_project(tmp_path / "toymodel")
    slow_model(root / MODEL)
    before = tree_digest(root)
    dirs = {"cache": tmp_path / "cache", "tmp": tmp_path / "tmp", "dist": tmp_path / "dist"}
    dirs["tmp"].mkdir()
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(dirs["cache"]), "TMPDIR": str(dirs["tmp"])}
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN"):
        env.pop(name, None)
    proc = _popen([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dirs["dist"])],
                            cwd=root, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if f"shrinkray: {MODEL} (" in line or not line:
            break
    assert any(f"shrinkray: {MODEL} (" in ln for ln in seen), "".join(seen)
    time.sleep(0.5)  # inside the multi-second encode / staging / verification
    proc.send_signal(sig)
    try:
        _, rest = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == EXIT[sig], "".join(seen) + rest
    assert "total" not in rest, "the build finished before the signal; make the model slower"
    assert tree_digest(root) == before
    assert files_under(dirs["dist"]) == []
    assert_no_partial_cache(dirs["cache"])
    assert leftovers(dirs["tmp"]) == [], files_under(dirs["tmp"])


AFTER_INITIALIZE = """
import os, signal, sys
from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder
from hatch_shrinkray.hatch.plugin import ShrinkrayBuildHook

for Builder in (SdistBuilder, WheelBuilder):  # like --hooks-only: initialize, never finalize
    builder = Builder(sys.argv[1])
    hook = ShrinkrayBuildHook(sys.argv[1], builder.config.hook_config["shrinkray"], builder.config,
                              builder.metadata, "", builder.PLUGIN_NAME)
    build_data = builder.get_default_build_data()
    builder.set_build_data_defaults(build_data)
    hook.initialize("standard", build_data)
    print(sorted(build_data["force_include"]), flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # while hatchling would be writing the archives
print("still alive", flush=True)
"""


def test_sigterm_between_initialize_and_finalize_removes_the_work_directory(tmp_path: Path) -> None:
    """The shrunk files live in $TMPDIR/hatch-shrinkray-*/ until ``finalize``; SIGTERM while
    hatchling writes the archive must not leave them behind, for every hook alive in the process
    (an sdist and a wheel hook here, neither finalized)."""
    root = rich_project(tmp_path / "toymodel")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp)}
    proc = subprocess.run([sys.executable, "-c", AFTER_INITIALIZE, str(root)], env=env, capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.stdout.count(str(tmp)) >= 2, proc.stdout + proc.stderr  # both hooks staged models there
    assert "still alive" not in proc.stdout
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert leftovers(tmp) == [], files_under(tmp)


CLI_EXIT = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (-signal.SIGTERM, "terminated")}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cli_interrupted_mid_shrink_writes_nothing(sig: signal.Signals, tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM during `hatch-shrinkray shrink`: one line, the conventional exit (130, or
    death by SIGTERM: 143 in a shell), no file in the output directory (not even a staging
    directory), the input untouched."""
    src_dir = tmp_path / "in"
    src_dir.mkdir()
    slow_model(src_dir / "m.onnx")
    before = tree_digest(src_dir)
    out = tmp_path / "out"
    command = [str(CONSOLE_SCRIPT), "shrink", str(src_dir / "m.onnx"), "-o", str(out)]
    proc = _popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)  # the output directory appears when the shrunk model is being staged
    proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    code, last = CLI_EXIT[sig]
    assert proc.returncode == code, (stdout, stderr)
    assert stderr.strip().splitlines()[-1] == last
    assert "Traceback" not in stderr
    assert files_under(out) == [] and (not out.exists() or list(out.iterdir()) == [])
    assert tree_digest(src_dir) == before


@pytest.mark.parametrize(("step", "replacement"), [
    ("verify_against", "same shapes"), ("reference_outputs", "same shapes"), ("reference_outputs", "other input width"),
])
def test_source_changed_while_shrinking_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str,
                                                   replacement: str) -> None:
    """The model is rewritten (a re-export, a git checkout) after it was read but before the
    result is written: verification would compare against another file, so nothing is written.
    Swapped before verification reads the original again (``reference_outputs``), the run fails on
    the new file (its outputs differ, or its inputs no longer fit the shrunk model), and the message
    must still say why, not "differs too much" or "please report this as a bug"."""
    src = tmp_path / "m.onnx"
    onnx.save(mlp(), str(src))
    out = tmp_path / "out"
    real = getattr(hatch_shrinkray.engine, step)

    def rewrite_then_run(*args: object, **kwargs: object) -> object:
        onnx.save(mlp(256, 128) if replacement == "same shapes" else mlp(128, 256), str(src))
        return real(*args, **kwargs)

    monkeypatch.setattr(hatch_shrinkray.engine, step, rewrite_then_run)
    with pytest.raises(ShrinkrayError) as info:
        shrink(src, out / "m.onnx")
    assert str(info.value).startswith(f"{src}: changed while it was being shrunk"), str(info.value)
    assert files_under(out) == [] and (not out.exists() or list(out.iterdir()) == [])


def _signalled_right_after(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Make ``tempfile.<name>`` deliver SIGTERM right after it created its file or directory: the
    narrowest window there is between a temporary path appearing and its owner knowing of it."""
    real = getattr(tempfile, name)
    made: list[str] = []

    def create_then_signal(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        made.append(got if isinstance(got, str) else got[1])
        signal.raise_signal(signal.SIGTERM)
        return got

    monkeypatch.setattr(tempfile, name, create_then_signal)
    return made


def test_sigterm_right_after_a_temporary_path_appears_leaves_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The staging directory of ``shrink``, the sitecustomize directory of ``record`` and the
    work directory of ``wheel``: a SIGTERM right after each appears is delivered where the code that
    removes it runs."""
    from hatch_shrinkray.capture.run import instrumented_path
    from hatch_shrinkray.signals import Terminated, terminate_raises

    src = tmp_path / "m.onnx"
    onnx.save(mlp(), str(src))
    made = _signalled_right_after(monkeypatch, "mkdtemp")
    with terminate_raises(), pytest.raises(Terminated):
        shrink(src, tmp_path / "out" / "m.onnx")
    with terminate_raises(), pytest.raises(Terminated), instrumented_path():
        pass
    assert len(made) == 2 and not any(Path(p).exists() for p in made), made
    assert list((tmp_path / "out").iterdir()) == []


def test_sigterm_right_after_the_wheel_work_directory_appears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hatch_shrinkray.signals import Terminated, terminate_raises
    from hatch_shrinkray.wheels.rewrite import rewrite_wheel

    root = tmp_path / "proj"  # a plain wheel: no hook
    (root / "src/proj").mkdir(parents=True)
    (root / "src/proj/__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0.1"\n\n'
                                         '[tool.hatch.build.targets.wheel]\npackages = ["src/proj"]\n')
    wheel = build(root)
    made = _signalled_right_after(monkeypatch, "mkdtemp")

    def never(_: Path) -> Any:
        raise AssertionError("configured after the signal")

    with terminate_raises(), pytest.raises(Terminated):
        rewrite_wheel(wheel, tmp_path / "out.whl", never, {}, print)  # type: ignore[arg-type]
    assert len(made) == 1 and not Path(made[0]).exists()
    assert not (tmp_path / "out.whl").exists()


SIGNAL_DURING_IMPORT = """
import signal, sys
import hatch_shrinkray.methods.runtimes as runtimes

def check(*args, **kwargs):
    # What a SIGTERM during the first `import onnxruntime` looks like: the handler's exception is
    # raised inside the extension's initialisation, which reports it as an ImportError.
    try:
        signal.raise_signal(signal.SIGTERM)
    except BaseException as exc:
        raise ImportError("initialization failed") from exc

runtimes.check = check
"""


def test_sigterm_surfacing_as_an_import_error_still_stops_the_cli(tmp_path: Path) -> None:
    src = tmp_path / "m.onnx"
    onnx.save(mlp(), str(src))
    out = tmp_path / "out"
    script = (SIGNAL_DURING_IMPORT + "from hatch_shrinkray.cli import main\n"
              f"sys.exit(main(['shrink', {str(src)!r}, '-o', {str(out)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "terminated" and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists() or list(out.iterdir()) == []


def test_sigterm_surfacing_as_an_import_error_still_stops_the_build(tmp_path: Path) -> None:
    root = rich_project(tmp_path / "toymodel")
    temp = tmp_path / "tmp"
    temp.mkdir()
    script = (SIGNAL_DURING_IMPORT + "from hatchling.cli import hatchling\n"
              "sys.argv = ['hatchling', 'build', '-t', 'wheel', '-d', 'dist']\nhatchling()\n")
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not (root / "dist").exists() or list((root / "dist").iterdir()) == []
    assert [p.name for p in temp.iterdir() if p.name.startswith("hatch-shrinkray-")] == []
