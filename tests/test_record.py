"""``hatch-shrinkray record`` and ``pytest --shrinkray-record``, run as a user runs them (subprocesses
through the installed console script and a real pytest), then shrinking with what they recorded."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import cli
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.recording.storage import read_recording

from onnx_builders import init, mlp, model, save, vi, weight

SCRIPT = textwrap.dedent("""
    import subprocess, sys, threading
    import numpy as np, onnxruntime as ort

    path, calls = sys.argv[1], int(sys.argv[2])
    sess = ort.InferenceSession(path)
    rng = np.random.default_rng(0)
    for i in range(calls):
        sess.run(None, {"x": rng.standard_normal((1 + i % 3, 512)).astype(np.float32)})
    if len(sys.argv) == 3:  # the parent also starts a child process and a session made from bytes in a thread
        subprocess.run([sys.executable, __file__, path, "5", "child"], check=True)
        data = open(path, "rb").read()
        def worker():
            s = ort.InferenceSession(data)
            for _ in range(4):
                s.run(None, {"x": np.ones((2, 512), np.float32)})
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        sys.exit(7)
""")


@pytest.fixture
def workload(tmp_path: Path) -> tuple[Path, Path]:
    model_path = save(mlp(512, 512), tmp_path / "net.onnx")
    script = tmp_path / "use_model.py"
    script.write_text(SCRIPT)
    return model_path, script


def test_record_a_script_with_a_subprocess_and_a_thread(workload: tuple[Path, Path], tmp_path: Path) -> None:
    model_path, script = workload
    out = tmp_path / "rec"
    proc = cli("record", "--output", str(out), "--max-samples", "8", "--", sys.executable, str(script),
               str(model_path), "200")
    assert proc.returncode == 7, proc.stderr  # the command's exit code, passed through
    sha = hashlib.sha256(model_path.read_bytes()).hexdigest()
    files = sorted(p.name for p in out.iterdir())
    assert files == [f"net-{sha[:16]}.npz"]  # one file per model, parts merged, nothing else left
    assert "net.onnx" in proc.stdout and "8" in proc.stdout and "recorded 1 model" in proc.stdout
    with np.load(out / files[0], allow_pickle=False) as data:  # numpy alone reads it
        meta = json.loads(str(data["__meta__"]))
        first = data["s0000_0"]
    assert meta["model_sha256"] == sha and meta["model"].endswith("net.onnx")
    assert meta["calls"] == 200 + 5 + 4 and meta["samples"] == 8
    assert sum(n for _, n in meta["skipped"]) == 209 - 8  # every call not kept is counted, with its reason
    skipped = dict(meta["skipped"])  # the thread's 4 equal feeds: repeats, unless thinned out before
    assert set(skipped) == {"over --max-samples", "repeating a kept feed"} and skipped["over --max-samples"] >= 198
    picked = meta["picked"]
    assert picked == sorted(picked) and picked[0] == 0 and picked[-1] > 150  # spread over the calls, not the first 8
    assert first.dtype == np.float32 and first.shape[1] == 512
    rec = read_recording(out / files[0])
    assert {s["x"].shape[0] for s in rec.samples} >= {1, 2, 3}  # every shape kept as it was


def test_same_run_same_bytes(workload: tuple[Path, Path], tmp_path: Path) -> None:
    model_path, script = workload
    digests = []
    for run in ("a", "b"):
        out = tmp_path / run
        proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(model_path), "60", "solo")
        assert proc.returncode == 0, proc.stderr
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())])
    assert digests[0] == digests[1] and len(digests[0]) == 1


def test_byte_bound_keeps_fewer_samples(workload: tuple[Path, Path], tmp_path: Path) -> None:
    model_path, script = workload
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--max-bytes", "10000", "--", sys.executable, str(script),
               str(model_path), "40", "solo")
    assert proc.returncode == 0, proc.stderr
    rec = read_recording(next(out.iterdir()))
    assert len(rec.samples) >= 1 and rec.nbytes <= 10000 < 3 * 2048 + rec.nbytes  # 2 KB per row of 512 floats


def test_nothing_recorded_is_said(tmp_path: Path) -> None:
    proc = cli("record", "-o", str(tmp_path / "rec"), "--", sys.executable, "-c", "print('no model here')")
    assert proc.returncode == 0
    assert "nothing recorded" in proc.stdout
    assert not (tmp_path / "rec").exists()  # the directory record created is not left empty
    assert "next:" not in proc.stdout  # nothing to point the build at


def test_a_missing_command_is_one_line(tmp_path: Path) -> None:
    proc = cli("record", "-o", str(tmp_path / "rec"), "--", str(tmp_path / "no-such-program"))
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot run ") and "Traceback" not in proc.stderr
    assert not (tmp_path / "rec" / ".parts").exists()


def test_nothing_happens_unless_asked() -> None:
    """No recording asked for: onnxruntime stays unpatched and the pytest plugin imports nothing heavy."""
    code = ("import sys, onnxruntime as ort, hatch_shrinkray.capture.pytest_plugin as p; "
            "print(ort.InferenceSession.run.__module__, 'numpy' in sys.modules and 'onnx' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split()[0] == "onnxruntime.capi.onnxruntime_inference_collection"
    light = subprocess.run([sys.executable, "-c", "import sys, hatch_shrinkray.capture.pytest_plugin, "
                            "hatch_shrinkray.capture.boot; print(sorted(m for m in ('numpy', 'onnx', 'onnxruntime') "
                            "if m in sys.modules))"], capture_output=True, text=True, check=True)
    assert light.stdout.strip() == "[]"


TESTS = textwrap.dedent("""
    import subprocess, sys
    import numpy as np, onnxruntime as ort
    MODEL = {model!r}

    def test_in_process():
        sess = ort.InferenceSession(MODEL)
        rng = np.random.default_rng(1)
        for n in range(12):
            out = sess.run(None, {{"x": rng.standard_normal((128, 512)).astype(np.float32)}})[0]
            assert out.shape == (128, 10)

    def test_in_a_subprocess():
        code = ("import numpy as np, onnxruntime as ort; s = ort.InferenceSession({model!r}); "
                "s.run(None, {{'x': np.full((2, 512), 0.5, np.float32)}})")
        subprocess.run([sys.executable, "-c", code], check=True)
