"""The speed work of issue 10 (benchmarks/REAL_INPUTS.md) changes how output-aware rounding and ``auto``
compute, never what they promise: each fast path is checked against the plain computation it replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions
from hatch_shrinkray.fitting.budget import Baseline, deviation
from hatch_shrinkray.fitting.calib import MAX_ROWS, MIN_ROWS, ROWS_PER_FEATURE, Layout, rows_per_sample
from hatch_shrinkray.methods import auto_weights
from hatch_shrinkray.numerics import gptq
from hatch_shrinkray.numerics.threads import NO_SPINNING, one_blas_thread
from hatch_shrinkray.options import VerifyOptions as Loose
from hatch_shrinkray.verification.compare import compare
from hatch_shrinkray.verification.runner import session

from onnx_builders import init, model, save, vi, weight


def spd(k: int, seed: int) -> np.ndarray:
    """A correlated, unevenly scaled activation second moment, like real calibration data's."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4 * k, k)) @ (rng.standard_normal((k, k)) * np.exp(rng.normal(0, 1, k)))
    return x.T @ x / len(x)


def test_inverse_factor_by_halves_is_the_inverse() -> None:
    h = spd(300, 0)  # > 2 * BLOCK_INVERSE: the recursion runs
    u = gptq.inverse_factor(h)
    assert u is not None
    np.testing.assert_array_equal(u, np.triu(u))
    np.testing.assert_allclose(u.T @ u @ h, np.eye(300), atol=1e-8)
    low = np.linalg.cholesky(h)
    np.testing.assert_allclose(gptq._lower_inverse(low) @ low, np.eye(300), atol=1e-10)
    assert gptq.inverse_factor(-np.eye(4)) is None


def textbook_gptq(w: np.ndarray, s: np.ndarray, h: np.ndarray, qmax: int) -> np.ndarray:
    """GPTQ column by column with the full ``H^-1`` update (no blocks, no transposes)."""
    k = w.shape[1]
    h = h.copy()
    diag = np.diag(h)
    h[np.diag_indices(k)] += gptq.DAMP * float(diag.mean())
    perm = np.argsort(-diag, kind="stable")
    hp = h[np.ix_(perm, perm)]
    u = np.linalg.cholesky(np.linalg.inv(hp)).T
    wp = w[:, perm].copy()
    q = np.zeros_like(wp)
    for j in range(k):
        q[:, j] = np.clip(np.rint(wp[:, j] / s), -qmax, qmax)
        e = (wp[:, j] - q[:, j] * s) / u[j, j]
        wp[:, j:] -= np.outer(e, u[j, j:])
    return q[:, np.argsort(perm, kind="stable")]


def test_blocked_transposed_gptq_matches_the_textbook_loop() -> None:
    h = spd(200, 1)
    w = np.random.default_rng(2).standard_normal((48, 200))
    s = np.abs(w).max(axis=1) / 127
    fast, slow = gptq.gptq(w, s, h, 127), textbook_gptq(w, s, h, 127)
    assert np.mean(fast == slow) > 0.999  # a rounding tie may land differently, nothing more
    err_fast = gptq.output_error(w - fast * s[:, None], h).sum()
    err_slow = gptq.output_error(w - slow * s[:, None], h).sum()
    assert err_fast == pytest.approx(err_slow, rel=1e-3)


def test_output_error_in_float32_products_ranks_like_float64() -> None:
    h = spd(120, 3)
    dw = np.random.default_rng(4).standard_normal((500, 120)) * 1e-3
    exact = np.einsum("rk,rk->r", dw @ h, dw)
    np.testing.assert_allclose(gptq.output_error(dw, h), exact, rtol=1e-5)


@pytest.mark.parametrize("bits", [4, 6, 8, 10])
def test_rounding_never_worse_than_round_to_nearest(bits: int) -> None:
    h = spd(96, 5)
    w = np.random.default_rng(6).standard_normal((64, 96))
    qmax = 2 ** (bits - 1) - 1
    s = np.abs(w).max(axis=1) / qmax
    r = gptq.round_rows(w, s, h, bits)
    per_row_rtn = gptq.output_error(w - np.clip(np.rint(w / s[:, None]), -qmax, qmax) * s[:, None], h)
    per_row = gptq.output_error(w - r.codes * r.scale[:, None], h)
    assert (per_row <= per_row_rtn * (1 + 1e-6)).all()
    assert r.error < 0.8 * r.rtn_error
    assert np.abs(r.codes).max() <= qmax


