"""Quantization numerics, pure numpy. Every decoded array here equals what onnxruntime computes
when it folds the decode nodes (float32 Cast -> [Sub] -> Mul), bit for bit.

Rules that make the output trustworthy:
* non-finite values are kept out of the scale computation and restored exactly (sentinel code);
* a constant channel is stored exactly (code +-1 times a scale equal to the value);
* reconstructed values below ``FLUSH`` in magnitude become 0: denormal weights slow inference
  down several-fold on x86 CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics.scales import on_half_grid, stored_scales

FLUSH = 1e-30
F32 = np.float32

FloatArray = npt.NDArray[np.floating]


class NotEncodable(Exception):
    """The tensor cannot be encoded faithfully; the message says why (it is then kept)."""


@dataclass(frozen=True)
class NonFinite:
    """Where the non-finite values are and the single value they all share."""

    mask: npt.NDArray[np.bool_]
    value: float


def find_nonfinite(w: FloatArray) -> NonFinite | None:
    """Non-finite entries, if any; mixtures (NaN with inf, +inf with -inf) are not encodable."""
    mask = ~np.isfinite(w)
    if not mask.any():
        return None
    special = w[mask]
    if np.isnan(special).all():
        return NonFinite(mask, float("nan"))
    if np.isnan(special).any() or not (special == special[0]).all():
        raise NotEncodable("mixes different non-finite values (NaN, +inf, -inf)")
    return NonFinite(mask, float(special[0]))


def channels(w: npt.NDArray[Any], axis: int | None) -> npt.NDArray[Any]:
    """View as (channels, rest): one row per channel (a single row when per-tensor)."""
    return w.reshape(1, -1) if axis is None else np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)


def scale_shape(shape: tuple[int, ...], axis: int | None) -> tuple[int, ...]:
    """Shape of a per-channel parameter that broadcasts against the weight (scalar per-tensor)."""
    if axis is None:
        return ()
    out = [1] * len(shape)
    out[axis] = shape[axis]
    # Trailing ones are implied by numpy/ONNX broadcasting only from the right, so keep them.
    return tuple(out)


@dataclass(frozen=True)
class Quantized:
    """Integer codes plus per-channel float parameters; ``decoded`` is the float32 result."""

    codes: npt.NDArray[np.integer]
    scale: npt.NDArray[Any]
    """float32, or fp16 where asked for and exact (``scales``)."""
    zero_point: npt.NDArray[np.float32] | None
    decoded: npt.NDArray[np.float32]
    nonfinite: NonFinite | None
    sentinel: int | None


def _finite_rows(w: FloatArray, axis: int | None, nonfinite: NonFinite | None) -> tuple[FloatArray, FloatArray]:
    """Per-channel min and max over the finite entries (0 for channels with none)."""
    rows = channels(w, axis)  # min/max are exact in the weight's own dtype: no float64 copy
    if nonfinite is not None:
        m = channels(nonfinite.mask, axis)
        lo = np.where(m, np.inf, rows).min(axis=1).astype(np.float64)
        hi = np.where(m, -np.inf, rows).max(axis=1).astype(np.float64)
        empty = ~np.isfinite(lo)
        lo[empty] = 0.0
        hi[empty] = 0.0
        return lo, hi
    return rows.min(axis=1).astype(np.float64), rows.max(axis=1).astype(np.float64)


def quantize_symmetric(w: FloatArray, axis: int | None, bits: int = 8, levels: int | None = None, *,
                       half_scales: bool = False) -> Quantized:
    """Symmetric codes in [-(2^(b-1)-1), 2^(b-1)-1]; -2^(b-1) is the non-finite sentinel.

    Zero stays exactly zero and no zero-point is needed, so decoding is a single Mul. ``levels``
    (3 .. 2^b - 1, default all of them) asks for fewer distinct codes per channel, on the same
    uniform grid (``code_bounds``): the container and the decode stay those of ``bits``.
    ``half_scales``: the scales rounded to fp16 before the codes are (``scales``), and stored as
    fp16 where every one of them then is an fp16 value.
    """
    nonfinite = find_nonfinite(w)
    qmax = 2 ** (bits - 1) - 1
    levels = 2 * qmax + 1 if levels is None else levels
    if not 3 <= levels <= 2 * qmax + 1:
        raise ValueError(f"{bits}-bit codes hold 3 to {2 * qmax + 1} levels; got {levels}")
    lo, hi = _finite_rows(w, axis, nonfinite)
    neg, pos = code_bounds(lo, hi, levels)
    amax = np.maximum(np.abs(lo), np.abs(hi))
    constant = lo == hi
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.maximum(np.abs(np.minimum(lo, 0.0)) / neg, np.maximum(hi, 0.0) / pos)
    scale64 = np.where(constant, amax, spread)
    scale64 = np.where(scale64 == 0, 1.0, scale64)
    dead = (~constant) & (amax < FLUSH)
    scale64 = np.where(dead, 1.0, scale64)
    scale = _fit(scale64.astype(F32), np.where(constant, 1.0, np.maximum(neg, pos).astype(np.float64)))
    if half_scales:
        scale = on_half_grid(scale, keep=constant).astype(F32)
    shp = scale_shape(w.shape, axis)
    s = scale.reshape(shp) if shp else scale.reshape(())
    low, high = (-neg.reshape(shp), pos.reshape(shp)) if shp else (-int(neg[0]), int(pos[0]))
    codes, decoded = _encode(w, s, None, low=low, high=high, dtype=np.dtype(np.int8 if bits <= 8 else np.int16))
    _fix_channels(codes, decoded, dead, constant, axis, zero=0)
    sentinel = None
    if nonfinite is not None:
        sentinel = -qmax - 1
        codes[nonfinite.mask] = sentinel
        decoded[nonfinite.mask] = nonfinite.value
    return Quantized(codes, stored_scales(s) if half_scales else s.astype(F32), None, decoded, nonfinite, sentinel)


def code_bounds(lo: FloatArray, hi: FloatArray, levels: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per channel ``(neg, pos)``: the codes are ``-neg .. pos`` (``neg + pos + 1 = levels``).

    An odd count is symmetric (255: -127..127, plain int8; 63: -31..31); an even count gives its
    extra level to the side where the channel reaches farther (ties: the positive side).
    """
    half = (levels - 1) // 2
    extra = (levels - 1) % 2
    neg = np.full(np.shape(lo), half, dtype=np.int64) + extra * (np.abs(np.minimum(lo, 0.0)) > np.maximum(hi, 0.0))
    return neg, levels - 1 - neg


