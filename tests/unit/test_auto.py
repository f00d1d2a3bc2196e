"""Method ``auto``: sensitive tensors stay precise, the rest go compact, within the budget, deterministically."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.fitting.budget import deviation
from hatch_shrinkray.fitting.calib import Layout, Moments, patches
from hatch_shrinkray.fitting.candidates import int4_block
from hatch_shrinkray.fitting.search import Found, Option, refine, search, try_uniform
from hatch_shrinkray.numerics.gptq import output_error, round_rows
from hatch_shrinkray.option_table import option_errors

from onnx_builders import if_model, init, model, save, vi, weight

K = 64


def sensitive_mlp() -> onnx.ModelProto:
    """x -> MatMul A -> Tanh -> MatMul S -> Tanh -> MatMul B -> y.

    S has one huge value per output column (like Silero's 54.9 among 0.04s) that never meets a
    large activation: per-channel int8 leaves the column's other weights a handful of levels.
    """
    a = weight((K, 256), 1)
    s = weight((256, 256), 2)
    s[7, :] = 40.0  # row 7 of S multiplies hidden unit 7, which is silenced below
    a[:, 7] = 0.0
    b = weight((256, 128), 3)
    return model(
        [helper.make_node("MatMul", ["x", "A"], ["h1"]), helper.make_node("Tanh", ["h1"], ["t1"]),
         helper.make_node("MatMul", ["t1", "S"], ["h2"]), helper.make_node("Tanh", ["h2"], ["t2"]),
         helper.make_node("MatMul", ["t2", "B"], ["y"])],
        [vi("x", ["batch", K])], [vi("y", ["batch", 128])],
        [init("A", a), init("S", s), init("B", b)])


def calib(tmp_path: Path, n: int = 32, batch: int = 16, seed: int = 5) -> Path:
    """``n`` independent samples: at least ``evidence.MIN_UNITS`` per side of auto's held-out split."""
    x = np.random.default_rng(seed).standard_normal((n, batch, K)).astype(np.float32)
    path = tmp_path / "calib.npz"
    np.savez(path, x=x)
    return path


def encodings(result: object) -> dict[str, str]:
    return {t.name: t.encoding for t in result.tensors}  # type: ignore[attr-defined]


def test_sensitive_tensor_kept_precise_others_compact(tmp_path: Path) -> None:
    src = save(sensitive_mlp(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)))  # the default budget
    result = shrink(src, tmp_path / "out.onnx", opts)
    enc = encodings(result)
    assert enc["S"].startswith(("int16", "fp16", "kept")), enc
    # The others on int8's ladder, at least one below int8's 255 levels: the budget is int8's own answers.
    assert enc["A"].startswith("int8") and enc["B"].startswith("int8"), enc
    assert "levels" in enc["A"] + enc["B"] or "coarser steps" in enc["A"] + enc["B"], enc
    assert all(t.note for t in result.tensors)
    # The budget is met on the 16 calibration samples; the 16 held-out ones show how well that carries over.
    assert result.verification is not None and result.verification.calibration == 16
    assert result.verification.samples == 16 and result.verification.worst_rel_l2 <= 0.05
    assert "auto's plan kept: on 16 held-out units" in result.verification.fitting
    assert result.shrunk_size < 0.75 * result.original_size
    # Round-to-nearest int8 of every tensor, S included, loses the answers auto keeps.
    plain = shrink(src, tmp_path / "plain.onnx", ShrinkOptions(method="int8", verify=None))
    assert {t.name: t.encoding for t in plain.tensors}["S"].startswith("int8"), encodings(plain)
    import onnxruntime as ort

    x = np.load(tmp_path / "calib.npz")["x"].reshape(-1, K)
    ref, got, rounded = (ort.InferenceSession(str(p)).run(None, {"x": x}) for p in
                         (src, tmp_path / "out.onnx", tmp_path / "plain.onnx"))
    kept, lost = deviation([list(ref)], [list(got)]).rel_l2, deviation([list(ref)], [list(rounded)]).rel_l2
    assert kept <= 0.05 and lost > 0.5, (kept, lost)


