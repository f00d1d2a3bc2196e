"""Hostile inputs, round 4: a killed ``check`` or ``record`` leaves nothing of its command running,
values that mean nothing are refused in one line, and every file a rewrite removes or folds gets a
line. The CLI runs as a user runs it (the console script, in a fresh process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hardening import CONSOLE_SCRIPT, MODELS_DIR, write_project
from test_hostile3 import WHEEL_NAME, hook_build, make_wheel, one_error, run_model, wheel_project

from onnx_builders import mlp, save

PY = sys.executable

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def group_alive(group: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def running(pid: int) -> bool:
    """Whether the process is alive (not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# A killed check or record leaves nothing of its command running.

STARTS_SLEEP = textwrap.dedent('''
    import subprocess, sys, time
    from pathlib import Path
    child = subprocess.Popen(["sleep", "300"])
    Path(sys.argv[1]).write_text(str(child.pid))
    time.sleep(300)
''')


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    return {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}


@linux_only
@pytest.mark.parametrize("command", ["check", "record"])
def test_sigkill_of_check_or_record_ends_every_process_of_its_command(tmp_path: Path, env: dict[str, str],
                                                                      command: str) -> None:
    script, pid_file = tmp_path / "starts_sleep.py", tmp_path / "sleep.pid"
    script.write_text(STARTS_SLEEP)
    args = ([str(save(mlp(), tmp_path / "m.onnx"))] if command == "check" else
            ["--output", str(tmp_path / "recorded")])
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), command, *args, "--", PY, str(script), str(pid_file)],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: pid_file.is_file() and pid_file.read_text(), 60), "the command never started sleep"
        sleep = int(pid_file.read_text())
        group = os.getpgid(sleep)
        assert group != os.getpgid(proc.pid)  # the command has a process group of its own
        assert sleep in group_alive(group)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_for(lambda: not group_alive(group), 10), f"left running: {group_alive(group)}"
    finally:
        proc.kill()
        proc.wait()


LEAVES_SLEEP = 'import subprocess, sys; open(sys.argv[1], "w").write(str(subprocess.Popen(["sleep", "300"]).pid))'


@linux_only
def test_what_a_command_leaves_running_in_its_group_is_stopped_when_it_exits(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    pid_file = tmp_path / "sleep.pid"
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", LEAVES_SLEEP, str(pid_file)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    sleep = int(pid_file.read_text())
    assert wait_for(lambda: not running(sleep), 5)


def test_a_command_that_cannot_start_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           str(tmp_path / "no-such-program")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"error: cannot run {tmp_path / 'no-such-program'}: No such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_command_exit_code_reaches_record(tmp_path: Path, env: dict[str, str]) -> None:
    code = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", "import sys; sys.exit(7)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert code.returncode == 7, code.stderr


# ---------------------------------------------------------------------------------------------
# Values that mean nothing are refused in one line naming the flag or key.

RUNTIME_NEEDS_A_VERSION = ("entry 'onnxruntime' needs a version: the oldest release your users run, like "
                           "'onnxruntime>=1.18'")


@pytest.mark.parametrize(("command", "flags", "expected"), [
    ("info", ["--min-elements", "-5"], "--min-elements must be a positive integer; got -5"),
    ("info", ["--min-elements", "0"], "--min-elements must be a positive integer; got 0"),
    ("shrink", ["--runtime", "onnxruntime"], f"--runtime {RUNTIME_NEEDS_A_VERSION}"),
    ("shrink", ["--block-size", "1048576", "--method", "int4"],
     "--block-size must be one of 16, 32, 64, 128, 256; got 1048576"),
    ("shrink", ["--dim", "batch=0"], "--dim 'batch' must be a positive integer; got 0"),
    ("shrink", ["--default-dim", "-1"], "--default-dim must be a positive integer; got -1"),
    ("shrink", ["--samples", "0"], "--samples must be a positive integer; got 0"),
    ("compare", ["--samples", "-3"], "--samples must be a positive integer; got -3"),
    ("check", ["--runtime", "onnxruntime"], f"--runtime {RUNTIME_NEEDS_A_VERSION}"),
    ("check", ["--max-runs", "0"], "--max-runs must be a positive integer; got 0"),
    ("record", ["--max-samples", "-1"], "--max-samples must be a positive integer; got -1"),
])
def test_numeric_and_runtime_flags_outside_their_meaning_are_one_line(tmp_path: Path, command: str,
                                                                      flags: list[str], expected: str) -> None:
    src = str(save(mlp(), tmp_path / "m.onnx"))
    args = {"info": [src], "shrink": [src, "-o", str(tmp_path / "out")], "compare": [src, src],
            "check": [src], "record": ["--output", str(tmp_path / "rec")]}[command]
    tail = ["--", PY, "-c", "pass"] if command in ("check", "record") else []
    line = one_error(subprocess.run([str(CONSOLE_SCRIPT), command, *args, *flags, *tail], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120, check=False))
    assert expected in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "rec").exists()