def quantize_affine(w: FloatArray, axis: int | None, levels: int) -> Quantized:
    """Asymmetric codes 0..levels-1 with an integer zero point: value = (q - zp) * scale.

    The range is widened to include 0 so zero stays exact. With non-finite values present the
    top code is reserved as their sentinel, so one level fewer is available.
    """
    nonfinite = find_nonfinite(w)
    usable = levels - 1 if nonfinite is not None else levels
    if usable < 2:
        raise NotEncodable("needs at least 2 levels besides the non-finite sentinel")
    lo, hi = _finite_rows(w, axis, nonfinite)
    constant = lo == hi
    rmin = np.minimum(lo, 0.0)
    rmax = np.maximum(hi, 0.0)
    dead = (~constant) & (np.maximum(-rmin, rmax) < FLUSH)
    scale64 = (rmax - rmin) / (usable - 1)
    zp = np.rint(-rmin / np.where(scale64 == 0, 1.0, scale64))
    # Constant channels: exact value c = (q - zp) * |c| with (q, zp) = (1, 0) or (0, 1).
    scale64 = np.where(constant, np.abs(lo), scale64)
    zp = np.where(constant, (lo < 0).astype(np.float64), zp)
    scale64 = np.where((scale64 == 0) | dead, 1.0, scale64)
    zp = np.where(dead, 0.0, zp)
    scale = _fit(scale64.astype(F32), np.where(constant, 1.0, np.maximum(zp, usable - 1 - zp)))
    shp = scale_shape(w.shape, axis)
    s = scale.reshape(shp) if shp else scale.reshape(())
    z = zp.astype(F32).reshape(shp) if shp else zp.astype(F32).reshape(())
    dtype = np.uint8 if levels <= 256 else (np.uint16 if levels <= 65536 else np.uint32)
    codes, decoded = _encode(w, s, z, low=0, high=usable - 1, dtype=np.dtype(dtype))
    _fix_channels(codes, decoded, dead, constant, axis, zero=z)
    sentinel = None
    if nonfinite is not None:
        sentinel = levels - 1
        codes[nonfinite.mask] = sentinel
        decoded[nonfinite.mask] = nonfinite.value
    return Quantized(codes, s.astype(F32), z.astype(F32), decoded, nonfinite, sentinel)