""")


@pytest.mark.parametrize("how", ["plugin", "command"])
def test_record_a_real_pytest_run_then_shrink_with_it(how: str, tmp_path: Path) -> None:
    model_path = save(mlp(512, 512), tmp_path / "net.onnx")
    (tmp_path / "test_uses_model.py").write_text(TESTS.format(model=str(model_path)))
    out = tmp_path / "inputs"
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_uses_model.py")]
    if how == "plugin":
        proc = subprocess.run([*pytest_cmd, "--shrinkray-record", str(out)], capture_output=True, text=True,
                              check=False, cwd=tmp_path, timeout=300)
        assert "hatch-shrinkray recording" in proc.stdout
    else:
        proc = cli("record", "-o", str(out), "--", *pytest_cmd, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert rec.calls == 13 and len(rec.samples) == 13
    assert {s["x"].shape for s in rec.samples} == {(128, 512), (2, 512)}

    result = shrink(model_path, tmp_path / "small.onnx", ShrinkOptions(verify=VerifyOptions(inputs=out)))
    v = result.verification
    assert v is not None and v.passed and v.real
    # 13 samples are too few independent units to fit a rounding: round-to-nearest, verified on all 13.
    assert v.calibration == 0 and v.samples == 13 and v.weak
    assert "weak evidence" in v.summary()
    assert not any("output-aware rounding" in t.note for t in result.tensors)
    shown = cli("-v", "shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "recording inputs/net-" in shown.stdout or f"recording {out}" in shown.stdout


def test_recordings_are_found_by_content_then_by_name(tmp_path: Path) -> None:
    model_path = save(mlp(512, 512), tmp_path / "net.onnx")
    (tmp_path / "test_uses_model.py").write_text(TESTS.format(model=str(model_path)))
    out = tmp_path / "inputs"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--shrinkray-record",
                           str(out), str(tmp_path / "test_uses_model.py")], capture_output=True, text=True,
                          check=False, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout
    retrained = save(mlp(512, 384), tmp_path / "net.onnx")  # same name and inputs, new weights
    result = shrink(retrained, None, ShrinkOptions(verify=VerifyOptions(inputs=out)))
    assert result.verification is not None
    assert any("by file name, not by content" in n for n in result.verification.notes)
    other = save(mlp(512, 128), tmp_path / "other.onnx")
    proc = cli("shrink", str(other), "-o", str(tmp_path / "o"), "--inputs", str(out))
    assert proc.returncode == 0, proc.stderr  # a model the recording lacks falls back to generated inputs
    assert "on 8 generated samples" in proc.stdout
    assert "note: " in proc.stdout and "holds no recording of it" in proc.stdout
    auto = cli("shrink", str(other), "-o", str(tmp_path / "o2"), "--method", "auto", "--inputs", str(out))
    # auto has nothing to fit there: it ships int8 round-to-nearest, smoke-checked, and says both
    assert auto.returncode == 0, auto.stderr
    assert ", int8: passes a smoke check on 8 generated samples" in auto.stdout, auto.stdout
    assert "holds no recording of it" in auto.stdout
    assert "Traceback" not in auto.stderr


def test_multi_input_model_records_every_input(tmp_path: Path) -> None:
    """Two inputs, one of them an int64 scalar that selects behaviour (like Silero VAD's sample rate)."""
    w = weight((128, 128), 1)
    m = model([helper.make_node("MatMul", ["x", "W"], ["h"]),
               helper.make_node("Cast", ["sr"], ["srf"], to=onnx.TensorProto.FLOAT),
               helper.make_node("Mul", ["h", "srf"], ["y"])],
              [vi("x", ["n", 128]), vi("sr", [], onnx.TensorProto.INT64)], [vi("y", ["n", 128])], [init("W", w)])
    path = save(m, tmp_path / "two.onnx")
    script = tmp_path / "two.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np, onnxruntime as ort
        s = ort.InferenceSession({str(path)!r})
        for i in range(10):
            s.run(None, {{"x": np.full((1, 128), i, np.float32), "sr": np.array(16000, np.int64)}})
    """))
    out = tmp_path / "rec"
    assert cli("record", "-o", str(out), "--", sys.executable, str(script)).returncode == 0
    rec = read_recording(next(out.iterdir()))
    assert rec.inputs == ("x", "sr")
    assert all(s["sr"].dtype == np.int64 and s["sr"].shape == () and int(s["sr"]) == 16000 for s in rec.samples)


def test_version_1_recordings_are_still_read(tmp_path: Path) -> None:
    """A recording written before format 2 (no units, feedback, streams or skipped): read as one unit
    per call, and a build still verifies on it."""
    model_path = save(mlp(512, 512), tmp_path / "net.onnx")
    sha = hashlib.sha256(model_path.read_bytes()).hexdigest()
    rng = np.random.default_rng(0)
    meta = {"format": "hatch-shrinkray-recording", "version": 1, "model_sha256": sha, "model": "/abs/net.onnx",
            "inputs": ["x"], "samples": 4, "calls": 9, "picked": [0, 3, 6, 8]}
    (tmp_path / "rec").mkdir()
    np.savez(tmp_path / "rec" / f"net-{sha[:16]}.npz", __meta__=np.array(json.dumps(meta)),
             **{f"s{i:04d}_0": rng.standard_normal((2, 512)).astype(np.float32) for i in range(4)})
    rec = read_recording(tmp_path / "rec" / f"net-{sha[:16]}.npz")
    assert rec.units == () and rec.feedback == () and rec.streams == () and rec.picked == (0, 3, 6, 8)
    proc = cli("-v", "shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(tmp_path / "rec"))
    assert proc.returncode == 0, proc.stderr
    assert "recording rec/net-" in proc.stdout or "(4 of 9 calls)" in proc.stdout


PROJECT_TESTS = textwrap.dedent("""
    import pathlib
    import numpy as np, onnxruntime as ort

    MODEL = str(pathlib.Path(__file__).resolve().parents[1] / "models" / "net.onnx")

    def test_a():
        s = ort.InferenceSession(MODEL)
        for n in range(3):
            s.run(None, {"x": np.full((1, 512), n, np.float32)})

    def test_b():
        ort.InferenceSession(MODEL).run(None, {"x": np.ones((2, 512), np.float32)})
""")


def test_the_same_project_recorded_in_two_directories_gives_the_same_bytes(tmp_path: Path) -> None:
    """Recordings are committed: they hold no absolute path and no detail of the machine, so the same
    project recorded from two different directories gives byte-identical files; the summary ends
    with the next step in the project's own terms (its table's `inputs`, then `check`)."""
    contents = []
    for where in ("one/deep/place", "another"):
        root = tmp_path / where / "proj"
        (root / "tests").mkdir(parents=True)
        (root / "models").mkdir()
        (root / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n\n'
                                             '[tool.hatch.build.targets.wheel.hooks.shrinkray]\n'
                                             'models = ["models/net.onnx"]\n')
        save(mlp(512, 64), root / "models" / "net.onnx")
        (root / "tests" / "test_net.py").write_text(PROJECT_TESTS)
        proc = cli("record", "-o", "tests/shrinkray-inputs", "--", sys.executable, "-m", "pytest", "-q", "-p",
                   "no:cacheprovider", "tests", cwd=root)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (path,) = (root / "tests" / "shrinkray-inputs").iterdir()
        data = path.read_bytes()
        assert str(tmp_path).encode() not in data and b"/proj" not in data
        contents.append((path.name, data))
        # the whole command would make the line too long: the user has it at hand
        assert proc.stdout.splitlines()[-1] == (
            'next: set `inputs = "tests/shrinkray-inputs"` in [tool.hatch.build.targets.wheel.hooks.shrinkray]; '
            "then `hatch-shrinkray check -- COMMAND` with the command you recorded")
        meta = read_recording(path)
        assert meta.model == "models/net.onnx" and set(meta.units) == {"test:tests/test_net.py::test_a",
                                                                        "test:tests/test_net.py::test_b"}
    assert contents[0] == contents[1]


def _net_project(root: Path) -> Path:
    """A project whose wheel hook configures one MLP, ``models/net.onnx``."""
    (root / "models").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n\n'
                                         '[tool.hatch.build.targets.wheel.hooks.shrinkray]\n'
                                         'models = ["models/net.onnx"]\n')
    save(mlp(512, 64), root / "models" / "net.onnx")
    return root


def test_a_command_without_tests_is_not_the_check_it_suggests(tmp_path: Path) -> None:
    """A recorded demo that runs no pytest test: `check` with it would compare only its exit status, a
    verdict that cannot fail while the demo succeeds. The next step names the tests instead, and
    `--shadow` with the demo, which counts its answers."""
    root = _net_project(tmp_path / "proj")
    demo = ("import numpy as np, onnxruntime as ort; s = ort.InferenceSession('models/net.onnx'); "
            "[s.run(None, {'x': np.full((1, 512), n, np.float32)}) for n in range(3)]")
    proc = cli("record", "-o", "rec", "--", sys.executable, "-c", demo, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        'next: set `inputs = "rec"` in [tool.hatch.build.targets.wheel.hooks.shrinkray]; then `hatch-shrinkray check '
        "-- python -m pytest`: it ran no test (`check --shadow` counts its answers)")


def test_nothing_captured_suggests_another_command_not_this_one(tmp_path: Path) -> None:
    """A project configures a model the command never loads: the note asks for a command that loads
    it, without repeating the one that just ran, claims nothing about what the build ships, and
    there is no next step to a recording that does not exist."""
    root = _net_project(tmp_path / "proj")
    proc = cli("record", "-o", "rec", "--", sys.executable, "-c", "print('unrelated work')", cwd=root)
    assert proc.returncode == 0, proc.stderr
    note = next(line for line in proc.stdout.splitlines() if line.startswith("note: models/net.onnx"))
    assert note == ("note: models/net.onnx was never loaded: record a command that loads it (its "
                    "build verifies it on generated inputs only)"), note
    assert "unrelated work" not in note and "ships its original" not in proc.stdout
    assert "next:" not in proc.stdout and not (root / "rec").exists()


def test_a_model_loaded_from_bytes_is_recorded_under_its_projects_file_name(tmp_path: Path) -> None:
    """The program hands onnxruntime the model's bytes, not its path: the recording is still named
    after the project's file with those bytes (``net-<sha>.npz``), and one under the old name
    (``model-<sha>.npz``) is still found by its content."""
    root = _net_project(tmp_path / "proj")
    demo = ("import numpy as np, onnxruntime as ort; s = ort.InferenceSession(open('models/net.onnx', 'rb').read()); "
            "[s.run(None, {'x': np.full((1, 512), n, np.float32)}) for n in range(3)]")
    proc = cli("record", "-o", "rec", "--", sys.executable, "-c", demo, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = (root / "rec").iterdir()
    sha = hashlib.sha256((root / "models" / "net.onnx").read_bytes()).hexdigest()
    assert path.name == f"net-{sha[:16]}.npz", path.name
    row = next(line for line in proc.stdout.splitlines() if path.name in line)
    assert row.split()[0] == "models/net.onnx" and "<bytes>" not in proc.stdout, proc.stdout  # the table names it too
    path.rename(root / "rec" / f"model-{sha[:16]}.npz")
    result = shrink(root / "models" / "net.onnx", None, ShrinkOptions(verify=VerifyOptions(inputs=root / "rec")))
    assert result.verification is not None and result.verification.real


def test_the_next_step_names_the_model_as_the_user_can_pass_it(tmp_path: Path) -> None:
    """A model opened by a path relative to another directory is named as a path from here (no
    ``MODEL...`` placeholder); a recording outside the project is not what its build can read."""
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    (tmp_path / "sub").mkdir()
    demo = ("import sys, numpy as np, onnxruntime as ort; s = ort.InferenceSession(sys.argv[1]); "
            "[s.run(None, {'x': np.full((1, 256), n, np.float32)}) for n in range(3)]")
    proc = cli("record", "-o", "rec", "--", sys.executable, "-c", demo, "../net.onnx", cwd=tmp_path / "sub")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith(f"next: `hatch-shrinkray check {model_path} --inputs rec -- ")
    root = _net_project(tmp_path / "proj")
    outside = cli("record", "-o", str(tmp_path / "outside"), "--", sys.executable, "-c",
                  demo.replace("sys.argv[1]", "'models/net.onnx'").replace("256", "512"), cwd=root)
    assert outside.returncode == 0, outside.stdout + outside.stderr
    assert outside.stdout.splitlines()[-1] == ('next: a build reads a recording inside its project only: record again '
                                               'with `-o shrinkray-inputs`, then set `inputs = "shrinkray-inputs"`')