def test_a_table_runtime_without_a_version_and_a_negative_seed_are_refused(tmp_path: Path) -> None:
    from hatch_shrinkray.shipping.config import ConfigurationError, load_config

    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["m.onnx"], "runtimes": ["onnxruntime"], "seed": -1}, tmp_path)
    table = "tool.hatch.build.hooks.shrinkray"
    assert caught.value.errors == [f"Field `{table}.runtimes` {RUNTIME_NEEDS_A_VERSION}",
                                   f"Field `{table}.seed` must be a non-negative integer; got -1"]
    # A dependency on onnxruntime without a lower bound targets the oldest release tested.
    config = load_config({"models": ["m.onnx"]}, tmp_path, dependencies=["onnxruntime"])
    assert config.models[0].options.runtimes == ("onnxruntime>=1.16.3",)


def reshaping_model() -> object:
    """x[batch, seq] -> Reshape [-1, 224] -> MatMul: runs only when seq is a multiple of 224, so
    the default seq (32) fails and a retry is needed."""
    import numpy as np
    from onnx import helper, numpy_helper

    from onnx_builders import init, model, vi, weight

    return model([helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["y"])],
                 [vi("x", ["batch", "seq"])], [vi("y", [None, 256])],
                 [numpy_helper.from_array(np.array([-1, 224], np.int64), "shape"), init("W", weight((224, 256), 1))])


