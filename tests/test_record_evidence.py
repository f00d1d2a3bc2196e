"""What a recording keeps (issue 19 item 4/5): units (tests, streams, calls), whole streams of a
recurrent model, count first within a hard byte cap, compact lossless storage, and files that are
reproducible and name no directory of the machine. Commands run as a user runs them: the console
script, real pytest, real onnxruntime models."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import cli
from onnx import helper

from hatch_shrinkray.recording import compact
from hatch_shrinkray.recording.storage import read_recording

from onnx_builders import mlp, model, save, vi
from realmodels import silero_vad

SILERO_STREAMS = textwrap.dedent("""
    import sys
    import numpy as np, onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1])
    sr = np.array(16000, np.int64)
    def clip(seed, chunks):
        rng = np.random.default_rng(seed)
        state = np.zeros((2, 1, 128), np.float32)
        probs = []
        for k in range(chunks):
            pcm = rng.integers(-3000, 3000, 576).astype(np.int16)
            out, state = sess.run(None, {"input": (pcm / 32768.0).astype(np.float32)[None], "state": state, "sr": sr})
            probs.append(float(out[0, 0]))
        return probs
    for seed, chunks in ((1, 12), (2, 30), (1, 12), (3, 5)):  # the first clip runs twice
        clip(seed, chunks)
""")


@pytest.mark.network
def test_a_recurrent_model_is_recorded_as_whole_streams(tmp_path: Path) -> None:
    script = tmp_path / "stream.py"
    script.write_text(SILERO_STREAMS)
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(silero_vad()))
    assert proc.returncode == 0, proc.stderr
    assert "4 streams" in proc.stdout and "3 streams, 47 steps" in proc.stdout, proc.stdout
    assert "silero_vad.onnx: 1 stream fed the very steps of another (or of its start) and was merged into it" \
        in proc.stdout, proc.stdout
    rec = read_recording(next(out.glob("silero_vad-*.npz")))
    assert rec.feedback == (("state", "stateN"),)
    assert [len(s) for s in rec.streams] == [12, 30, 5]  # the repeated clip is kept once
    assert rec.units[rec.streams[1][0]] == "stream:1" and rec.calls == 59
    for stream in rec.streams:
        assert set(rec.samples[stream[0]]) == {"input", "state", "sr"}  # the first step holds the state
        assert all(set(rec.samples[i]) == {"input", "sr"} for i in stream[1:])  # later ones do not
    assert rec.extra["stream_steps"] == [12, 30, 5]

    shrunk = cli("-v", "shrink", str(silero_vad()), "-o", str(tmp_path / "small"), "--inputs", str(out),
                 "--max-rel-l2", "1")
    assert shrunk.returncode == 0, shrunk.stderr
    assert "3 streams, 47 steps of 59 calls" in shrunk.stdout
    # Verified as the program runs it: each stream from its first step on, the shrunk model on its own state.
    assert "on 3 recorded streams (47 steps) in closed loop; " in shrunk.stdout
    assert "segments 3/3 segment lists same (" in shrunk.stdout and "values" in shrunk.stdout  # stateN: numbers only


@pytest.mark.network
def test_streams_are_cut_to_prefixes_to_fit_and_at_least_16_are_kept(tmp_path: Path) -> None:
    script = tmp_path / "many.py"
    script.write_text(SILERO_STREAMS.replace("((1, 12), (2, 30), (1, 12), (3, 5))",
                                             "[(s, 40) for s in range(20)]"))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--max-bytes", "200000", "--", sys.executable, str(script),
               str(silero_vad()))
    assert proc.returncode == 0, proc.stderr
    path = next(out.glob("*.npz"))
    rec = read_recording(path)
    assert len(rec.streams) >= 16 and all(len(s) >= 2 for s in rec.streams)
    assert any(len(s) < 40 for s in rec.streams) and "cut to a prefix" in proc.stdout
    assert _sample_bytes(path) <= 200000


TESTS = textwrap.dedent("""
    import subprocess, sys
    import numpy as np, onnxruntime as ort
    MODEL = {model!r}

    def run(n, seed):
        sess = ort.InferenceSession(MODEL)
        rng = np.random.default_rng(seed)
        for _ in range(n):
            sess.run(None, {{"x": rng.standard_normal((1, 256)).astype(np.float32)}})

    def test_many_calls():
        run(200, 1)

    def test_one_call():
        run(1, 2)

    def test_in_a_subprocess():
        here = __file__.rsplit("/", 1)[0]
        code = f"import sys; sys.path.insert(0, {{here!r}}); import test_units; test_units.run(3, 3)"
        subprocess.run([sys.executable, "-c", code], check=True)
