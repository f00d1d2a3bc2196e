"""``record`` tells state from a pass-through: an encoder that hands its mask input back as an output
is stateless, however often the next call gets the same mask. Run as a user runs it (the console
script, a script in a subprocess)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from hardening import cli
from onnx import TensorProto, helper

from hatch_shrinkray.verification.recordings import read_recording

from onnx_builders import init, model, save, vi, weight

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    mask = np.ones((1, 8), np.int64)
    for _ in range(20):  # twenty names, each encoded alone, the mask the same every time
        s.run(None, {"x": rng.standard_normal((1, 8, 256)).astype(np.float32), "src_mask": mask})
''')


def encoder() -> object:
    """``y = x @ W``; ``src_mask_out`` is ``src_mask`` as it came in."""
    return model([helper.make_node("MatMul", ["x", "W"], ["y"]),
                  helper.make_node("Identity", ["src_mask"], ["src_mask_out"])],
                 [vi("x", [1, 8, 256]), vi("src_mask", [1, 8], TensorProto.INT64)],
                 [vi("y", [1, 8, 128]), vi("src_mask_out", [1, 8], TensorProto.INT64)],
                 [init("W", weight((256, 128), 3))])


def test_an_output_that_hands_an_input_back_is_not_state(tmp_path: Path) -> None:
    src = save(encoder(), tmp_path / "encoder.onnx")
    script = tmp_path / "encode.py"
    script.write_text(SCRIPT)
    out = tmp_path / "rec"
    proc = cli("record", "--output", str(out), "--", sys.executable, str(script), str(src), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("*.npz")
    rec = read_recording(path)
    assert rec.feedback == () and rec.streams == (), (rec.feedback, rec.streams)  # was src_mask <- src_mask_out
    assert len(rec.samples) == 20 and len(set(rec.units)) == 20  # every call its own unit
    assert all("src_mask" in s for s in rec.samples)  # every call keeps its whole feed
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("encoder.onnx")]
    assert "20 calls" in row and "streams" not in row, row