def test_deterministic_and_budget_respected_on_fresh_inputs(tmp_path: Path) -> None:
    src = save(sensitive_mlp(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)), budget_rel_l2=0.02)
    shrink(src, tmp_path / "a.onnx", opts)
    shrink(src, tmp_path / "b.onnx", opts)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    import onnxruntime as ort

    x = np.random.default_rng(99).standard_normal((256, K)).astype(np.float32)
    ref = ort.InferenceSession(str(src)).run(None, {"x": x})
    got = ort.InferenceSession(str(tmp_path / "a.onnx")).run(None, {"x": x})
    dev = deviation([list(ref)], [list(got)])
    assert dev.rel_l2 < 0.04  # unseen inputs: same order as the budget


def test_looser_budget_never_larger(tmp_path: Path) -> None:
    import copy
    from dataclasses import replace

    from hatch_shrinkray.methods.auto_search import choose, write_chosen
    from hatch_shrinkray.methods.auto_weights import analyse

    m = sensitive_mlp()
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)), budget_cosine=0.0,
                         budget_agreement=0.0)
    feeds = [{"x": x} for x in np.load(tmp_path / "calib.npz")["x"]]
    analysis = analyse(m, opts, feeds)
    assert analysis is not None
    sizes = []
    for b in (0.001, 0.01, 0.1):
        work = copy.deepcopy(m)
        budgeted = replace(opts, budget_rel_l2=b)
        records = write_chosen(work, budgeted, *choose(analysis, budgeted))
        sizes.append(sum(r.stored_bytes for r in records))
    assert sizes[0] >= sizes[1] >= sizes[2]
    assert sizes[2] < sizes[0]


def test_gptq_beats_round_to_nearest_on_held_out_activations() -> None:
    rng = np.random.default_rng(0)
    mix = rng.standard_normal((K, K)) * np.exp(rng.normal(0, 1, K))  # correlated, uneven features
    x_cal = rng.standard_normal((2048, K)) @ mix
    x_test = rng.standard_normal((2048, K)) @ mix
    w = rng.standard_normal((32, K))
    s = np.abs(w).max(axis=1) / 127
    r = round_rows(w, s, x_cal.T @ x_cal / len(x_cal))
    h_test = x_test.T @ x_test / len(x_test)
    rtn = np.clip(np.rint(w / s[:, None]), -127, 127) * s[:, None]
    assert output_error(w - r.codes * r.scale[:, None], h_test).sum() < 0.7 * output_error(w - rtn, h_test).sum()


def test_conv_patches_match_onnxruntime_conv() -> None:
    """The unfolded patches times the flattened weight reproduce the Conv (pads, stride, groups)."""
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 2, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 0, 1, 2], strides=[2, 1], group=2)
    m = model([node], [vi("x", [1, 4, 7, 9])], [vi("y", [1, 8, 4, 9])], [init("W", w)])
    x = rng.standard_normal((1, 4, 7, 9)).astype(np.float32)
    y = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    p = patches(x, Layout(node, "x", 2, False), w.shape)
    assert p is not None
    rows = w.reshape(8, -1)
    got = np.stack([p[:, g] @ rows[g * 4:(g + 1) * 4].T for g in range(2)], axis=1).reshape(-1, 8)
    np.testing.assert_allclose(got, y.transpose(0, 2, 3, 1).reshape(-1, 8), rtol=1e-4, atol=1e-4)
    mom = Moments()
    mom.add(p)
    assert mom.h is not None and mom.h.shape == (2, 18, 18)


def test_int4_emulation_matches_matmulnbits(tmp_path: Path) -> None:
    import onnxruntime as ort

    w = weight((K, 256), 4)
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", K])], [vi("y", ["batch", 256])],
              [init("W", w)])
    src = save(m, tmp_path / "m.onnx")
    shrink(src, tmp_path / "q.onnx", ShrinkOptions(method="int4", verify=None))
    x = np.random.default_rng(2).standard_normal((4, K)).astype(np.float32)
    got = ort.InferenceSession(str(tmp_path / "q.onnx")).run(None, {"x": x})[0]
    decoded, _ = int4_block(w, 32)
    np.testing.assert_allclose(got, x @ decoded, rtol=1e-4, atol=1e-4)


