"""What ``record`` keeps and says: an encoder that hands its mask input back as an output is stateless,
however often the next call gets the same mask; on the wheel path, the coverage table lists the
configured models inside the installed package that the command never ran. Run as a user runs it
(the console script, a script in a subprocess)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from hardening import cli
from onnx import TensorProto, helper

from hatch_shrinkray.recording.storage import read_recording

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


def test_the_wheel_path_table_lists_the_installed_models_that_never_ran(tmp_path: Path) -> None:
    """The project's globs name files inside an installed package (``pkg/models/*.onnx``), which the
    project does not hold: the models are found beside the one the command ran."""
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "pkg" / "models"
    site.mkdir(parents=True)
    ran = save(encoder(), site / "a.onnx")
    other = encoder()
    other.graph.initializer[0].raw_data = bytes(reversed(other.graph.initializer[0].raw_data))
    save(other, site / "b.onnx")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.hatch-shrinkray]\n'
                                         'models = ["pkg/models/*.onnx"]\ninputs = "rec"\n')
    script = tmp_path / "encode.py"
    script.write_text(SCRIPT)
    proc = cli("record", "--output", "rec", "--", sys.executable, str(script), str(ran), cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("a.onnx", "pkg/"))]
    assert [r[:2] for r in rows] == [["a.onnx", "a-" + rows[0][1][2:]], ["pkg/models/b.onnx", "(never"]], rows
    assert rows[1][2] == "ran)"
    assert "note: pkg/models/b.onnx was never loaded: record a command that loads it" in proc.stdout
    assert "note: pkg/models/a.onnx" not in proc.stdout  # the model that ran is not listed as never run
