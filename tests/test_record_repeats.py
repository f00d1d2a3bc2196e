"""The coverage table tells units that repeat from units a bound left out."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hardening import cli

from hatch_shrinkray.capture.recorder import ModelLog, part_of
from hatch_shrinkray.capture.streams import Step
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.merge import Part, merge
from hatch_shrinkray.recording.storage import read_recording

from onnx_builders import mlp, save


def test_repeated_feeds_are_named_as_the_reason_for_few_units_and_no_bound_is_suggested(tmp_path: Path) -> None:
    model_path = save(mlp(k=8, n=8, classes=3), tmp_path / "m.onnx")
    script = tmp_path / "repeat.py"
    script.write_text("import sys, numpy as np, onnxruntime as ort\n"
                      "s = ort.InferenceSession(sys.argv[1])\n"
                      "for k in range(20): s.run(None, {'x': np.full((1, 8), k % 5, np.float32)})\n")
    proc = cli("record", "-o", str(tmp_path / "rec"), "--", sys.executable, str(script), str(model_path))
    assert proc.returncode == 0, proc.stderr
    rec = read_recording(next((tmp_path / "rec").glob("*.npz")))
    assert len(rec.samples) == 5 and dict(rec.skipped) == {"repeating a kept feed": 15}
    note = next(line for line in proc.stdout.splitlines() if "(16 make evidence)" in line)
    assert note.startswith("note: m.onnx: kept 5 distinct units of 20 that ran"), note
    assert "the rest repeat kept feeds" in note and "--max-bytes" not in note


def test_the_table_counts_the_calls_outside_tests_beside_the_tests() -> None:
    """A package's tests plus a calibration script: the samples of the script's calls are no test's."""
    rng = np.random.default_rng(0)
    parts = []
    for unit, n in (("test:t0", 2), ("test:t1", 1), ("", 5)):
        log = ModelLog("a" * 64, "/abs/m.onnx", ("x",), Caps())
        for _ in range(n):
            log.observe({"x": rng.standard_normal((1, 8)).astype(np.float32)}, Step(-1, 0, ()), unit, False)
        parts.append(Part(*part_of(log)))
    merged = merge(parts, Caps(), Path("/abs"))
    assert merged.kept == "8 samples from 2 tests and 5 other calls"