def test_search_is_monotone_chain_bisection() -> None:
    table = [[Option(10, 5.0), Option(20, 1.0), Option(40, 0.0)], [Option(10, 0.1), Option(40, 0.0)]]
    calls: list[tuple[int, ...]] = []

    def evaluate(choice: tuple[int, ...]) -> object:
        calls.append(choice)
        from hatch_shrinkray.fitting.budget import Deviation

        e = sum(table[i][c].energy for i, c in enumerate(choice))
        return Deviation(e, 1.0, 1.0, e, 0.0)

    found = search(table, evaluate, lambda d: d.energy <= 1.5)  # type: ignore[arg-type,attr-defined]
    assert found.choice == (1, 0)
    assert len(calls) <= 3


class _Energies:
    """A search's evaluations on a table whose deviation is its summed energy, recorded."""

    def __init__(self, table: list[list[Option]], limit: float) -> None:
        self.table, self.limit, self.calls = table, limit, []  # type: list[tuple[int, ...]]

    def energy(self, choice: tuple[int, ...]) -> float:
        return sum(self.table[i][c].energy for i, c in enumerate(choice))

    def evaluate(self, choice: tuple[int, ...]) -> Any:
        from hatch_shrinkray.fitting.budget import Deviation

        self.calls.append(choice)
        return Deviation(self.energy(choice), 1.0, 1.0, self.energy(choice), 0.0)

    def ok(self, d: Any) -> bool:
        return bool(d.energy <= self.limit)


@pytest.mark.parametrize(("screen_limit", "evaluations"), [(1.5, 1), (3.0, 4)])
def test_search_with_a_screen_finds_the_same_point(screen_limit: float, evaluations: int) -> None:
    """The screen (a looser necessary check, as the budget on a few feeds is) narrows the bisection
    without evaluations; where it agrees with the real check one more evaluation settles it, where
    it is looser everywhere its second point fails too (one full run more than bisecting without
    it) and the bisection goes on above, to the answer without it."""
    e = _Energies([[Option(10, 2.0), Option(20, 1.0), Option(40, 0.0)],
                   [Option(10, 1.0), Option(20, 0.5), Option(40, 0.0)],
                   [Option(10, 0.8), Option(20, 0.2), Option(40, 0.0)]], 1.5)
    plain = search(e.table, e.evaluate, e.ok)
    e.calls.clear()
    screened = search(e.table, e.evaluate, e.ok, lambda c: e.energy(c) <= screen_limit)
    assert screened.choice == plain.choice == (2, 1, 1)
    assert plain.evaluations == 3  # three bisection steps; the lossless top is never run
    assert len(e.calls) == screened.evaluations == evaluations  # agreeing screen: its own point only
    assert (2, 2, 2) not in e.calls


def test_a_screen_that_lets_one_failing_point_through_bisects_again_above_it() -> None:
    """A screen judges a few feeds: near its own bottom point it can pass what the full check fails
    (PP-OCRv6 rec: point 129 of 271), and agree above. The second screen-only bisection above that
    point finds the answer with one more full run, where bisecting with full runs took more."""
    e = _Energies([[Option(10 + k, 1.0 - k / 40), Option(100, 0.0)] for k in range(40)], 5.0)
    plain = search(e.table, e.evaluate, e.ok)
    e.calls.clear()
    agreeing = search(e.table, e.evaluate, e.ok, lambda c: e.energy(c) <= 5.0)
    (answer,) = e.calls  # an agreeing screen: one full run, at the answer
    visited: list[tuple[int, ...]] = []

    def lenient_below(c: tuple[int, ...]) -> bool:  # passes the first point it is asked about below the answer
        visited.append(c)
        return e.energy(c) <= 5.0 or len(visited) == 1

    e.calls.clear()
    screened = search(e.table, e.evaluate, e.ok, lenient_below)
    assert not e.ok(e.evaluate(e.calls[0])) and e.calls[0] != answer  # the screen let a failing point through
    assert screened.choice == agreeing.choice == plain.choice == answer
    assert screened.evaluations == 2 < plain.evaluations


