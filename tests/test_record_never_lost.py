"""``record`` never loses a recording (issue 21 items 2, 4, 9): each run merges only its own parts,
a call is recorded only after ``run()`` succeeded, a failed write at exit is one line and loses
nothing that other processes wrote, and the summary tells "nothing ran" from "a process ended
without letting us write". Each case runs the console script as a user would."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import CONSOLE_SCRIPT, cli

from hatch_shrinkray.recording.format import Recording
from hatch_shrinkray.recording.storage import read_recording, write_recording

from onnx_builders import mlp, save

RUN = textwrap.dedent("""
    import os, sys, time
    import numpy as np, onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1])
    for i in range(int(sys.argv[2])):
        sess.run(None, {"x": np.full((1, 256), i, np.float32)})
        time.sleep(float(os.environ.get("PAUSE", "0")))
""")


@pytest.fixture
def two_models(tmp_path: Path) -> tuple[Path, Path, Path]:
    script = tmp_path / "run.py"
    script.write_text(RUN)
    return save(mlp(256, 64), tmp_path / "a.onnx"), save(mlp(256, 32), tmp_path / "b.onnx"), script


def test_concurrent_runs_into_one_directory_each_keep_theirs(two_models: tuple[Path, Path, Path],
                                                             tmp_path: Path) -> None:
    a, b, script = two_models
    out = tmp_path / "rec"
    (out / ".parts").mkdir(parents=True)
    (out / ".parts" / "mine.txt").write_text("the user's own file")
    env = {**os.environ, "PAUSE": "0.02"}
    runs = [subprocess.Popen([str(CONSOLE_SCRIPT), "record", "-o", str(out), "--", sys.executable, str(script),
                              str(m), "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for m in (a, b)]
    results = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], results
    names = sorted(p.name for p in out.glob("*.npz"))
    assert [n.split("-")[0] for n in names] == ["a", "b"]
    assert all(read_recording(out / n).calls == 40 for n in names)
    assert (out / ".parts" / "mine.txt").read_text() == "the user's own file"
    assert [p.name for p in (out / ".parts").iterdir()] == ["mine.txt"]  # only our run directories went


def test_rejected_feeds_are_never_recorded(two_models: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, _, _ = two_models
    script = tmp_path / "odd.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np, onnxruntime as ort
        sess = ort.InferenceSession(sys.argv[1])
        for bad in (np.array([["a"] * 256], dtype=object), np.ones((1, 256), np.float64),
                    np.array([["x"] * 256])):
            try:
                sess.run(None, {"x": bad})
            except Exception as exc:
                print("rejected:", type(exc).__name__)
        sess.run(None, {"x": np.ones((1, 256), np.float32)})
    """))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(a))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("rejected:") == 3 and "Traceback" not in proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert len(rec.samples) == 1 and rec.samples[0]["x"].dtype == np.float32
    assert rec.skipped == (("rejected by onnxruntime", 3),)
    shrunk = cli("shrink", str(a), "-o", str(tmp_path / "small"), "--inputs", str(out))
    assert shrunk.returncode == 0, shrunk.stderr


def test_a_failed_write_at_exit_is_one_line_and_loses_nothing_else(two_models: tuple[Path, Path, Path],
                                                                  tmp_path: Path) -> None:
    """The parent process runs one model, starts a child that runs the other, then cannot write its
    own part (a file size limit, as on a full disk): one line on stderr, no traceback, the child's
    recording kept, and the summary says a process could not write."""
    a, b, script = two_models
    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(f"""
        import resource, subprocess, sys
        import numpy as np, onnxruntime as ort
        subprocess.run([sys.executable, {str(script)!r}, {str(b)!r}, "5"], check=True)
        sess = ort.InferenceSession({str(a)!r})
        for i in range(30):
            sess.run(None, {{"x": np.random.default_rng(i).standard_normal((1, 256)).astype(np.float32)}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
        print("done")
    """))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(parent))
    assert proc.returncode == 1, proc.stderr  # a recording it meant to write is not complete
    assert "Traceback" not in proc.stderr
    assert "hatch-shrinkray: could not write the recording of a.onnx: File too large" in proc.stderr
    assert "could not write the recording of a.onnx: File too large: its calls are missing" in proc.stderr
    assert "the command itself exited 0" in proc.stderr
    assert [p.name.split("-")[0] for p in out.glob("*.npz")] == ["b"]
    assert not (out / ".parts").exists()