""")


@pytest.mark.parametrize("how", ["plugin", "command"])
def test_samples_are_spread_over_the_tests_that_ran_the_model(how: str, tmp_path: Path) -> None:
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    (tmp_path / "test_units.py").write_text(TESTS.format(model=str(model_path)))
    out = tmp_path / "inputs"
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_units.py"]
    if how == "plugin":
        proc = subprocess.run([*pytest_cmd, "--shrinkray-record", str(out), "--shrinkray-record-samples", "8"],
                              capture_output=True, text=True, check=False, cwd=tmp_path, timeout=300)
    else:
        proc = cli("record", "-o", str(out), "--max-samples", "8", "--", *pytest_cmd, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert rec.calls == 204 and len(rec.samples) == 8
    counts = {u: rec.units.count(u) for u in set(rec.units)}
    assert counts == {"test:test_units.py::test_many_calls": 4, "test:test_units.py::test_one_call": 1,
                      "test:test_units.py::test_in_a_subprocess": 3}, counts
    many = [p for p, u in zip(rec.picked, rec.units, strict=True) if u.endswith("test_many_calls")]
    assert many[-1] - many[0] >= 180  # spread over the test's calls, not its first four
    assert "3 tests" in proc.stdout and "8 samples from 3 tests" in proc.stdout


STANDALONE = textwrap.dedent("""
    import sys
    import numpy as np, onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1])
    rng = np.random.default_rng(0)
    rows = [int(r) for r in sys.argv[2].split(",")]
    for rows_i in rows:
        sess.run(None, {"x": rng.standard_normal((rows_i, 256)).astype(np.float32)})
""")


def test_count_first_and_a_large_feed_is_left_out_not_kept_alone(tmp_path: Path) -> None:
    """300 small calls and one feed that alone is over the cap: 256 small ones kept (the default count),
    the large one skipped and said so; the file's sample bytes stay under the cap."""
    model_path = save(mlp(256, 64), tmp_path / "net.onnx")
    script = tmp_path / "calls.py"
    script.write_text(STANDALONE)
    rows = ["1"] * 150 + ["3000"] + ["1"] * 150
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--max-bytes", "1000000", "--", sys.executable, str(script),
               str(model_path), ",".join(rows))
    assert proc.returncode == 0, proc.stderr
    path = next(out.glob("*.npz"))
    rec = read_recording(path)
    assert len(rec.samples) == 256 and rec.calls == 301
    assert all(s["x"].shape == (1, 256) for s in rec.samples)
    assert rec.skipped == (("over --max-samples", 44), ("over the byte cap", 1))  # every call not kept, and why
    assert "1 over the byte cap" in proc.stdout and "1 feed(s) alone take more than 1.00 MB in the file" in proc.stdout
    assert set(rec.units) == {f"call:{p}" for p in rec.picked}
    assert _sample_bytes(path) <= 1_000_000


def test_a_giant_feed_is_left_out_by_what_it_takes_in_memory(tmp_path: Path) -> None:
    """One 300 MB feed among 20 small ones: it compresses to almost nothing, yet a build would load
    all of it, so it is left out (a feed may take a sixteenth of --max-memory) and named; the
    recording holds the 20 small ones, and the command's own exit code passes through."""
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)], [vi("x", ["n"])], [vi("y", [])])
    model_path = save(m, tmp_path / "reduce.onnx")
    script = tmp_path / "big.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np, onnxruntime as ort
        sess = ort.InferenceSession(sys.argv[1])
        for n in range(10, 30):
            sess.run(None, {"x": np.arange(n, dtype=np.float32)})
        sess.run(None, {"x": np.ones(75_000_000, np.float32)})  # 300 MB
        sys.exit(3)
    """))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--max-bytes", "8000000", "--", sys.executable, str(script),
               str(model_path), timeout=600)
    assert proc.returncode == 3, proc.stderr  # the command's own exit code
    assert "Traceback" not in proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert [s["x"].shape for s in rec.samples] == [(n,) for n in range(10, 30)]
    assert rec.skipped == (("over the memory cap", 1),) and rec.nbytes < 8_000_000
    assert "reduce.onnx: 1 feed(s) alone take more than 32.00 MB once loaded" in proc.stdout, proc.stdout


def page(seed: int) -> np.ndarray:
    """A text detector's input from an 8-bit page: white background, dark word boxes with grey edges."""
    rng = np.random.default_rng(seed)
    img = np.full((960, 960, 3), 236, np.int16)
    for _ in range(250):
        y, x = rng.integers(0, 940), rng.integers(0, 900)
        h, w, g = rng.integers(8, 20), rng.integers(20, 60), rng.integers(0, 90)
        img[y:y + h, x:x + w] = g
        img[max(y - 1, 0):y + h + 1, max(x - 1, 0)] = (g + 236) // 2
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return ((img.astype(np.uint8).astype(np.float32) / 255 - mean) / std).transpose(2, 0, 1)[None].copy()