def test_a_screen_on_few_decision_positions_leaves_the_answers_to_the_full_check() -> None:
    """On a few feeds of a classifier (one position each) one margin moves the soft agreement past
    round-to-nearest int8's either way, so there the screen judges the error terms only: a point
    under int8's agreement but within its error passes the screen and is left to the full check,
    while a point over the error budget is still screened out. Where the feeds hold many positions
    (a recogniser's characters) the screen keeps the answers term."""
    from hatch_shrinkray.fitting.budget import Deviation, Limits

    def int8_on(positions: int) -> Deviation:
        return Deviation(0.004, 0.99999, 0.99975, 0.004**2, 2e-4, flips=((positions, 0.0),))

    limits = Limits.of(ShrinkOptions(method="auto"), int8_on(4))
    near_flip = Deviation(0.005, 0.99998, 0.99948, 0.005**2, 5e-4)  # under int8's agreement, within its error
    noisy = Deviation(0.02, 0.9999, 0.99999, 0.02**2, 1e-5)
    few, many = limits.screening(int8_on(4)), limits.screening(int8_on(400))
    assert not limits.within(near_flip) and few.within(near_flip) and not many.within(near_flip)
    assert not few.within(noisy) and not many.within(noisy)
    assert few.rel_l2 == limits.rel_l2 and few.cosine == limits.cosine and many == limits


def test_search_runs_the_lossless_top_only_where_nothing_below_passes() -> None:
    """The top of the chain (every weight lossless) costs a full run and, where anything below it
    passes, changes nothing: it is evaluated only where the bisection ends there, and then its own
    deviation is what the search reports, within the budget or not."""
    from hatch_shrinkray.fitting.budget import Deviation

    table = [[Option(10, 2.0), Option(40, 0.0)], [Option(10, 1.0), Option(40, 0.0)]]
    calls: list[tuple[int, ...]] = []

    def run(floor: float) -> object:
        def evaluate(choice: tuple[int, ...]) -> Deviation:
            calls.append(choice)
            e = floor + sum(table[i][c].energy for i, c in enumerate(choice))
            return Deviation(e, 1.0, 1.0, e, 0.0)
        return evaluate

    def ok(d: Deviation) -> bool:
        return d.energy <= 0.5

    found = search(table, run(0.0), ok)  # type: ignore[arg-type]
    assert found.choice == (1, 1) and calls[-1] == (1, 1) and ok(found.deviation)
    calls.clear()
    missed = search(table, run(1.0), ok)  # type: ignore[arg-type]  # even the top is over the budget
    assert missed.choice == (1, 1) and not ok(missed.deviation) and missed.evaluations == len(set(calls))


def test_uniform_assignment_wins_where_the_energy_estimate_misleads() -> None:
    """Estimated energies say weight 0 must stay large; the real model (``real``) tolerates every
    weight at its middle rung (40 bytes), smaller than where the chain stops: try_uniform finds it."""
    from hatch_shrinkray.fitting.budget import Deviation

    table = [[Option(10, 9.0), Option(20, 5.0), Option(40, 0.0)], [Option(10, 0.5), Option(20, 0.1), Option(40, 0.0)]]
    real = {(0, 0): 9.0, (1, 1): 0.8}

    def evaluate(choice: tuple[int, ...]) -> Deviation:
        e = real.get(choice, sum(table[i][c].energy for i, c in enumerate(choice)))
        return Deviation(e, 1.0, 1.0, e, 0.0)

    def ok(d: Deviation) -> bool:
        return d.energy <= 1.0

    found = search(table, evaluate, ok)
    assert found.choice == (2, 0)  # 50 bytes: the chain (0,0) (1,0) (2,0) (2,1) (2,2) never holds (1, 1)
    better = try_uniform(table, found, [(0, 0), (1, 1), (2, 2)], evaluate, ok)
    assert better.choice == (1, 1) and better.evaluations == found.evaluations + 2
    assert try_uniform(table, better, [(0, 0), (2, 2)], evaluate, ok).choice == (1, 1)  # never larger


