"""Property tests of the quantization numerics: decode(encode(x)) stays within each method's bound
for arbitrary arrays, including NaN, +-inf, constant channels, denormals and huge values, and
non-finite values come back exactly.

Bounds, per channel (the axis is drawn: per-tensor, axis 0 or axis 1):
* int8 symmetric: |err| <= step/2 with step = amax/127 (amax over the channel's finite values);
* affine (int8 asymmetric, float-levels N): |err| <= step/2 with step = (max(hi,0) - min(lo,0)) / (N-1),
  N being the levels left after reserving one for a non-finite sentinel;
* fp16: the float16 rounding error (relative 2^-11, absolute 2^-25 for subnormals);
plus float32 rounding of the decode and the documented flush of |values| < FLUSH to zero.
A constant channel is exact. Mixed non-finite values (NaN with inf, +inf with -inf) are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hatch_shrinkray.encodings.float_levels import FloatLevelsEncoder
from hatch_shrinkray.encodings.fp16 import Fp16Encoder
from hatch_shrinkray.numerics.quant import (
    FLUSH,
    NotEncodable,
    channels,
    find_nonfinite,
    quantize_affine,
    quantize_symmetric,
)
from hatch_shrinkray.onnxgraph.encoding import EncodeContext
from hatch_shrinkray.options import ShrinkOptions

F32 = np.float32
F32_MAX = float(np.finfo(F32).max)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Array = npt.NDArray[Any]

# --- strategies ------------------------------------------------------------------------------

shapes = hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=24)
HUGE_CAP = float(F32(1e37))
"""The error-bound properties stay below float32's max; the tests at the end cover the edge itself."""
finite_float32 = st.floats(min_value=-HUGE_CAP, max_value=HUGE_CAP, width=32, allow_subnormal=True)
any_float32 = st.one_of(finite_float32, st.sampled_from([float("nan"), float("inf"), float("-inf")]))
special = st.sampled_from([float("nan"), float("inf"), float("-inf")])
TINY = float(np.finfo(F32).tiny)
denormal = st.floats(min_value=-TINY, max_value=TINY, width=32, allow_subnormal=True)
huge = st.floats(min_value=float(F32(1e30)), max_value=HUGE_CAP, width=32).flatmap(lambda v: st.sampled_from([v, -v]))


@st.composite
def weights(draw: st.DrawFn) -> Array:
    """Arrays mixing every awkward kind of value, and some wholly constant channels."""
    shape = draw(shapes)
    kind = draw(st.sampled_from(["any", "finite", "gaussian+specials", "denormal", "huge", "constant"]))
    if kind == "any":
        w = draw(hnp.arrays(F32, shape, elements=any_float32))
    elif kind == "finite":
        w = draw(hnp.arrays(F32, shape, elements=finite_float32))
    elif kind == "denormal":
        w = draw(hnp.arrays(F32, shape, elements=denormal))
    elif kind == "huge":
        w = draw(hnp.arrays(F32, shape, elements=st.one_of(huge, finite_float32)))
    elif kind == "constant":
        w = np.full(shape, draw(st.one_of(finite_float32, denormal, huge)), dtype=F32)
    else:
        seed = draw(st.integers(0, 2**32 - 1))
        w = (np.random.default_rng(seed).standard_normal(shape) * draw(st.sampled_from([1e-3, 1.0, 1e3]))).astype(F32)
        n = draw(st.integers(1, 3))
        value = draw(special)
        for _ in range(n):
            i, j = draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))
            w[i, j] = value
    # a constant row sometimes, whatever the kind
    if draw(st.booleans()) and shape[1] > 1:
        w[draw(st.integers(0, shape[0] - 1))] = draw(st.one_of(finite_float32, denormal))
    return w


axes = st.sampled_from([None, 0, 1])


# --- helpers ---------------------------------------------------------------------------------


def mixed_nonfinite(w: Array) -> bool:
    special_values = w[~np.isfinite(w)]
    if special_values.size == 0:
        return False
    nan = np.isnan(special_values)
    return bool(nan.any() and not nan.all()) or (not nan.any() and not (special_values == special_values[0]).all())


def assert_nonfinite_exact(w: Array, decoded: Array) -> None:
    mask = ~np.isfinite(w)
    assert np.array_equal(np.isnan(decoded), np.isnan(w))
    assert np.array_equal(decoded[mask & ~np.isnan(w)], w[mask & ~np.isnan(w)])
    assert np.isfinite(decoded[~mask]).all(), "a finite weight decoded to a non-finite value"


def rows(a: Array, axis: int | None) -> Array:
    return channels(np.asarray(a, dtype=np.float64), axis)


def float32_slack(w: Array) -> Array:
    """A few float32 ulps of each value: the decode runs in float32."""
    with np.errstate(over="ignore"):
        return 4.0 * np.spacing(np.abs(w).astype(F32)).astype(np.float64)


def check_channel_bound(w: Array, decoded: Array, axis: int | None, step_of: Any, max_code: int) -> None:
    """|err| <= step/2, plus float32 rounding: of each value, and of the stored float32 scale,
    which the decode multiplies by codes (and zero points) up to ``max_code``."""
    finite = np.isfinite(w)
    wf, df, fm = rows(np.where(finite, w, 0), axis), rows(np.where(finite, decoded, 0), axis), rows(finite, axis)
    slack = rows(float32_slack(np.where(finite, w, 0)), axis)
    for c in range(wf.shape[0]):
        vals = wf[c][fm[c].astype(bool)]
        if vals.size == 0:
            continue
        err = np.abs(wf[c] - df[c])[fm[c].astype(bool)]
        if vals.min() == vals.max():
            assert np.all(err == 0), f"constant channel {c} not exact"
            continue
        step = step_of(vals)
        scale_rounding = (np.abs(vals) + max_code * step) * 2.0**-23
        bound = step / 2 * (1 + 1e-6) + slack[c][fm[c].astype(bool)] + scale_rounding + FLUSH
        assert np.all(err <= bound), (c, float(err.max()), float(step))