def _limit_file_size() -> None:
    """Files this process and its children write may not exceed 20 KB (as on a full disk: EFBIG),
    unless a child raises its own soft limit again."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, resource.RLIM_INFINITY))


@pytest.mark.parametrize("exit_code", [0, 3])
def test_a_recording_that_cannot_be_written_fails_record_and_leaves_nothing(
        two_models: tuple[Path, Path, Path], tmp_path: Path, exit_code: int) -> None:
    """The command's processes write their parts (they lift the limit), record's own write of the
    recording fails: record exits non-zero (the command's own code when it failed), names the model,
    and leaves neither a partial file nor the directory it created."""
    a, _, _ = two_models
    script = tmp_path / "lifted.py"
    script.write_text(textwrap.dedent(f"""
        import resource, sys
        import numpy as np, onnxruntime as ort
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        sess = ort.InferenceSession({str(a)!r})
        for i in range(40):
            sess.run(None, {{"x": np.random.default_rng(i).standard_normal((1, 256)).astype(np.float32)}})
        sys.exit({exit_code})
    """))
    out = tmp_path / "new" / "rec"
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "-o", str(out), "--", sys.executable, str(script)],
                          check=False, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limit_file_size)
    assert proc.returncode == (exit_code or 1), proc.stderr
    assert "error: could not write the recording of a.onnx (a-" in proc.stderr, proc.stderr
    assert "File too large; nothing of it was kept" in proc.stderr
    assert f"the command itself exited {exit_code}" in proc.stderr and "Traceback" not in proc.stderr
    assert "next:" not in proc.stdout
    assert not (tmp_path / "new").exists()  # no empty directory, no partial file


def test_a_full_disk_for_every_process_fails_record(two_models: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Nothing can be written by anyone (the parts and even the reports fail): record exits 1 and
    says the calls were lost, into an existing directory whose earlier recording stays as it was."""
    a, _, script = two_models
    out = tmp_path / "rec"
    assert cli("record", "-o", str(out), "--", sys.executable, str(script), str(a), "3").returncode == 0
    (before,) = out.glob("*.npz")
    kept = before.read_bytes()
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "-o", str(out), "--", sys.executable, "-c",
                           "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)); "
                           f"sys.argv = ['run.py', {str(a)!r}, '4000']; runpy.run_path({str(script)!r})"],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "the command itself exited 0" in proc.stderr and "Traceback" not in proc.stderr
    assert "a.onnx" in proc.stderr or "ended without writing what they recorded" in proc.stderr, proc.stderr
    assert [p.name for p in out.iterdir()] == [before.name] and before.read_bytes() == kept


def test_a_process_that_ends_without_writing_is_told_apart_from_nothing_ran(two_models: tuple[Path, Path, Path],
                                                                           tmp_path: Path) -> None:
    a, _, _ = two_models
    script = tmp_path / "exit.py"
    script.write_text(f"import os, numpy as np, onnxruntime as ort\n"
                      f"s = ort.InferenceSession({str(a)!r})\n"
                      "s.run(None, {'x': np.ones((1, 256), np.float32)})\nos._exit(0)\n")
    proc = cli("record", "-o", str(tmp_path / "r1"), "--", sys.executable, str(script))
    assert proc.returncode == 1  # its calls are lost
    assert "error: 1 Python process(es) ran models and ended without writing what they recorded" in proc.stderr
    assert "nothing recorded" in proc.stdout and "none imported onnxruntime" not in proc.stdout

    isolated = cli("record", "-o", str(tmp_path / "r2"), "--", sys.executable, "-I", str(script))
    assert isolated.returncode == 0
    assert "-I or -E, which ignore PYTHONPATH" in isolated.stdout, isolated.stdout

    plain = cli("record", "-o", str(tmp_path / "r3"), "--", sys.executable, "-c", "print('no model')")
    assert "1 Python process(es) ran, and none imported onnxruntime" in plain.stdout, plain.stdout
    exits = cli("record", "-o", str(tmp_path / "r4"), "--", sys.executable, "-c", "import os; os._exit(0)")
    assert "none imported onnxruntime" in exits.stdout and "warning" not in exits.stdout  # nothing to lose
    assert exits.returncode == 0 and exits.stderr == ""
    loaded = cli("record", "-o", str(tmp_path / "r5"), "--", sys.executable, "-c",
                 "import os, onnxruntime; os._exit(0)")  # onnxruntime imported, no model run: nothing lost
    assert loaded.returncode == 0 and "error" not in loaded.stderr, loaded.stderr