def test_refine_settles_screened_moves_in_one_run_and_falls_back_one_by_one() -> None:
    """Three weights at their largest rung, each with a smaller one. Where the moves the screen lets
    through hold together, one evaluation settles them; where together they break the budget, the
    moves are evaluated one by one and the answer is the one-by-one answer."""
    from hatch_shrinkray.fitting.budget import Deviation

    table = [[Option(10, 0.4), Option(40, 0.0)], [Option(10, 0.5), Option(30, 0.0)], [Option(10, 2.0), Option(20, 0.0)]]
    start = (1, 1, 1)

    def run(limit: float) -> tuple[Found, Found, list[tuple[int, ...]]]:
        calls: list[tuple[int, ...]] = []

        def evaluate(choice: tuple[int, ...]) -> Deviation:
            calls.append(choice)
            e = sum(table[i][c].energy for i, c in enumerate(choice))
            return Deviation(e, 1.0, 1.0, e, 0.0)

        def ok(d: Deviation) -> bool:
            return d.energy <= limit

        found = Found(start, evaluate(start), 0.0, 1)
        calls.clear()
        one_by_one = refine(table, found, evaluate, ok, 8)
        serial = len(calls)
        calls.clear()
        screened = refine(table, found, evaluate, ok, 8, screen=lambda c: table[2][c[2]].energy == 0.0)
        assert serial == 3
        return one_by_one, screened, calls

    one_by_one, screened, calls = run(1.0)  # moves 0 and 1 hold together (0.9); the screen stops move 2
    assert screened.choice == one_by_one.choice == (0, 0, 1)
    assert calls == [(0, 0, 1)]
    one_by_one, screened, calls = run(0.45)  # together they do not: one by one, only move 0 holds
    assert screened.choice == one_by_one.choice == (0, 1, 1)
    assert calls[0] == (0, 0, 1) and len(calls) == 4


