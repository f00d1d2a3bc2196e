"""Numerics of each encoding: error bounds, exact zeros, constants and non-finite values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hardening import X, _out
from onnx import helper

from hatch_shrinkray.numerics.quant import FLUSH, NotEncodable, find_nonfinite, quantize_affine, quantize_symmetric

from onnx_builders import init, model, run, vi, weight


def test_symmetric_error_is_within_half_a_step_per_channel() -> None:
    w = weight((64, 32, 3, 3))
    q = quantize_symmetric(w, 0)
    step = np.abs(w).reshape(64, -1).max(axis=1) / 127
    err = np.abs(q.decoded - w).reshape(64, -1).max(axis=1)
    assert np.all(err <= step / 2 * (1 + 1e-5))
    assert q.codes.dtype == np.int8 and q.codes.min() >= -127


def test_per_channel_beats_per_tensor_with_an_outlier() -> None:
    w = weight((32, 128))
    w[0, 0] = 50.0
    per_channel = np.abs(quantize_symmetric(w, 0).decoded - w)[1:].max()
    per_tensor = np.abs(quantize_symmetric(w, None).decoded - w)[1:].max()
    assert per_channel < per_tensor / 10


def test_zeros_stay_exactly_zero() -> None:
    w = weight((16, 64))
    w[:, ::3] = 0
    for q in (quantize_symmetric(w, 0), quantize_affine(w, 0, 256), quantize_affine(w, 1, 7)):
        assert np.all(q.decoded[w == 0] == 0)


@pytest.mark.parametrize("value", [0.001, -2.5, 1e-35, 3e38, 0.0])
def test_constant_tensor_comes_out_exactly(value: float) -> None:
    w = np.full((128, 128), value, dtype=np.float32)
    for q in (quantize_symmetric(w, 0), quantize_symmetric(w, None), quantize_affine(w, 1, 256)):
        assert np.array_equal(q.decoded, w)


@pytest.mark.parametrize("special", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite_values_survive_exactly(special: float) -> None:
    w = weight((16, 64))
    w[3, 5] = special
    w[7, :] = special
    for q in (quantize_symmetric(w, 0), quantize_affine(w, 0, 256)):
        mask = ~np.isfinite(w)
        assert np.array_equal(np.isnan(q.decoded), np.isnan(w))
        assert np.array_equal(q.decoded[mask & ~np.isnan(w)], w[mask & ~np.isnan(w)])
        assert np.abs(q.decoded[~mask] - w[~mask]).max() < 0.01
        assert q.sentinel is not None and np.all(q.codes[mask] == q.sentinel)


def test_mixed_nonfinite_values_are_not_encodable() -> None:
    w = weight((4, 64))
    w[0, 0], w[1, 1] = np.inf, -np.inf
    with pytest.raises(NotEncodable, match="non-finite"):
        find_nonfinite(w)


def test_no_denormals_in_decoded_weights() -> None:
    w = weight((8, 64))
    w[2] *= 1e-36  # a dead channel
    w[3, :4] = 1e-33
    for q in (quantize_symmetric(w, 0), quantize_affine(w, 0, 256)):
        tiny = (np.abs(q.decoded) < FLUSH) & (q.decoded != 0)
        assert not tiny.any()


def test_affine_uses_all_levels_and_validates_range() -> None:
    w = weight((8, 1000))
    q = quantize_affine(w, 0, 4)
    assert len(np.unique(q.decoded[0])) <= 4
    q2 = quantize_affine(w, 0, 65536)
    assert q2.codes.dtype == np.uint16
    assert np.abs(q2.decoded - w).max() < 1e-4


# ---------------------------------------------------------------------------------------------
# The predecessor's confirmed defects (onnx-shrink-ray 0.0.11, by number): none may happen here.


def test_1_one_nan_or_inf_weight_does_not_poison_every_output(tmp_path: Path) -> None:
    w = weight((256, 256))
    w[0, 0] = np.nan  # only the first output column becomes NaN in the original
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256])], [vi("y", ["b", 256])],
              [init("W", w)])
    a, b = run(m, X)[0], run(_out(tmp_path, m), X)[0]
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    assert np.isfinite(b[:, 1:]).all()


def test_2_constant_valued_tensor_is_not_zeroed(tmp_path: Path) -> None:
    m = model([helper.make_node("Add", ["x", "C"], ["y"])], [vi("x", [128, 256])], [vi("y", [128, 256])],
              [init("C", np.full((128, 256), 0.001, np.float32))])
    feeds = {"x": np.zeros((128, 256), np.float32)}
    np.testing.assert_array_equal(run(_out(tmp_path, m), feeds)[0], feeds["x"] + np.float32(0.001))


def test_12_one_outlier_does_not_ruin_the_tensor(tmp_path: Path) -> None:
    w = weight((256, 256))
    w[0, 0] = 40.0
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256])], [vi("y", ["b", 256])],
              [init("W", w)])
    a, b = run(m, X)[0], run(_out(tmp_path, m), X)[0]
    assert np.linalg.norm((a - b)[:, 1:]) / np.linalg.norm(a[:, 1:]) < 0.01