def test_budget_fast_path_equals_compare() -> None:
    """``deviation`` on a prepared Baseline takes rel-L2 and cosine from dot products; the figures
    are compare's, and a non-finite output still makes the candidate broken."""
    rng = np.random.default_rng(7)

    def softmax(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

    logits = [rng.standard_normal((1, 30, 50)) * 3 for _ in range(4)]
    ref = [[softmax(z)] for z in logits]  # CTC-like per-position class probabilities
    got = [[softmax(z + rng.normal(0, 0.3, z.shape))] for z in logits]
    loose = Loose(max_rel_l2=float("inf"), min_cosine=-1.0, min_agreement=0.0)
    c = compare("y", [r[0] for r in ref], [g[0] for g in got], loose)
    base = Baseline(ref)
    d = deviation(base, got)
    assert d.rel_l2 == pytest.approx(c.rel_l2, rel=1e-9)
    assert d.cosine == pytest.approx(c.cosine, rel=1e-12)
    assert c.top1 is not None and d.top1 == c.top1 < 1.0
    assert d == deviation(ref, got)  # a plain list is prepared on the fly: the same figures
    broken = [[g[0].copy()] for g in got]
    broken[0][0][0, 0, 0] = np.nan
    assert deviation(base, broken).rel_l2 == float("inf")


def test_rows_per_sample_bounds() -> None:
    conv = Layout(helper.make_node("Conv", ["x", "W"], ["y"]), "x", 1, False)
    matmul = Layout(helper.make_node("MatMul", ["x", "W"], ["y"]), "x", 1, True)
    assert rows_per_sample(conv, (384, 384, 1, 1), 18) == -(-ROWS_PER_FEATURE * 384 // 18)
    assert rows_per_sample(matmul, (120, 18710), 18) == -(-ROWS_PER_FEATURE * 120 // 18)  # K = shape[0]
    assert rows_per_sample(conv, (48, 96, 3, 3), 1) == MAX_ROWS
    assert rows_per_sample(matmul, (16, 4), 1000) == MIN_ROWS


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_inside_restored_after() -> None:
    before = blas_threads()
    assert before, "numpy's BLAS is visible to threadpoolctl"
    with one_blas_thread():
        assert blas_threads() == [1] * len(before)
        a = np.ones((64, 64))
        assert float((a @ a)[0, 0]) == 64.0
    assert blas_threads() == before


def test_without_threadpoolctl_blas_is_left_as_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine installed with --no-deps (the compatibility tier's venvs) still shrinks."""
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    before = [1]
    with one_blas_thread():
        before.append(2)
    assert before == [1, 2]


def test_engine_sessions_sleep_between_operators(tmp_path: Path) -> None:
    src = save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", [1, 8])], [vi("y", [1, 4])],
                     [init("W", weight((8, 4), 0))]), tmp_path / "m.onnx")
    opts = session(str(src), "m.onnx").get_session_options()
    assert opts.get_session_config_entry(NO_SPINNING[0]) == NO_SPINNING[1]


def stacked(n: int) -> Any:
    """x -> MatMul W0 (the largest) -> Tanh -> MatMul W1 -> ... : one large weight, n-1 small ones."""
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        shape = (256, 256) if i == 0 else (256, 256 if i < n - 1 else 64)
        inits.append(init(f"W{i}", weight(shape, 10 + i) * (1.0 if i == 0 else 0.5)))
        nodes += [helper.make_node("MatMul", [prev, f"W{i}"], [f"h{i}"]), helper.make_node("Tanh", [f"h{i}"],
                                                                                              [f"t{i}"])]
        prev = f"t{i}"
    nodes[-1] = helper.make_node("Identity", [f"h{n - 1}"], ["y"])
    return model(nodes, [vi("x", ["batch", 256])], [vi("y", ["batch", 64])], inits)


def test_low_rungs_measured_for_the_largest_weights_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 of every weight is measured alone; its rungs below int8 (``MEASURED_LEVELS``, and
    MatMulNBits' 4-bit blocks) only for the weights holding the first ``LOW_RUNGS_SHARE`` of the bytes
    (here: the first of three equal weights); the rest are estimates."""
    monkeypatch.setattr(auto_weights, "LOW_RUNGS_SHARE", 0.3)
    m = stacked(3)
    x = np.random.default_rng(0).standard_normal((12, 16, 256)).astype(np.float32)
    feeds = [{"x": a} for a in x]
    opts = ShrinkOptions(method="auto", verify=VerifyOptions())
    analysis = auto_weights.analyse(m, opts, feeds)
    assert analysis is not None
    measured = {w.site.name: {c.kind for c, done in zip(w.candidates, w.measured, strict=True) if done}
                for w in analysis.weights}
    assert measured["W0"] >= {"int8", *(f"int8-{k}levels" for k in auto_weights.MEASURED_LEVELS)}
    assert measured["W0"] & {"int4", "int4-block"}
    for name in ("W1", "W2"):
        assert measured[name] == {"int8"}, measured
    w1 = next(w for w in analysis.weights if w.site.name == "W1")
    estimated = [d for c, d, done in zip(w1.candidates, w1.deviations, w1.measured, strict=True)
                 if not done and c.kind != "fp32"]
    assert estimated and all(0 < d.energy < float("inf") for d in estimated)




