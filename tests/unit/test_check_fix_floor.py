"""``check --fix``'s per-tensor rung compares each candidate with round-to-nearest int8 on the recording
before it costs a run (``checking.fixplan.Floor``): what its refusal says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from hatch_shrinkray.checking.fixplan import Floor
from hatch_shrinkray.checking.search import outputs_on
from hatch_shrinkray.fitting.guard import Scorer
from hatch_shrinkray.verification.inputs import Samples

from onnx_builders import init, model, save, vi, weight


def _matmul(path: Path, w: np.ndarray) -> Path:
    return save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", 32])],
                      [vi("y", ["batch", 16])], [init("W", w)]), path)


def test_a_candidate_refused_on_a_tie_says_the_error_that_decided(tmp_path: Path) -> None:
    """Outputs of values only tie at 0 vs 0 answers and decisions: the refusal names the error that
    decided, not only the tied counts."""
    w = weight((32, 16), seed=1)
    original = _matmul(tmp_path / "original.onnx", w)
    plain = _matmul(tmp_path / "plain.onnx", w + 0.001 * weight((32, 16), seed=2))
    worse = _matmul(tmp_path / "worse.onnx", w + 0.01 * weight((32, 16), seed=3))
    feeds = [{"x": weight((4, 32), seed=10 + i)} for i in range(8)]
    samples = Samples(feeds, "test feeds", True)
    names, base = outputs_on(original, samples, "m.onnx")
    score = Scorer.of(names, base, samples.sequencing(), None, feeds)
    floor = Floor("m.onnx", samples, "the recording", score, score(outputs_on(plain, samples, "m.onnx")[1]))
    said = floor.worse(worse)
    assert said.startswith("worse than round-to-nearest int8 on 8 units of the recording (0 vs 0 "), said
    assert ", and on a tie the error: squared rel-L2 " in said and said.endswith(")"), said
    error = said.split("squared rel-L2 ")[1].rstrip(")")
    fitted, rtn = (float(x) for x in error.split(" vs "))
    assert fitted > rtn > 0
    assert floor.worse(plain) == ""  # round-to-nearest's own bytes are not below its floor
