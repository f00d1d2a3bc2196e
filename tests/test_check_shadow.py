"""``check --shadow`` gates the package's answers, counted by the judges the build's verification
uses, not the rows or pixels behind them. Run as a user runs it (the console script, a throw-away
project, the command in a subprocess).

The model is a text detector's probability map (``[1, 1, 16, 32]``): a rectangle of text, and three
pixels just above it placed on the map judge's first threshold (0.3) so that int8 moves them across
it. Three pixel decisions flip; the region, what a detector boxes, stays the same.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hardening import cli
from onnx import helper

from hatch_shrinkray.engine import shrink
from hatch_shrinkray.options import ShrinkOptions

from onnx_builders import init, model, run, save, vi

K, H, W = 64, 16, 32
SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    x = np.random.default_rng(4).standard_normal((1, 64)).astype(np.float32)
    for _ in range(3):
        s.run(None, {"x": x})
''')


pytestmark = pytest.mark.usefixtures("private_cache")


def _map_model(bias: np.ndarray, w: np.ndarray) -> object:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["l"]),
             helper.make_node("Sigmoid", ["l"], ["s"]), helper.make_node("Reshape", ["s", "shape"], ["y"])]
    return model(nodes, [vi("x", [1, K])], [vi("y", [1, 1, H, W])],
                 [init("W", w), init("B", bias.reshape(1, -1)), init("shape", np.array([1, 1, H, W], np.int64))])


def detector(tmp_path: Path) -> Path:
    """The map model, with three pixels that int8 flips at 0.3 on the script's input."""
    w = (np.random.default_rng(3).standard_normal((K, H * W)) * 0.05).astype(np.float32)
    x = np.random.default_rng(4).standard_normal((1, K)).astype(np.float32)
    inside = np.zeros((H, W), bool)
    inside[4:12, 8:24] = True
    base = np.where(inside, 4.0, -4.0).astype(np.float32).reshape(-1)
    probe = save(_map_model(base, w), tmp_path / "probe.onnx")  # where int8 moves each logit on this input
    shrink(probe, tmp_path / "probe8.onnx", ShrinkOptions(method="int8", verify=None))
    got = run(tmp_path / "probe8.onnx", {"x": x})[0].reshape(-1).astype(np.float64)
    moved = np.log(got / (1 - got)) - base
    exact = (x @ w).reshape(-1)
    above = np.flatnonzero(np.isin(np.arange(H * W), np.arange(3 * W + 8, 3 * W + 24)))
    pick = above[np.argsort(-np.abs(moved[above] - exact[above]))[:3]]
    bias = base.copy()
    bias[pick] = np.log(0.3 / 0.7) - (exact[pick] + moved[pick]) / 2  # the threshold between the two
    return save(_map_model(bias, w), tmp_path / "det.onnx")


def test_pixels_that_flip_while_the_region_holds_pass_the_gate(tmp_path: Path) -> None:
    src = detector(tmp_path)
    script = tmp_path / "detect.py"
    script.write_text(SCRIPT)
    proc = cli("check", "--shadow", "--json", str(tmp_path / "shadow.json"), str(src), "--", sys.executable,
               str(script), str(src), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[-1] == ("verdict: ok (at most --max-flip-rate 0 of the answers changed); det.onnx: 9 of 1536 decisions "
                       "flipped, no answer changed"), out
    (row,) = [line for line in out if line.startswith("det.onnx ")]
    assert "1536 (decision)" in row and "9 (0.586%) in 3 call(s)" in row and row.endswith("0 of 3 maps (map)"), row
    assert " (0 changed; " in proc.stdout and " (3 changed; " not in proc.stdout, proc.stdout  # calls, as the gate
    stats = json.loads((tmp_path / "shadow.json").read_text())["models"][0]["outputs"]["y"]
    assert (stats["flips"], stats["answers"], stats["changed_answers"]) == (9, 3, 0)