def test_detector_pages_are_stored_compactly_and_exactly(tmp_path: Path) -> None:
    m = model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3])], [vi("x", [1, 3, 960, 960])],
              [vi("y", [1, 3, 1, 1])], opset=17)
    model_path = save(m, tmp_path / "det.onnx")
    pages = tmp_path / "pages.npy"
    np.save(pages, np.stack([page(i) for i in range(20)]))
    script = tmp_path / "det.py"
    script.write_text("import sys, numpy as np, onnxruntime as ort\n"
                      "s = ort.InferenceSession(sys.argv[1])\n"
                      "for p in np.load(sys.argv[2]): s.run(None, {'x': p})\n")
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(model_path), str(pages))
    assert proc.returncode == 0, proc.stderr
    path = next(out.glob("*.npz"))
    rec = read_recording(path)
    assert len(rec.samples) == 20  # 20 pages of 11 MB of floats each, under the default 8 MB
    assert path.stat().st_size < 20 * 500_000
    originals = np.load(pages)
    for sample, k in zip(rec.samples, rec.picked, strict=True):
        assert sample["x"].view(np.uint32).tobytes() == originals[k].view(np.uint32).tobytes()
    with np.load(path, allow_pickle=False) as data:  # numpy alone decodes it, as the docstring says
        values, index = data["s0000_0.v"], data["s0000_0.i"]
        decoded = np.stack([values[c][index[:, c]] for c in range(values.shape[0])], axis=1)
        assert decoded.tobytes() == originals[0].tobytes()


def _pages(tmp_path: Path, loop: str) -> tuple[Path, Path]:
    """A detector-shaped model (the mean of each channel of an image of any size) and a script that
    opens it and runs ``loop`` (seeded ``rng``, session ``s``)."""
    m = model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3])], [vi("x", [1, 3, "h", "w"])],
              [vi("y", [1, 3, 1, 1])], opset=17)
    script = tmp_path / "photos.py"
    script.write_text("import sys\nimport numpy as np, onnxruntime as ort\ns = ort.InferenceSession(sys.argv[1])\n"
                      "rng = np.random.default_rng(0)\n" + textwrap.dedent(loop))
    return save(m, tmp_path / "det.onnx"), script


def test_photograph_pages_keep_sixteen_units_under_the_default_caps(tmp_path: Path) -> None:
    """Pages with noise in every pixel (what a camera gives) take about a megabyte each, deflated:
    the default byte bound grows so that 16 of the 20 calls are kept; a bound given on the command
    line is hard, and the table says what bound would keep 16."""
    model_path, script = _pages(tmp_path, """
        for k in range(20):
            img = (np.linspace(20, 220, 640)[None, :, None] + rng.integers(-6, 7, (640, 640, 3))).astype(np.uint8)
            x = ((img.astype(np.float32) / np.float32(255) - np.float32(0.5)) / np.float32(0.5))
            s.run(None, {"x": np.ascontiguousarray(x.transpose(2, 0, 1)[None])})
    """)
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(model_path))
    assert proc.returncode == 0, proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert len(rec.samples) >= 16 and len(set(rec.units)) >= 16 and rec.calls == 20
    assert 8_000_000 < _sample_bytes(next(out.glob("*.npz"))) <= 64_000_000
    assert sum(n for _, n in rec.skipped) == 20 - len(rec.samples)
    assert "fewer than the 16" not in proc.stdout

    hard = cli("record", "-o", str(tmp_path / "hard"), "--max-bytes", "4000000", "--", sys.executable, str(script),
               str(model_path))
    assert hard.returncode == 0, hard.stderr
    path = next((tmp_path / "hard").glob("*.npz"))
    assert _sample_bytes(path) <= 4_000_000 and len(read_recording(path).samples) < 16
    note = next(line for line in hard.stdout.splitlines() if "fewer than the 16" in line)
    assert note.startswith("note: det.onnx: kept ") and " of 20 independent units" in note, note
    suggested = int(note.rsplit("--max-bytes ", 1)[1].split()[0])
    assert suggested > 4_000_000 and _sample_bytes(next(out.glob("*.npz"))) <= 2 * suggested


