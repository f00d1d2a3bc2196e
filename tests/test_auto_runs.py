"""auto through processes and on a real model: an interrupted run, and the guard's verdicts on Magika
(the in-process tests are tests/unit/test_auto.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink

from realmodels import magika


@pytest.mark.process
def test_an_interrupted_run_does_not_wait_for_its_background_job() -> None:
    """The engine measures the original's sizes in the background while it encodes (minutes at
    brotli 11 for a big model). Ctrl-C meanwhile ends the process at once; a failing job's error
    reaches whoever asks for its result."""
    import subprocess
    import sys
    import time

    from hatch_shrinkray.pool import Background

    assert Background(lambda: 6 * 7).result() == 42
    with pytest.raises(ZeroDivisionError):
        Background(lambda: 1 // 0).result()
    script = ("import time\nfrom hatch_shrinkray.pool import Background, checkpoint\n"  # a job stops at a checkpoint
              "job = Background(lambda: [checkpoint() or time.sleep(0.05) for _ in range(1200)])\n"
              "raise KeyboardInterrupt\n")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50, check=False)
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    assert time.perf_counter() - start < 30


def _file_features(data: bytes) -> np.ndarray:
    """Magika's input for one file: its first and last 1024 bytes, padded with 256."""
    head, tail = list(data[:1024]), list(data[-1024:]) if len(data) > 1024 else []
    return np.array(head + [256] * (1024 - len(head)) + [256] * (1024 - len(tail)) + tail, np.int32)


def _magika_recording(directory: Path, files: list[list[bytes]]) -> tuple[Path, Path]:
    """Magika's model, and a recording of one call per group of ``files`` in ``directory``."""
    import hashlib

    from hatch_shrinkray.recording.format import Recording
    from hatch_shrinkray.recording.storage import write_recording

    source = magika()
    samples = tuple({"bytes": np.stack([_file_features(data) for data in call])} for call in files)
    n = len(samples)
    directory.mkdir()
    write_recording(directory, Recording(hashlib.sha256(source.read_bytes()).hexdigest(), "model.onnx", ("bytes",),
                                         samples, n, tuple(range(n)), tuple(f"call:{i}" for i in range(n))))
    return source, directory


@pytest.mark.network
@pytest.mark.extended
def test_auto_says_when_round_to_nearest_ships_and_spends_error_only_for_bytes(tmp_path: Path) -> None:
    """Magika on 20 calls of 4 pieces (thirds) of the files of its own pinned wheel (Python source, JSON,
    Markdown, the model, a native executable). On the 10 held-out calls auto's plan ties round-to-nearest
    int8 on decisions (none flipped) at more error: ten units cannot tell that tie from chance, so the
    smaller error wins and auto ships exactly what method int8 ships with the same recording, and says
    so (it used to print "auto's plan kept" for the same bytes, compared with themselves)."""
    import os
    import re
    import zipfile

    from hardening import cli

    from realmodels import CACHE

    magika()
    (wheel,) = (CACHE / "wheels").glob("magika-1.0.3-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        members = [zf.read(i) for i in sorted(zf.infolist(), key=lambda i: i.filename) if i.file_size > 64]
    pieces = [data[k * len(data) // 3:(k + 1) * len(data) // 3] for data in members for k in range(3)]
    pick = np.random.default_rng(1).choice(len(pieces), 80, replace=False)
    source, _ = _magika_recording(tmp_path / "rec", [[pieces[j] for j in pick[i:i + 4]] for i in range(0, 80, 4)])
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache")}
    int8 = cli("shrink", str(source), "-o", str(tmp_path / "int8"), "--method", "int8", "--inputs",
               str(tmp_path / "rec"), env=env)
    auto = cli("-v", "shrink", str(source), "-o", str(tmp_path / "auto"), "--method", "auto", "--inputs",
               str(tmp_path / "rec"), env=env)
    assert int8.returncode == auto.returncode == 0, int8.stderr + auto.stderr
    line, detail = auto.stdout.splitlines()[:2]
    assert (tmp_path / "auto/model.onnx").read_bytes() == (tmp_path / "int8/model.onnx").read_bytes()
    assert ", int8: same labels on 10 held-out calls" in line, line
    lost = re.search(r"auto's plan not kept \(int8 with its fitted rounding ships\): on 10 held-out units \(the "
                     r"held-out half\), 0 vs 0 labels changed, 0 vs 0 decisions flipped, rel-L2 (\S+) vs (\S+) for "
                     r"round-to-nearest", detail)
    assert lost and float(lost[1]) > float(lost[2]), detail


WORDS = ["def", "class", "import", "return", "self", "value", "data", "model", "the", "of", "and", "to", "in",
         "for", "if", "else", "while", "with", "as", "from"]


def _generated_file(rng: np.random.Generator) -> bytes:
    """A small file of one of five kinds (prose-like text, JSON, deflated bytes, an ELF-like binary,
    HTML), seeded."""
    kind = int(rng.integers(0, 5))
    if kind == 0:
        return "\n".join(" ".join(rng.choice(WORDS, rng.integers(2, 9))) for _ in range(rng.integers(20, 200))).encode()
    if kind == 1:
        import json

        table = {str(i): [int(x) for x in rng.integers(0, 999, 5)] for i in range(rng.integers(5, 80))}
        return json.dumps(table).encode()
    if kind == 2:
        import zlib

        return zlib.compress(rng.integers(0, 40, rng.integers(2000, 9000)).astype(np.uint8).tobytes())
    if kind == 3:
        return b"\x7fELF\x02\x01\x01" + bytes(rng.integers(0, 4, rng.integers(3000, 9000)).astype(np.uint8))
    return b"<html><body>" + b"".join(b"<p>%s</p>" % " ".join(rng.choice(WORDS, 6)).encode()
                                      for _ in range(rng.integers(10, 90))) + b"</body></html>"


@pytest.mark.network
@pytest.mark.extended
def test_auto_on_few_held_out_units_spends_no_error_on_a_tie(tmp_path: Path) -> None:
    """Magika recorded on 20 calls of 4 generated files, 10 held out. The search finds a plan smaller
    than round-to-nearest int8 that ties it on the 40 held-out decisions; one such plan at 1.4x its error
    had shipped and changed 1 of 380 unseen labels. Ten units cannot tell that tie from chance, so the
    smaller error wins, and the line says so: here the plan's is smaller (int8's scales are fp16 in
    ``auto``), so the plan ships, smaller than method int8's model (the test above: the other way)."""
    import re

    rng = np.random.default_rng(3)
    source, rec = _magika_recording(tmp_path / "rec", [[_generated_file(rng) for _ in range(4)] for _ in range(20)])
    options = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=rec))
    auto = shrink(source, tmp_path / "auto.onnx", options)
    shrink(source, tmp_path / "int8.onnx", ShrinkOptions(method="int8", verify=VerifyOptions(inputs=rec)))
    assert auto.verification is not None
    said = auto.verification.fitting
    versus = re.search(r"^auto's plan kept: on 10 held-out units \(the held-out half\), 0 vs 0 labels changed, 0 vs 0 "
                       r"decisions flipped, rel-L2 (\S+) vs (\S+) for round-to-nearest", said)
    assert versus and float(versus[1]) < float(versus[2]), said
    assert (tmp_path / "auto.onnx").stat().st_size < (tmp_path / "int8.onnx").stat().st_size