def _fit(scale: npt.NDArray[np.float32], worst_code: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """Nudge scales down until the largest code times the scale is finite in float32.

    Near float32's maximum, ``amax / 127`` rounded to float32 can make ``127 * scale`` overflow to
    inf; a finite weight must never decode to inf.
    """
    if not np.isfinite(scale).all():
        raise NotEncodable("has values too large for a float32 scale")
    worst = worst_code.astype(F32)
    with np.errstate(over="ignore"):
        over = ~np.isfinite(worst * scale)
        if over.any():
            cap = np.nextafter((float(np.finfo(F32).max) / worst_code).astype(F32), F32(0))
            scale = np.where(over, np.minimum(scale, cap), scale).astype(F32)
        fits = bool(np.isfinite(worst * scale).all())
    if not fits:
        raise NotEncodable("has values too close to float32's maximum to encode")
    return scale


CHUNK = 1 << 22
"""Elements per slice of the float64 arithmetic: bounds temporaries to a few tens of MB even
for a multi-GB weight, where whole-tensor temporaries multiplied the peak memory."""


def _slices(shape: tuple[int, ...]) -> list[slice]:
    """Slices along axis 0 with about CHUNK elements each."""
    if not shape:
        return [slice(None)]
    step = max(1, CHUNK // max(1, int(np.prod(shape[1:], dtype=np.int64))))
    return [slice(i, i + step) for i in range(0, shape[0], step)]


def _part(param: npt.NDArray[Any] | int | None, sl: slice) -> Any:
    """The slice of a broadcast parameter matching ``w[sl]`` (axis 0 may be size 1)."""
    return param if param is None or isinstance(param, int) or param.ndim == 0 or param.shape[0] == 1 else param[sl]


def _encode(w: FloatArray, s: npt.NDArray[np.float32], z: npt.NDArray[np.float32] | None, *,
            low: int | npt.NDArray[np.int64], high: int | npt.NDArray[np.int64],
            dtype: np.dtype[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[np.float32]]:
    """Codes = clip(rint(w / s [+ z]), low, high) in float64, and decoded = (codes [- z]) * s in
    float32, slice by slice; ``low``/``high`` are numbers or per-channel arrays shaped like ``s``.
    Non-finite entries get code 0 here (the caller sets the sentinel)."""
    codes = np.empty(w.shape, dtype=dtype)
    decoded = np.empty(w.shape, dtype=F32)
    for sl in _slices(w.shape):
        part = np.asarray(w[sl], dtype=np.float64)
        sp, zp = _part(s, sl), _part(z, sl)
        q = part / sp.astype(np.float64)
        if zp is not None:
            q += zp
        q[~np.isfinite(part)] = 0 if zp is None else np.broadcast_to(zp, q.shape)[~np.isfinite(part)]
        np.rint(q, out=q)
        q += 0.0  # -0.0 (a small negative value rounded to 0) becomes +0.0, as Cast of code 0 gives
        np.clip(q, _part(low, sl), _part(high, sl), out=q)
        codes[sl] = q
        c = q.astype(F32)
        if zp is not None:
            c -= zp
        decoded[sl] = c * sp
    return codes, decoded


def _fix_channels(codes: npt.NDArray[Any], decoded: npt.NDArray[np.float32], dead: npt.NDArray[np.bool_],
                  constant: npt.NDArray[np.bool_], axis: int | None, *, zero: Any) -> None:
    """In place: dead channels (|w| < FLUSH) become exact zeros, and reconstructed values below
    FLUSH are flushed to zero, except in constant channels (stored exactly)."""
    shp = scale_shape(codes.shape, axis)
    zero_code = np.broadcast_to(np.asarray(zero), codes.shape)
    if dead.any():
        d = np.broadcast_to(dead.reshape(shp) if shp else dead.reshape(()), codes.shape)
        codes[d] = zero_code[d]
        decoded[d] = 0
    exact = np.broadcast_to(constant.reshape(shp) if shp else constant.reshape(()), codes.shape)
    tiny = (np.abs(decoded) < FLUSH) & (decoded != 0) & ~exact
    if tiny.any():
        codes[tiny] = zero_code[tiny]
        decoded[tiny] = 0


def error_stats(original: FloatArray, decoded: FloatArray) -> tuple[float, float]:
    """Max abs error and relative RMS error over finite entries (slice by slice, float64)."""
    worst = err2 = ref2 = 0.0
    seen = 0
    for sl in _slices(original.shape):
        a = np.asarray(original[sl], dtype=np.float64).reshape(-1)
        b = np.asarray(decoded[sl], dtype=np.float64).reshape(-1)
        finite = np.isfinite(a)
        if not finite.all():
            a, b = a[finite], b[finite]
        if not a.size:
            continue
        diff = np.abs(a - b)
        worst = max(worst, float(diff.max()))
        err2 += float(np.dot(diff, diff))
        ref2 += float(np.dot(a, a))
        seen += a.size
    return (worst, 0.0) if not seen or ref2 == 0 else (worst, float(np.sqrt(err2 / ref2)))