def test_streams_run_in_closed_loop_alike_on_one_worker_or_several() -> None:
    """Streams and lone feeds spread over workers: every output is the one a single worker gives,
    each stream still fed its own previous state."""
    from hatch_shrinkray.samples import Sequencing, run_in_order

    seen: list[float] = []

    def run(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        seen.append(float(feed["x"][0]))
        state = feed["x"] + 2 * feed["state"]
        return [state, state]

    feeds = [{"x": np.array([float(i)]), "state": np.zeros(1)} for i in range(9)]
    seq = Sequencing(tuple(f"u{i}" for i in range(9)), (("state", "stateN"),), ((0, 1, 2), (3, 4), (6, 7, 8)))
    single = run_in_order(run, feeds, seq, ["out", "stateN"])
    several = run_in_order(run, feeds, seq, ["out", "stateN"], workers=3)
    assert [float(o[0][0]) for o in single] == [float(o[0][0]) for o in several] == [
        0.0, 1.0, 4.0, 3.0, 10.0, 5.0, 6.0, 19.0, 46.0]
    assert sorted(seen) == sorted(2 * [float(i) for i in range(9)])


def test_a_failed_feed_or_weight_drops_the_work_not_yet_started() -> None:
    """A failure (or Ctrl-C) while feeds or weights run on worker threads stops promptly: queued
    work is dropped, not run to the end first (100 jobs of 20 ms would hold an interrupt 1-2 s)."""
    import threading
    import time

    from hatch_shrinkray.pool import thread_pool
    from hatch_shrinkray.samples import Sequencing, run_in_order

    ran: list[int] = []
    lock = threading.Lock()

    def run(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        with lock:
            ran.append(int(feed["x"][0]))
        time.sleep(0.02)
        if feed["x"][0] == 0:
            raise RuntimeError("the model failed")
        return [feed["x"]]

    feeds = [{"x": np.array([i])} for i in range(100)]
    with pytest.raises(RuntimeError, match="the model failed"):
        run_in_order(run, feeds, Sequencing.plain(100), ["y"], workers=2)
    assert len(ran) <= 4

    done: list[int] = []

    def weight(i: int) -> int:
        time.sleep(0.02)
        done.append(i)
        return i

    def interrupted() -> None:
        with thread_pool(2) as pool:
            for i in pool.map(weight, range(100)):
                if i == 1:
                    raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert len(done) <= 6




@pytest.mark.parametrize(("field", "value"), [("budget_rel_l2", -1.0), ("budget_cosine", 2.0),
                                              ("budget_agreement", 1.5)])
def test_budget_options_validated(field: str, value: float) -> None:
    errors = option_errors(ShrinkOptions(method="auto", **{field: value}))  # type: ignore[arg-type]
    assert any(field in e for e in errors)


def test_soft_agreement_counts_near_flips() -> None:
    ref = [[np.array([[[0.6, 0.4], [0.9, 0.1]]], dtype=np.float32)]]
    got = [[np.array([[[0.55, 0.45], [0.9, 0.1]]], dtype=np.float32)]]
    dev = deviation(ref, got)
    assert dev.agreement == pytest.approx(1 - 0.25 / 2, abs=1e-5)  # first position: half its gap used
    assert dev.risk == pytest.approx(0.25 / 2, abs=1e-5)
    flip = [[np.array([[[0.4, 0.6], [0.9, 0.1]]], dtype=np.float32)]]
    assert deviation(ref, flip).agreement == pytest.approx(0.5)
    probs = [[np.array([[0.7]], dtype=np.float32)]]
    assert deviation(probs, [[np.array([[0.6]], dtype=np.float32)]]).agreement == pytest.approx(1 - 0.25, abs=1e-5)


def test_loose_budget_reaches_int4_and_the_written_model_matches_the_search(tmp_path: Path) -> None:
    src = save(sensitive_mlp(), tmp_path / "m.onnx")
    # On disk 4-bit blocks are the smallest rung; in the wheel few int8 levels deflate below them.
    opts = ShrinkOptions(method="auto", budget_rel_l2=0.3, budget_cosine=0.9, budget_agreement=0.0, target="disk",
                         verify=VerifyOptions(inputs=calib(tmp_path), max_rel_l2=0.3, min_cosine=0.9,
                                              min_agreement=0.0))
    result = shrink(src, tmp_path / "out.onnx", opts)
    enc = encodings(result)
    assert enc["A"].startswith("int4") and enc["B"].startswith("int4"), enc
    wheel = shrink(src, tmp_path / "wheel.onnx", replace(opts, target="wheel"))
    assert any("levels" in e for e in encodings(wheel).values()), encodings(wheel)
    assert wheel.shrunk_sizes is not None and result.shrunk_sizes is not None
    assert wheel.shrunk_sizes.wheel <= result.shrunk_sizes.wheel
    assert "MatMulNBits" in {n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node}
    summary = result.tensors[0].note
    searched = float(summary.split(" met: rel-L2 ")[1].split(",")[0])
    assert result.verification is not None
    assert result.verification.worst_rel_l2 == pytest.approx(searched, rel=0.05)



def test_subgraph_weights_and_unexercised_branch(tmp_path: Path) -> None:
    src = save(if_model(K), tmp_path / "m.onnx")
    x = np.random.default_rng(3).standard_normal((32, 8, K)).astype(np.float32)
    np.savez(tmp_path / "c.npz", x=x, c=np.ones(32, dtype=bool))
    opts = ShrinkOptions(method="auto", budget_agreement=0.0, budget_rel_l2=0.001,
                         verify=VerifyOptions(inputs=tmp_path / "c.npz"))
    result = shrink(src, tmp_path / "out.onnx", opts)
    by_name = {t.name: t for t in result.tensors}
    assert by_name["W_else"].encoding.startswith("int8")
    assert "not exercised" in by_name["W_else"].note
    # rel-L2 1e-3 is beyond int8 (3e-3 here): a wider code, inside the branch, as Constant nodes.
    assert by_name["W_then"].encoding.startswith(("int10", "int12", "int16", "fp16")), by_name["W_then"]


def test_run_budget_bounds_the_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hatch_shrinkray.methods import auto_weights as auto

    monkeypatch.setattr(auto, "MAX_EVALS", 1)
    src = save(sensitive_mlp(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", budget_agreement=0.0, verify=VerifyOptions(inputs=calib(tmp_path)))
    result = shrink(src, None, opts)
    by_name = {t.name: t for t in result.tensors}
    assert "run budget spent" not in by_name["S"].note  # the largest weight is measured first
    for name in ("A", "B"):
        assert by_name[name].encoding.startswith("int8") and "run budget spent" in by_name[name].note


def test_unit_length_embeddings_are_not_class_scores() -> None:
    """A sentence embedding's argmax is no answer: no top-1 / decision term for L2-normalised rows,
    while logits of the same shape keep theirs."""
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(4, 16)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    moved = emb + rng.normal(scale=0.05, size=emb.shape).astype(np.float32)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    dev = deviation([[emb]], [[moved]])
    assert dev.top1 == 1.0 and dev.agreement == 1.0 and dev.risk == 0.0
    logits = emb * 3
    assert deviation([[logits]], [[moved * 3]]).risk > 0


def test_no_packed_rungs_for_any_target(tmp_path: Path) -> None:
    """auto's ladder below int8 is fewer levels in int8 containers (``Cast -> Mul``, int8's load cost
    and every runtime's support); packed codes (BitShift, which OpenVINO computes wrongly on bytes,
    and about twice int8's folding at load) are never written, whatever the runtimes."""
    src = save(sensitive_mlp(), tmp_path / "m.onnx")
    for runtimes in ((), ("openvino",), ("web",)):
        opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)), runtimes=runtimes)
        result = shrink(src, tmp_path / "out.onnx", opts)
        assert result.verification is not None and result.verification.passed
        ops = {n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node}
        assert not {"BitShift", "Mod", "Sum"} & ops, (runtimes, ops)
        assert not any(e.startswith(("int4 axis", "int6", "int10", "int12")) for e in encodings(result).values())


def test_load_budget_is_tighter_for_the_web_unless_set() -> None:
    """onnxruntime-web folds in wasm: the default load budget there is int8's own (1.0x), else 1.25x;
    a value the user sets wins either way."""
    from hatch_shrinkray.methods.auto_search import load_budget

    assert load_budget(ShrinkOptions()) == 1.25
    assert load_budget(ShrinkOptions(runtimes=("onnxruntime>=1.18",))) == 1.25
    assert load_budget(ShrinkOptions(runtimes=("onnxruntime>=1.18", "web"))) == 1.0
    assert load_budget(ShrinkOptions(runtimes=("web",), budget_load=float("inf"))) == float("inf")
    assert load_budget(ShrinkOptions(budget_load=2.0)) == 2.0
    assert option_errors(ShrinkOptions(budget_load=0.5)) == [
        "budget_load must be a number from 1.0 to inf; got 0.5"]














def test_a_tie_on_decisions_goes_to_the_smaller_error_unless_the_plan_may_spend_it() -> None:
    """The guard's tie rule: a plan that ties round-to-nearest int8 on answers and decisions at more
    error loses where it may not spend error (few held-out units, or no bytes to spend it on), and
    is kept where it may (tests/test_guard.py: where round-to-nearest flipped some held-out decision);
    one more flipped decision loses either way."""
    from hatch_shrinkray.fitting.guard import Score, decide

    rtn, tie = Score(0, 1, 1e-4), Score(0, 1, 2e-4)
    assert not decide("auto's plan", tie, rtn, 10, "the held-out half").kept
    assert decide("auto's plan", tie, rtn, 40, "the held-out half", by_error=False).kept
    assert not decide("auto's plan", Score(0, 2, 1e-5), rtn, 40, "the held-out half", by_error=False).kept


def test_what_the_guard_chose_over_verifications_limits_is_named() -> None:
    """Where the guard's choice would fail verification on the held-out half (the build would fail),
    ``auto`` ships its caller's fallback instead (``int8`` with output-aware rounding); the line names
    what was over which limit. Within the limits nothing changes."""
    from hatch_shrinkray.fitting.guard import Outcome, Score, Unfitted
    from hatch_shrinkray.methods.auto import over_limits

    plan = Score(2, 14, 0.111 ** 2, "lines", rel_l2=0.111, cosine=0.99379)
    rtn = Score(2, 25, 0.132 ** 2, "lines", rel_l2=0.132, cosine=0.991)
    opts = ShrinkOptions(method="auto", verify=VerifyOptions())
    kept = Outcome("auto's plan", True, plan, rtn, 32, "the held-out half")
    assert over_limits(kept, opts) == ("auto's plan is over verification's limits on the held-out half "
                                       "(rel-L2 0.111 > 0.1, cosine 0.993790 < 0.995)")
    rejected = Outcome("auto's plan", False, plan, rtn, 32, "the held-out half")
    assert over_limits(rejected, opts).startswith("round-to-nearest int8 is over verification's limits")
    loose = replace(opts, verify=VerifyOptions(max_rel_l2=0.2, min_cosine=0.99))
    assert over_limits(kept, loose) == over_limits(rejected, loose) == ""
    assert over_limits(Unfitted("nothing fitted"), opts) == "" and over_limits(None, opts) == ""
    assert over_limits(kept, replace(opts, verify=None)) == ""