def test_with_fewer_units_than_evidence_needs_no_bound_is_offered(tmp_path: Path) -> None:
    """Four photograph pages ran, three fit the bound: no bound keeps sixteen of four, so the note asks
    for more of the program's use instead of naming a ``--max-bytes`` (speechmos's tests met that)."""
    model_path, script = _pages(tmp_path, """
        for k in range(4):
            x = rng.integers(-6, 7, (1, 3, 640, 640)).astype(np.float32) / np.float32(7)
            s.run(None, {"x": x})
    """)
    proc = cli("record", "-o", str(tmp_path / "rec"), "--max-bytes", "2500000", "--", sys.executable, str(script),
               str(model_path))
    assert proc.returncode == 0, proc.stderr
    note = next(line for line in proc.stdout.splitlines() if "fewer than the 16" in line)
    assert note.startswith("note: det.onnx: kept ") and " of 4 independent units" in note, note
    assert note.endswith("evidence needs: record more of its use") and "--max-bytes" not in note, note


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_compact_storage_is_bit_exact(dtype: type) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 200, (2, 3, 40, 40)).astype(dtype)
    if dtype != np.int64:
        flat = a.reshape(-1)
        flat[:4] = [-0.0, np.nan, np.inf, 0.0]
        flat.view(np.uint32 if dtype == np.float32 else np.uint16)[5] |= 1 if dtype == np.float32 else 0
        flat[6] = np.frombuffer(b"\x01\x00\xc0\x7f" if dtype == np.float32 else b"\x01\x7e", dtype=dtype)[0]
    encoded = compact.encode(a)
    assert encoded is not None and encoded[1].dtype == np.uint8
    back = compact.decode(*encoded)
    assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
    noise = rng.standard_normal(5000).astype(np.float32)
    assert compact.encode(noise) is None  # continuous values stay as they are


def test_recordings_are_reproducible_private_and_get_normal_modes(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "models").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n')
    model_path = save(mlp(256, 64), project / "models" / "net.onnx")
    elsewhere = save(mlp(256, 32), tmp_path / "other.onnx")
    script = tmp_path / "both.py"
    script.write_text(STANDALONE + "sess = ort.InferenceSession(sys.argv[3])\n"
                      "sess.run(None, {'x': np.ones((2, 256), np.float32)})\n")
    digests = []
    for run in ("a", "b"):
        out = project / "tests" / f"inputs-{run}"
        proc = subprocess.run([str(Path(sys.executable).parent / "hatch-shrinkray"), "record", "-o", str(out), "--",
                               sys.executable, str(script), str(model_path), "1,2,3", str(elsewhere)],
                              capture_output=True, text=True, check=False, cwd=tmp_path,
                              preexec_fn=lambda: os.umask(0o027))
        assert proc.returncode == 0, proc.stderr
        files = sorted(out.iterdir())
        digests.append([f.read_bytes() for f in files])
        assert [stat.S_IMODE(f.stat().st_mode) for f in files] == [0o640, 0o640]
        for f in files:
            assert str(tmp_path).encode() not in f.read_bytes()
            with zipfile.ZipFile(f) as zf:
                assert str(tmp_path) not in zf.read("__meta__.npy").decode("latin-1")
        models = {json.loads(str(np.load(f)["__meta__"]))["model"] for f in files}
        assert models == {"models/net.onnx", "other.onnx"}  # project-relative, else the file name
    assert digests[0] == digests[1]


def _sample_bytes(path: Path) -> int:
    """What ``--max-bytes`` bounds: every member but ``__meta__``, with its zip headers."""
    with zipfile.ZipFile(path) as zf:
        return sum(30 + 46 + 2 * len(i.filename) + i.compress_size for i in zf.infolist()
                   if i.filename != "__meta__.npy")



@pytest.mark.network
def test_streams_interleaved_on_one_session_are_told_apart(tmp_path: Path) -> None:
    """A server stepping two audio streams with one session: each call continues the stream whose
    state it is fed, so the recording holds two whole streams, not one stream of mixed steps."""
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np, onnxruntime as ort
        sess = ort.InferenceSession(sys.argv[1])
        sr = np.array(16000, np.int64)
        rng = np.random.default_rng(0)
        states = {"a": np.zeros((2, 1, 128), np.float32), "b": np.zeros((2, 1, 128), np.float32)}
        for k in range(10):
            for who in ("a", "b") if k % 3 else ("b", "a"):
                chunk = rng.integers(-3000, 3000, 576).astype(np.float32)[None] / 32768
                _, states[who] = sess.run(None, {"input": chunk, "state": states[who], "sr": sr})
    """))
    out = tmp_path / "rec"
    proc = cli("record", "-o", str(out), "--", sys.executable, str(script), str(silero_vad()))
    assert proc.returncode == 0, proc.stderr
    rec = read_recording(next(out.glob("*.npz")))
    assert [len(s) for s in rec.streams] == [10, 10] and rec.feedback == (("state", "stateN"),)
    calls = [[rec.picked[i] for i in s] for s in rec.streams]
    assert calls[0][:4] == [0, 3, 5, 6] and calls[1][:4] == [1, 2, 4, 7]  # b, then a, as each ran
