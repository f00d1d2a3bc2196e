"""What a fitting method pays before it fits anything: work whose result is already known is not
done again (the calibration run of a model with no activation to sum, a second run of the same
weights), with the same results."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

from hatch_shrinkray import ShrinkOptions
from hatch_shrinkray.fitting import probe as probe_module
from hatch_shrinkray.fitting.calibrate import calibrate
from hatch_shrinkray.methods.auto_search import choose
from hatch_shrinkray.methods.auto_weights import analyse
from hatch_shrinkray.samples import Calibration, Sequencing

from onnx_builders import if_model, model, vi, weight

K = 64
"""The models' input width."""


def recurrent_if() -> onnx.ModelProto:
    """stateN = If(c, then: Tanh(state @ W_then + x), else: Tanh(state @ W_else + x)): a recurrent
    model whose only weights sit inside branches, so the main graph shows no activation of theirs."""
    def branch(name: str, seed: int) -> onnx.GraphProto:
        w = weight((K, K), seed) * 0.3
        return helper.make_graph(
            [helper.make_node("Constant", [], [f"W_{name}"], value=helper.make_tensor(
                f"W_{name}", onnx.TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())),
             helper.make_node("MatMul", ["state", f"W_{name}"], [f"m_{name}"]),
             helper.make_node("Add", [f"m_{name}", "x"], [f"a_{name}"]),
             helper.make_node("Tanh", [f"a_{name}"], [f"s_{name}"])],
            name, [], [vi(f"s_{name}", [1, K])])

    node = helper.make_node("If", ["c"], ["stateN"], then_branch=branch("then", 1), else_branch=branch("else", 2))
    return model([node], [vi("x", [1, K]), vi("state", [1, K]), vi("c", [], onnx.TensorProto.BOOL)],
                 [vi("stateN", [1, K])])


def _streams(n: int) -> Calibration:
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((1, K)).astype(np.float32), "state": np.zeros((1, K), np.float32),
              "c": np.array(i % 7 != 3)} for i in range(n)]
    streams = ((0, 1, 2, 3, 4), (5, 6, 7), (8, 9, 10, 11, 12, 13), (14, 15))
    return Calibration(feeds, Sequencing(tuple(f"s{k}" for k, s in enumerate(streams) for _ in s),
                                         (("state", "stateN"),), streams))


def test_a_model_with_no_activation_to_sum_is_calibrated_in_one_run_of_the_same_outputs() -> None:
    """Nothing to capture: the outputs come from one run of every stream (side by side), the same
    outputs, each stream in closed loop, as the feed-by-feed run that sums activations gives."""
    calibration = _streams(16)
    cal = calibrate(recurrent_if(), ShrinkOptions(min_elements=1024), calibration, weights_as_feeds=True, folds=2)
    assert cal is not None and cal.moments == {} and cal.fold_sums == [{}, {}]
    assert cal.probe.runs == 1 and not cal.probe.probe.captured
    one_by_one = {i: outs for i, outs, _ in cal.probe.captures()}
    assert len(cal.base) == len(one_by_one) == 16
    for i, outs in enumerate(cal.base):
        assert all(np.array_equal(a, b) for a, b in zip(outs, one_by_one[i], strict=True)), i
    assert not np.array_equal(cal.base[4][0], cal.base[0][0])  # the state was fed back


@pytest.fixture
def full_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A digest of the weights of every run on all feeds."""
    seen: list[str] = []
    run = probe_module.Probe.run

    def counted(self: probe_module.Probe, replace: dict[Any, np.ndarray] | None = None,
                subset: Any = None) -> Any:
        if subset is None:
            digest = hashlib.sha256()
            for key, array in sorted(self._weights(replace).items()):
                digest.update(key.encode() + np.ascontiguousarray(array).tobytes())
            seen.append(digest.hexdigest())
        return run(self, replace, subset)

    monkeypatch.setattr(probe_module.Probe, "run", counted)
    return seen


def test_no_assignment_runs_twice_on_every_feed(full_runs: list[str]) -> None:
    """Weights inside branches have no activations to fit on, so int8's candidate is round-to-nearest
    itself: the budget's two references are one run. The search then starts at that assignment,
    and its uniform seeds and clean-up meet points it already ran: each runs on every feed once."""
    x = np.random.default_rng(3).standard_normal((32, 8, K)).astype(np.float32)
    feeds = [{"x": x[i], "c": np.array(True)} for i in range(32)]
    options = ShrinkOptions(method="auto", budget_agreement=0.0)
    analysis = analyse(if_model(K), options, feeds)
    assert analysis is not None
    del full_runs[:]
    chosen, summary = choose(analysis, options)
    assert full_runs and len(set(full_runs)) == len(full_runs), full_runs
    assert [c.kind for _, c in chosen.values()] == ["int8", "int8"] and "9 assignments checked" in summary, summary