def test_multiprocessing_fork_workers_are_recorded(two_models: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, _, _ = two_models
    script = tmp_path / "pool.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing as mp
        import numpy as np, onnxruntime as ort

        def work(i):
            s = ort.InferenceSession({str(a)!r})
            s.run(None, {{"x": np.full((1, 256), i, np.float32)}})
            return i

        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                assert sorted(pool.map(work, range(6))) == list(range(6))
                pool.close()
                pool.join()
    """))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert rec.calls == 6 and len(rec.samples) == 6


@pytest.mark.parametrize("meta", [
    {"samples": "1"}, {"samples": [1]}, {"inputs": "x"}, {"picked": [["junk"]]}, {"streams": [[0, 0]]},
    {"feedback": [["nope", "y"]]}, {"skipped": {"a": 1}}, {"version": True}, {"calls": -1},
], ids="-".join)
def test_wrong_typed_metadata_is_one_error_line(tmp_path: Path, meta: dict[str, object]) -> None:
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    rec = Recording("0" * 64, "net.onnx", ("x",), ({"x": np.ones((1, 256), np.float32)},), 1, (0,), ("call:0",))
    path = write_recording(tmp_path, rec)
    with np.load(path) as data:
        arrays = dict(data)
    arrays["__meta__"] = np.array(json.dumps({**json.loads(str(arrays["__meta__"])), **meta}))
    np.savez(path, **arrays)
    proc = cli("shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(path))
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and "not a readable recording" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 2, proc.stderr


def test_deeply_nested_metadata_is_one_error_line(tmp_path: Path) -> None:
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    path = tmp_path / "junk.npz"
    np.savez(path, __meta__=np.array("[" * 100000 + "]" * 100000), s0000_0=np.ones((1, 256), np.float32))
    proc = cli("shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "not a readable recording" in proc.stderr


def test_a_second_run_that_replaces_a_recording_says_so(two_models: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Tests first, a calibration script second, into one directory: the second recording of a model
    replaces the first (one recording per model), and the summary says how many samples went and how
    to keep both."""
    a, _, script = two_models
    out = tmp_path / "rec"
    first = cli("record", "-o", str(out), "--", sys.executable, str(script), str(a), "5")
    assert first.returncode == 0, first.stderr
    assert "replaced an earlier recording" not in first.stdout
    second = cli("record", "-o", str(out), "--", sys.executable, str(script), str(a), "3")
    assert second.returncode == 0, second.stderr
    assert "a.onnx: replaced an earlier recording (5 samples)" in second.stdout, second.stdout
    assert "`hatch-shrinkray record --mode add` adds to it instead" in second.stdout
    (only,) = out.glob("*.npz")
    assert read_recording(only).calls == 3


def test_a_recording_that_would_expand_beyond_the_bound_is_refused_before_reading(tmp_path: Path) -> None:
    """A 300 KB file whose compact pair stands for 1.2 GB once loaded (300 million indices into a
    table of float32): refused from its headers, before any data is read, in one line naming the
    file and what to do; a member whose header declares more than it holds is refused too."""
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    rec = Recording("0" * 64, "net.onnx", ("x",), ({"x": np.ones((1, 256), np.float32)},), 1, (0,), ("call:0",))
    path = write_recording(tmp_path, rec)
    with np.load(path) as data:
        meta = data["__meta__"]

    def rewrite(target: Path, index_bytes: int) -> None:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False,
                                                      "shape": (300_000_000,)})
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, array in (("__meta__", meta), ("s0000_0.v", np.zeros(1, np.float32))):
                buffer = io.BytesIO()
                np.save(buffer, array)
                zf.writestr(f"{name}.npy", buffer.getvalue())
            with zf.open("s0000_0.i.npy", "w", force_zip64=True) as member:
                member.write(header.getvalue())
                chunk = bytes(1 << 20)
                for start in range(0, index_bytes, len(chunk)):
                    member.write(chunk[:index_bytes - start])

    rewrite(path, 300_000_000)
    assert path.stat().st_size < 1_000_000
    proc = cli("shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {path}: its samples would take 1200.0 MB once loaded, over the 1000 MB"), \
        proc.stderr
    assert "--max-memory" in proc.stderr and len(proc.stderr.splitlines()) <= 2

    rewrite(path, 1000)  # a header that claims 300 MB over 1000 bytes of data
    proc = cli("shrink", str(model_path), "-o", str(tmp_path / "o"), "--inputs", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "array 's0000_0.i' is corrupt: its header declares 300000000 bytes, more than the member holds" in \
        proc.stderr, proc.stderr


def test_the_pytest_plugin_fails_a_green_session_whose_recording_is_lost(two_models: tuple[Path, Path, Path],
                                                                         tmp_path: Path) -> None:
    a, _, _ = two_models
    (tmp_path / "test_full.py").write_text(textwrap.dedent(f"""
        import resource
        import numpy as np, onnxruntime as ort

        def test_runs_then_the_disk_fills():
            sess = ort.InferenceSession({str(a)!r})
            for i in range(30):
                sess.run(None, {{"x": np.random.default_rng(i).standard_normal((1, 256)).astype(np.float32)}})
            resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--shrinkray-record",
                           str(tmp_path / "rec"), str(tmp_path / "test_full.py")], capture_output=True, text=True,
                          check=False, cwd=tmp_path, timeout=300)
    assert "1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the test passed, the recording was lost
    assert "error: process " in proc.stdout and "could not write the recording of a.onnx" in proc.stdout, proc.stdout
    assert not (tmp_path / "rec").exists()  # nothing partial, no empty directory
