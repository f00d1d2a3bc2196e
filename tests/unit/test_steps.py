"""Coarser per-channel steps in int8 (``numerics.steps``, ``auto``'s ``int8-steps`` rungs): where the
output barely cares, fewer bits in the same container and decode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions
from hatch_shrinkray.fitting.calib import Layout
from hatch_shrinkray.fitting.candidates import int_candidate, rung_words, step_candidates
from hatch_shrinkray.methods.auto_search import choose, rungs_used
from hatch_shrinkray.methods.auto_weights import analyse
from hatch_shrinkray.numerics.steps import FACTORS, StepTable, row_bits, steps_saving
from hatch_shrinkray.onnxgraph.encoding import EncodeContext

from onnx_builders import init, model, vi

K = 64
WIDE = 512
"""Values per channel in the numerics tests: a row's empirical entropy saturates at log2 of it."""


def uneven(rows: int = 48, seed: int = 0, k: int = WIDE) -> np.ndarray:
    """``[rows, K]`` weights whose channels span three orders of magnitude (as a layer whose
    per-tensor scale would leave most channels on a few codes)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, k)) * np.logspace(-2, 0, rows)[:, None]).astype(np.float32)


def moments(seed: int = 1, n: int = 4096, k: int = WIDE) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k)) * np.exp(rng.normal(0, 0.5, k))
    return (x.T @ x / n)[None]


def test_row_bits_count_each_code_at_the_tensors_frequencies() -> None:
    codes = np.array([[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 2, 3]], dtype=np.float64)
    zero = np.log2(3 / 2)  # 8 of the 12 codes are 0, 2 are 1, one each 2 and 3
    assert np.allclose(row_bits(codes), [4 * zero, 2 * zero + 2 * np.log2(6), 2 * zero + 2 * np.log2(12)])


def test_steps_coarsen_the_channels_the_output_cares_least_about_and_save_the_bits_asked() -> None:
    w = uneven().astype(np.float64)
    s0 = np.abs(w).max(axis=1) / 127
    table = StepTable(w, s0, moments()[0])
    scale = steps_saving(table, 1.0)
    assert scale is not None
    factors = scale / s0
    assert np.allclose([min(FACTORS, key=lambda f: abs(f - x)) for x in factors], factors)
    assert factors.min() >= 1.0 and factors.max() > 1.0
    small, large = factors[:16].mean(), factors[-16:].mean()
    assert small > large  # the smallest channels add the least to the layer output
    codes = np.clip(np.rint(w / scale[:, None]), -127, 127)
    saved = (row_bits(np.clip(np.rint(w / s0[:, None]), -127, 127)).sum() - row_bits(codes).sum()) / w.size
    assert saved >= 0.5  # the table counts each factor at its own frequencies: the mix saves less
    assert steps_saving(table, 9.0) is None  # more than the coarsest step everywhere saves


def test_a_step_table_tries_only_the_factors_it_is_given() -> None:
    w = uneven().astype(np.float64)
    s0 = np.abs(w).max(axis=1) / 127
    table = StepTable(w, s0, moments()[0], (1.0, 16.0))
    scale = steps_saving(table, 1.0)
    assert scale is not None
    assert set(np.round(scale / s0, 6)) <= {1.0, 16.0} and (scale > s0).any()
    assert StepTable(w, s0, moments()[0]).factors.tolist() == list(FACTORS)


def ctx_for(axis: int) -> EncodeContext:
    return EncodeContext(ShrinkOptions(method="auto"), 17, (), axis, "test")


def test_step_candidate_is_plain_int8_with_less_output_error_than_fewer_levels_at_the_size() -> None:
    w = uneven()
    w[3] = 0.25  # a constant channel is stored exactly
    h = moments()
    lay = Layout(helper.make_node("Gemm", ["x", "W"], ["y"], transB=1), "x", 1, False)
    cands = {c.kind: c for c in step_candidates(w, ctx_for(0), h, lay, rows_seen=4096)}
    assert set(cands) == {"int8-steps0.5", "int8-steps1"}
    c = cands["int8-steps1"]
    assert c.decode is not None and set(c.decode.stored) == {"q", "scale"}
    q, scale = c.decode.stored["q"], c.decode.stored["scale"]
    assert q.dtype == np.int8 and np.abs(q.astype(np.int64)).max() <= 127 and scale.shape == (48, 1)
    assert np.array_equal(c.decoded, q.astype(np.float32) * scale)  # what Cast -> Mul computes
    assert np.all(c.decoded[3] == np.float32(0.25))
    fewer = int_candidate(w, ctx_for(0), h, lay, rows_seen=4096, levels=127)
    assert c.target_bytes("wheel") <= fewer.target_bytes("wheel") * 1.05
    assert c.weight_error < 0.5 * fewer.weight_error
    assert step_candidates(w, ctx_for(0), None, None) == []  # chosen by output error: needs moments
    assert step_candidates(w, ctx_for(0), h, lay, rows_seen=16) == []  # too few rows for H


def test_the_report_says_which_rungs_in_words() -> None:
    assert rung_words("int8-steps1") == "int8 with coarser steps (aimed at 1 bit a value fewer)"
    assert rung_words("int8-31levels") == "int8 with 31 levels"

    class C:
        def __init__(self, kind: str) -> None:
            self.kind = kind

    text = rungs_used([C("int8-steps1"), C("int8"), C("int8-steps1")])  # type: ignore[misc]
    assert text == "rungs used: int8 with coarser steps (aimed at 1 bit a value fewer) for 2 weights, int8 for 1"


def uneven_mlp() -> onnx.ModelProto:
    a = uneven(256, 2, K).T.copy()  # MatMul [K, N]: the channels are columns
    b = (np.random.default_rng(3).standard_normal((256, 32)) * 0.05).astype(np.float32)
    return model([helper.make_node("MatMul", ["x", "A"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
                  helper.make_node("MatMul", ["t", "B"], ["y"])],
                 [vi("x", ["batch", K])], [vi("y", ["batch", 32])], [init("A", a), init("B", b)])


def test_auto_searches_the_step_rungs_and_says_so(tmp_path: Path) -> None:
    m = uneven_mlp()
    x = np.random.default_rng(5).standard_normal((32, 16, K)).astype(np.float32)
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(), budget_rel_l2=0.05, budget_cosine=0.99,
                         budget_agreement=0.0)
    analysis = analyse(m, opts, [{"x": f} for f in x])
    assert analysis is not None
    kinds = {c.kind for w in analysis.weights for c in w.candidates}
    assert {"int8-steps0.5", "int8-steps1"} <= kinds, kinds
    chosen, summary = choose(analysis, opts)
    again = choose(analysis, opts)[0]
    assert {k: c.kind for k, (_, c) in chosen.items()} == {k: c.kind for k, (_, c) in again.items()}
    assert "rungs used: " in summary
    for _, c in chosen.values():
        assert c.kind.split("-")[0] in ("int8", "int16", "fp16", "fp32"), c.kind