# --- properties ------------------------------------------------------------------------------


@SETTINGS
@given(weights(), axes)
def test_int8_symmetric_within_half_a_step(w: Array, axis: int | None) -> None:
    if mixed_nonfinite(w):
        try:
            quantize_symmetric(w, axis)
        except NotEncodable:
            return
        raise AssertionError("mixed non-finite values were encoded")
    q = quantize_symmetric(w, axis)
    assert q.codes.dtype == np.int8
    assert_nonfinite_exact(w, q.decoded)
    check_channel_bound(w, q.decoded, axis, lambda v: float(np.abs(v).max()) / 127, 127)
    finite = np.isfinite(w)
    assert np.all(np.abs(q.codes[finite].astype(int)) <= 127)


@SETTINGS
@given(weights(), axes, st.sampled_from([2, 3, 4, 7, 16, 255, 256, 4096, 65536]))
def test_affine_within_half_a_step(w: Array, axis: int | None, levels: int) -> None:
    has_special = not np.isfinite(w).all()
    if mixed_nonfinite(w) or (has_special and levels - 1 < 2):
        try:
            quantize_affine(w, axis, levels)
        except NotEncodable:
            return
        raise AssertionError("expected NotEncodable")
    q = quantize_affine(w, axis, levels)
    usable = levels - 1 if has_special else levels
    assert_nonfinite_exact(w, q.decoded)
    check_channel_bound(w, q.decoded, axis,
                        lambda v: (max(float(v.max()), 0.0) - min(float(v.min()), 0.0)) / (usable - 1), levels)
    assert int(q.codes.max(initial=0)) <= levels - 1


@SETTINGS
@given(weights(), axes, st.sampled_from([2, 16, 256, 1000]))
def test_float_levels_within_half_a_step_and_n_levels(w: Array, axis: int | None, levels: int) -> None:
    ctx = EncodeContext(ShrinkOptions(method="float-levels", levels=levels), 17, (), axis, "")
    if mixed_nonfinite(w):
        try:
            FloatLevelsEncoder().encode(w, ctx)
        except NotEncodable:
            return
        raise AssertionError("mixed non-finite values were encoded")
    dec = FloatLevelsEncoder().encode(w, ctx)
    decoded = dec.decoded
    assert decoded.dtype == w.dtype and decoded.shape == w.shape
    assert_nonfinite_exact(w, decoded)
    check_channel_bound(w, decoded, axis,
                        lambda v: (max(float(v.max()), 0.0) - min(float(v.min()), 0.0)) / (levels - 1), levels)
    finite = np.isfinite(w)
    for c in range(rows(w, axis).shape[0]):
        row = rows(decoded, axis)[c][rows(finite, axis)[c].astype(bool)]
        assert len(np.unique(row)) <= levels


@SETTINGS
@given(weights())
def test_fp16_within_float16_rounding(w: Array) -> None:
    ctx = EncodeContext(ShrinkOptions(method="fp16"), 17, (), None, "")
    finite = np.isfinite(w)
    if finite.any() and float(np.abs(w[finite]).max()) > float(np.finfo(np.float16).max):
        try:
            Fp16Encoder().encode(w, ctx)
        except NotEncodable:
            return
        raise AssertionError("values beyond the float16 range were encoded")
    dec = Fp16Encoder().encode(w, ctx)
    decoded = dec.decoded.astype(np.float64)
    assert_nonfinite_exact(w, dec.decoded)
    wf = w[finite].astype(np.float64)
    err = np.abs(decoded[finite] - wf)
    assert np.all(err <= np.abs(wf) * 2.0**-11 + 2.0**-25 + FLUSH)
    # what is stored is exactly what the Cast node will produce
    assert np.array_equal(dec.stored["fp16"].astype(F32)[finite & (np.abs(w) >= FLUSH)],
                          dec.decoded[finite & (np.abs(w) >= FLUSH)])


@SETTINGS
@given(weights())
def test_find_nonfinite_agrees_with_numpy(w: Array) -> None:
    if mixed_nonfinite(w):
        try:
            find_nonfinite(w)
        except NotEncodable:
            return
        raise AssertionError("mixed non-finite values accepted")
    found = find_nonfinite(w)
    if np.isfinite(w).all():
        assert found is None
    else:
        assert found is not None and np.array_equal(found.mask, ~np.isfinite(w))


# --- float32's maximum: a finite weight must decode to a finite value ---------------------------

def test_int8_symmetric_at_float32_max_stays_finite() -> None:
    w = np.array([[1e30, F32_MAX]], dtype=F32)
    q = quantize_symmetric(w, None)
    assert np.isfinite(q.decoded).all(), q.decoded


def test_affine_at_float32_max_stays_finite() -> None:
    w = np.array([[-F32_MAX, F32_MAX, 0.0, 1.0]], dtype=F32)
    q = quantize_affine(w, None, 256)
    assert np.isfinite(q.decoded).all(), q.decoded