def test_a_symbolic_batch_axis_keeps_1_on_a_retry_and_the_line_names_the_sizes(tmp_path: Path) -> None:
    src = save(reshaping_model(), tmp_path / "m.onnx")  # type: ignore[arg-type]
    proc = subprocess.run([str(CONSOLE_SCRIPT), "-v", "shrink", str(src), "-o", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "on 8 generated samples (batch=1; seq=224; a smoke check)" in proc.stdout, proc.stdout
    assert "generated (seed 0; x 1x224)" in proc.stdout, proc.stdout
    compared = subprocess.run([str(CONSOLE_SCRIPT), "compare", str(src), str(tmp_path / "out" / "m.onnx"),
                               "--default-dim", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              check=False)
    assert compared.returncode == 0, compared.stderr
    assert "on 8 generated samples (batch=2, seq=224)" in compared.stdout, compared.stdout


# ---------------------------------------------------------------------------------------------
# Every file a rewrite leaves out gets a line: the original's external data, in the hook and in
# `hatch-shrinkray wheel`.

def external_data_model(models: Path) -> Path:
    """``a.onnx`` with its weights in ``a.onnx.data``."""
    import onnx

    models.mkdir(parents=True, exist_ok=True)
    onnx.save(mlp(256, 512), str(models / "a.onnx"), save_as_external_data=True, location="a.onnx.data",
              size_threshold=1024)
    return models / "a.onnx"


LEFT_OUT = ("a.onnx.data ({size}), the original's external data, is left out of the archive: the shrunk model "
            "holds its weights inside the model file")


def test_wheel_names_the_external_data_it_leaves_out(tmp_path: Path) -> None:
    import zipfile

    models = tmp_path / "models"
    external_data_model(models)
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b"")] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "a.onnx.data")])
    proc = subprocess.run([str(CONSOLE_SCRIPT), "wheel", str(wheel), "-o", str(tmp_path / "out")],
                          cwd=wheel_project(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    size = "544.77 KB"
    assert f"shrinkray: toymodel/models/a.onnx: toymodel/models/{LEFT_OUT.format(size=size)}" in proc.stderr, \
        proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        zf.extractall(tmp_path / "unpacked")
    shipped = tmp_path / "unpacked/toymodel/models"
    assert sorted(p.name for p in shipped.iterdir()) == ["a.onnx"]
    run_model(shipped / "a.onnx")  # the package still works


def test_hook_names_the_external_data_it_leaves_out(tmp_path: Path) -> None:
    import zipfile

    root = write_project(tmp_path / "toymodel")
    external_data_model(root / MODELS_DIR)
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = f"shrinkray: src/toymodel/models/a.onnx: src/toymodel/models/{LEFT_OUT.format(size='544.77 KB')}"
    assert line in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "dist").iterdir()
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(n for n in zf.namelist() if "/models/" in n) == ["toymodel/models/a.onnx"]


def test_a_symbolic_name_gets_one_size_in_every_input(tmp_path: Path) -> None:
    """``batch`` leads ``a`` and is the second axis of ``b``: both get 1 (before, ``b`` got 32, the
    Concat failed, and the retry gave the batch 224)."""
    from onnx import helper

    from onnx_builders import init, model, vi, weight

    m = model([helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]),
               helper.make_node("Concat", ["a", "bt"], ["c"], axis=1), helper.make_node("MatMul", ["c", "W"], ["y"])],
              [vi("a", ["batch", 16]), vi("b", [16, "batch"])], [vi("y", ["batch", 512])],
              [init("W", weight((32, 512), 1))])
    src = save(m, tmp_path / "m.onnx")
    proc = subprocess.run([str(CONSOLE_SCRIPT), "-v", "shrink", str(src), "-o", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "on 8 generated samples (batch=1; a smoke check)" in proc.stdout, proc.stdout
    assert "generated (seed 0; a 1x16; b 16x1)" in proc.stdout, proc.stdout


def test_wheel_warns_of_a_pin_on_the_data_file_it_leaves_out(tmp_path: Path) -> None:
    import hashlib

    models = tmp_path / "models"
    external_data_model(models)
    digest = hashlib.sha256((models / "a.onnx.data").read_bytes()).hexdigest()
    pins = f'{{"a.onnx.data": "{digest}"}}'.encode()
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""), ("toymodel/checksums.json", pins)] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "a.onnx.data")])
    proc = subprocess.run([str(CONSOLE_SCRIPT), "wheel", str(wheel), "-o", str(tmp_path / "out")],
                          cwd=wheel_project(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert ("shrinkray: warning: toymodel/checksums.json pins the sha256 of toymodel/models/a.onnx.data, which the "
            "archive no longer holds (the shrunk model keeps its weights itself)") in proc.stderr, proc.stderr


@pytest.mark.parametrize(("inputs", "target", "said"), [
    ("tests/shrinkray-inputs", "sdist", True),  # an sdist takes the whole project
    ("tests/shrinkray-inputs", "wheel", False),  # never in the wheel: nothing to say
    ("src/toymodel/recordings", "wheel", True),  # inside the package
])
def test_hook_names_a_recording_it_leaves_out_of_the_archive(tmp_path: Path, inputs: str, target: str,
                                                             said: bool) -> None:
    import tarfile
    import zipfile

    import numpy as np

    from hatch_shrinkray.verification.recordings import Recording, write_recording

    root = write_project(tmp_path / "toymodel", f'inputs = "{inputs}"\n')
    save(mlp(), root / MODELS_DIR / "a.onnx")
    (root / inputs).mkdir(parents=True)
    write_recording(root / inputs, Recording("0" * 64, "other.onnx", ("x",), ({"x": np.zeros((1, 4), np.float32)},),
                                             1, (0,), ("call:0",)))
    proc = hook_build(root, tmp_path, target)
    assert proc.returncode == 0, proc.stderr
    line = (f"shrinkray: {inputs} (")
    printed = [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith(line)]
    assert len(printed) == int(said), proc.stdout + proc.stderr
    if said:
        assert printed[0].endswith(f"is left out of the {target}: recorded inputs are for building, not for "
                                   "shipping; name it in the target's `include` or `force-include` to ship it")
    (archive,) = (tmp_path / "dist").iterdir()
    if target == "wheel":
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
    else:
        with tarfile.open(archive) as tf:
            names = tf.getnames()
    assert not [n for n in names if "recordings" in n or "shrinkray-inputs" in n], names
