"""The encodings ``auto`` may choose for one weight, each with its size and its decoded values.

Ladder, smallest first: 4-bit blocks (MatMul initializers, onnxruntime's MatMulNBits numerics),
int8 per-channel (output-error-aware rounding when calibration moments exist, else round-to-
nearest; with fewer levels, or with coarser steps on the channels whose output error costs least
per bit saved, ``step_candidates``), a 16-bit encoding (int16 per-channel or fp16, whichever reproduces the layer output
better: int16 has 4 more bits of resolution within a channel, fp16 wins on channels with a huge
dynamic range, one outlier far above the rest), and the original float32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.encodings import packing
from hatch_shrinkray.encodings._decode import HALF_SCALES, WHERE_MIN_OPSET, float_decode
from hatch_shrinkray.encodings.fp16 import Fp16Encoder
from hatch_shrinkray.fitting.calib import Layout, as_rows, from_rows
from hatch_shrinkray.numerics import gptq, quant
from hatch_shrinkray.numerics.entropy import estimated_bytes
from hatch_shrinkray.numerics.scales import on_half_grid, stored_scales
from hatch_shrinkray.numerics.steps import StepTable, steps_saving
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext

F32 = np.float32
MIN_ROWS_PER_FEATURE = 2


@dataclass(frozen=True)
class Candidate:
    kind: str
    """``int4-block`` | ``int4`` | ``int6`` | ``int8`` | ``int8-<k>levels`` (k < 255 codes per channel in
    int8, ``level_kind``) | ``int8-steps<b>`` (int8 with coarser steps saving about b bits a value,
    ``step_kind``) | ``int8-<h>+<c>levels`` (h codes for a head's competing classes, c for the
    others, ``split``) | ``int10`` | ``int12`` | ``int16`` | ``fp16`` | ``fp32``."""
    label: str
    stored_bytes: int
    decoded: npt.NDArray[Any]
    decode: Decode | None
    """None for ``fp32`` (kept) and ``int4`` (written by onnxruntime's quantizer)."""
    weight_error: float
    """Estimated output error energy on the calibration data (``dW H dW^T``; plain ``|dW|^2``
    without calibration moments)."""
    note: str = ""
    _sizes: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    """``target_bytes`` per target, computed once: the search's table, the no-larger-than-int8 rule
    and the guard all ask (a deflate of every stored tensor each time)."""

    def target_bytes(self, target: str) -> int:
        """Its bytes as ``target`` (``wheel``, ``web``, ``disk``) counts them, estimated from what it
        stores (``numerics.entropy``): codes and scales, or the float32 weight itself when kept. The
        MatMulNBits blocks (written by onnxruntime's quantizer) count their raw bytes."""
        size = self._sizes.get(target)
        if size is None:
            if self.decode is not None:
                size = estimated_bytes(self.decode.stored, target)
            elif self.kind == "fp32":
                size = estimated_bytes({"w": self.decoded}, target)
            else:
                size = self.stored_bytes
            self._sizes[target] = size
        return size

    @property
    def split(self) -> bool:
        """Two level counts over the channels (``split``), not one rung of the ladder."""
        return "+" in self.kind

    @property
    def bits(self) -> int:
        """Bits per value of the encoding (the rung of the ladder it stands on)."""
        return int("".join(ch for ch in self.kind.split("-")[0] if ch.isdigit()))


def error_energy(w: npt.NDArray[Any], decoded: npt.NDArray[Any], moments: npt.NDArray[np.float64] | None,
                 lay: Layout | None) -> float:
    dw = (np.asarray(decoded, dtype=np.float64) - w.astype(np.float64))
    dw = np.where(np.isfinite(dw), dw, 0.0)
    if moments is None or lay is None:
        return float(np.square(dw).sum())
    rows = as_rows(dw, lay)
    g = moments.shape[0]
    per = rows.shape[0] // g
    return float(sum(gptq.output_error(rows[i * per:(i + 1) * per], moments[i]).sum() for i in range(g)))


def int4_block(w: npt.NDArray[np.float32], block: int) -> tuple[npt.NDArray[np.float32], int]:
    """What onnxruntime's symmetric MatMulNBits quantizer reconstructs for ``w`` ``[K, N]``, and the
    stored size the ``int4`` method reports for it."""
    from onnxruntime.capi._pybind_state import quantize_matmul_4bits

    k, n = w.shape
    blocks = -(-k // block)
    padded = np.zeros((blocks * block, n), dtype=F32)
    padded[:k] = w
    packed = np.zeros((n, blocks, block // 2), dtype=np.uint8)
    zero = np.zeros((n, (blocks + 1) // 2), dtype=np.uint8)
    scales = np.zeros((n, blocks), dtype=F32)
    quantize_matmul_4bits(packed, padded, scales, zero, block, n, k, True)
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(n, blocks, block).astype(F32) - 8
    decoded = (codes * scales[:, :, None]).reshape(n, blocks * block)[:, :k].T
    return np.ascontiguousarray(decoded, dtype=F32), n * blocks * (block // 2 + 4)


INT8_LEVELS = 255
NBITS = "int4-block"
"""Kind of the MatMulNBits candidate (written by onnxruntime's quantizer, not by a decode chain)."""


def levels_of(kind: str) -> int | None:
    """The codes per channel of an int8 candidate kind (``int8``: 255; None for other kinds)."""
    if kind == "int8":
        return INT8_LEVELS
    plain = kind.startswith("int8-") and kind.endswith("levels") and "+" not in kind
    return int(kind[len("int8-"):-len("levels")]) if plain else None


def level_kind(levels: int) -> str:
    """The candidate kind of ``levels`` codes per channel in an int8 container (255: plain int8)."""
    return "int8" if levels == INT8_LEVELS else f"int8-{levels}levels"


STEP_SAVINGS = (1.0, 0.5)
"""Bits a value that the coarser-step candidates aim to save against max-abs int8 (``step_candidates``),
smaller candidate first as on the ladder: about the size of 127 and 180 levels, at the output error of the
channels that cost least."""
STEPS = "int8-steps"


def step_kind(saving: float) -> str:
    return f"{STEPS}{saving:g}"


def rung_levels(kind: str) -> int | None:
    """Where an int8 candidate stands among the level counts: its levels, or for coarser steps the
    level count of about the same size (255 / 2^bits saved); None for other kinds."""
    return round(INT8_LEVELS / 2 ** float(kind[len(STEPS):])) if kind.startswith(STEPS) else levels_of(kind)


def rung_words(kind: str) -> str:
    """A candidate kind as the report line says it."""
    levels = levels_of(kind)
    if kind == "int8":
        return "int8"
    if levels is not None:
        return f"int8 with {levels} levels"
    if kind.startswith(STEPS):
        return f"int8 with coarser steps (aimed at {kind[len(STEPS):]} bit a value fewer)"
    return ("int8 with fewer levels for a head's other classes" if "+" in kind
            else {"fp32": "float32", NBITS: "4-bit blocks"}.get(kind, kind))


def step_candidates(w: npt.NDArray[np.float32], ctx: EncodeContext, moments: npt.NDArray[np.float64] | None,
                    lay: Layout | None, *, rows_seen: int = 0, fit: bool = True,
                    half_scales: bool = False) -> list[Candidate]:
    """int8 codes with one scale per channel, some channels at a coarser step (``numerics.steps``):
    for each of ``STEP_SAVINGS``, the steps that save that many bits a value at the least output
    error on the calibration moments, the codes then rounded output-aware (``fit``) where that beats
    round-to-nearest at the same steps. None without moments on the weight's channel axis (the
    steps are chosen by output error), with non-finite values, or for grouped convolutions.
    ``half_scales``: as ``int_candidate``'s."""
    axis = ctx.axis
    if moments is None or lay is None or moments.shape[0] != 1 or axis != (1 if lay.transpose else 0):
        return []
    if rows_seen < MIN_ROWS_PER_FEATURE * moments.shape[-1]:
        return []
    q0 = quant.quantize_symmetric(w, axis, 8, half_scales=half_scales)
    if q0.nonfinite is not None:
        return []
    h = moments[0]
    rows = as_rows(w.astype(np.float64), lay)
    s0 = as_rows(np.broadcast_to(q0.scale, w.shape), lay)[:, 0].astype(np.float64)
    exact = (rows.min(axis=1) == rows.max(axis=1)) | (np.abs(rows).max(axis=1) < quant.FLUSH)
    q0_rows = as_rows(q0.codes.astype(np.float64), lay)
    table = StepTable(rows, s0, h)
    where = f"axis {axis}"
    out = []
    for saving in STEP_SAVINGS:
        scale = steps_saving(table, saving)
        if scale is None:
            continue
        scale = np.where(exact, s0, on_half_grid(scale, keep=exact) if half_scales else scale)
        scale32 = scale.astype(F32)
        if not np.isfinite(scale32).all() or not np.isfinite(scale32 * F32(127)).all():
            continue
        codes = np.clip(np.rint(rows / scale[:, None]), -127, 127)
        how = "round-to-nearest"
        if fit:
            fitted = gptq.gptq(rows, scale, h, 127)
            better = gptq.output_error(rows - fitted * scale[:, None], h) < gptq.output_error(
                rows - codes * scale[:, None], h)
            if better.any():
                codes = np.where(better[:, None], fitted, codes)
                how = "output-aware rounding"
        codes[exact] = q0_rows[exact]
        q = _rows_quantized(codes, scale32, exact, lay, w.shape, axis=axis, dtype=np.int8, half_scales=half_scales)
        coarser = int((scale32 != s0.astype(F32)).sum())
        label = f"int8 coarser steps {saving:g} bit {where}{' gptq' if how != 'round-to-nearest' else ''}"
        dec = float_decode(q, w.dtype, ctx.opset, label)
        out.append(Candidate(step_kind(saving), dec.label, dec.stored_bytes, q.decoded, dec,
                             error_energy(w, q.decoded, moments, lay),
                             f"coarser steps on {coarser} of {len(scale)} channels ({how})"))
    return out


FEW_ROWS = "round-to-nearest (only "
"""How a candidate's note begins when there were too few calibration rows to fit its rounding."""


def int_candidate(w: npt.NDArray[np.float32], ctx: EncodeContext, moments: npt.NDArray[np.float64] | None,
                  lay: Layout | None, *, rows_seen: int = 0, bits: int = 8, levels: int | None = None,
                  fit: bool = True, half_scales: bool = False) -> Candidate:
    """Symmetric per-channel ``bits``-bit codes (int8 as a plain tensor, other widths packed);
    output-error-aware rounding where moments exist for the weight's axis. ``levels`` (int8 only,
    3..255) keeps that many codes per channel on the same grid, decoded exactly like int8 (the
    rounding then picks among those codes only). ``fit=False``: round-to-nearest codes whatever the
    moments (which still estimate the error). ``half_scales`` (int8 only): every scale rounded to
    fp16 before the codes are rounded or fitted to it, and stored as fp16 where exact
    (``numerics.scales``)."""
    axis = ctx.axis
    if (levels is not None or half_scales) and bits != 8:
        raise ValueError("levels and fp16 scales apply to int8 codes only")
    levels = INT8_LEVELS if bits == 8 and levels is None else levels
    where = "per-tensor" if axis is None else f"axis {axis}"
    kind = level_kind(levels) if levels is not None else f"int{bits}"
    name = kind if levels in (None, INT8_LEVELS) else f"int8 {levels} levels"
    q0 = quant.quantize_symmetric(w, axis, bits, levels, half_scales=half_scales)
    if bits != 8 and q0.nonfinite is not None:
        raise quant.NotEncodable("packed codes keep no non-finite sentinel")

    def decode(q: quant.Quantized, label: str) -> Decode:
        if bits == 8:
            return float_decode(q, w.dtype, ctx.opset, label)
        return packing.packed_decode(q.codes, q.scale, bits, opset=ctx.opset, decoded=q.decoded, label=label)

    base = decode(q0, f"{name} {where}")
    rtn_err = error_energy(w, q0.decoded, moments, lay)
    if not fit or moments is None or lay is None or q0.nonfinite is not None or axis != (1 if lay.transpose else 0):
        return Candidate(kind, base.label, base.stored_bytes, q0.decoded, base, rtn_err, "round-to-nearest")
    if rows_seen < MIN_ROWS_PER_FEATURE * moments.shape[-1]:
        # Fewer calibration rows than features: H is rank-deficient and any output-aware
        # rounding would fit the calibration inputs, not the layer.
        return Candidate(kind, base.label, base.stored_bytes, q0.decoded, base, rtn_err,
                         f"{FEW_ROWS}{rows_seen} calibration rows for {moments.shape[-1]} features)")
    q = _fitted_codes(w, q0, moments, lay, bits=bits, levels=levels, axis=axis, half_scales=half_scales)
    decoded = q.decoded
    err = error_energy(w, decoded, moments, lay)
    if err >= rtn_err:
        return Candidate(kind, base.label, base.stored_bytes, q0.decoded, base, rtn_err, "round-to-nearest")
    dec = decode(q, f"{name} {where} gptq")
    gain = rtn_err / err if err > 0 else float("inf")
    return Candidate(kind, dec.label, dec.stored_bytes, decoded, dec, err,
                     f"output-aware rounding: {gain:.2f}x less output error than round-to-nearest")


def _fitted_codes(w: npt.NDArray[np.float32], q0: quant.Quantized, moments: npt.NDArray[np.float64], lay: Layout,
                  *, bits: int, levels: int | None, axis: int | None, half_scales: bool) -> quant.Quantized:
    """The codes and scales output-error-aware rounding (``gptq``) fits on ``moments``, one group of
    rows at a time; constant or all-tiny rows keep their round-to-nearest codes (``q0``)."""
    rows = as_rows(w.astype(np.float64), lay)
    s0 = as_rows(np.broadcast_to(q0.scale, w.shape), lay)[:, 0].astype(np.float64)
    g = moments.shape[0]
    per = rows.shape[0] // g
    codes = np.empty_like(rows)
    scale = np.empty_like(s0)
    bounds = quant.code_bounds(rows.min(axis=1), rows.max(axis=1), levels) if levels is not None else None
    for i in range(g):
        sl = slice(i * per, (i + 1) * per)
        r = gptq.round_rows(rows[sl], s0[sl], moments[i], bits,
                            None if bounds is None else (bounds[0][sl], bounds[1][sl]), half_scales=half_scales)
        codes[sl] = r.codes
        scale[sl] = r.scale
    exact = (rows.min(axis=1) == rows.max(axis=1)) | (np.abs(rows).max(axis=1) < quant.FLUSH)
    codes[exact] = as_rows(q0.codes.astype(np.float64), lay)[exact]
    scale[exact] = s0[exact]
    return _rows_quantized(codes, scale.astype(F32), exact, lay, w.shape, axis=axis, dtype=q0.codes.dtype,
                           half_scales=half_scales)


def _rows_quantized(codes: npt.NDArray[np.float64], scale32: npt.NDArray[np.float32], exact: npt.NDArray[np.bool_],
                    lay: Layout, shape: tuple[int, ...], *, axis: int | None, dtype: npt.DTypeLike,
                    half_scales: bool) -> quant.Quantized:
    """Rows of fitted ``codes`` at ``scale32`` as the tensor's codes, scales and decoded values; a
    value that decodes to less than ``FLUSH`` (outside the ``exact`` rows) gets the code 0."""
    dec_rows = (codes.astype(F32) * scale32[:, None]).astype(F32)
    tiny = (np.abs(dec_rows) < quant.FLUSH) & (dec_rows != 0) & ~exact[:, None]
    codes[tiny] = 0
    dec_rows[tiny] = 0
    decoded = from_rows(dec_rows, lay, shape)
    stored = scale32.reshape(quant.scale_shape(shape, axis))
    return quant.Quantized(from_rows(codes, lay, shape).astype(dtype), stored_scales(stored) if half_scales else stored,
                           None, decoded, None, None)


def split(w: npt.NDArray[np.float32], hot: Candidate, cold: Candidate, mask: npt.NDArray[np.bool_], *, axis: int,
          moments: npt.NDArray[np.float64] | None, lay: Layout | None) -> Candidate:
    """The channels along ``axis`` where ``mask`` is True from ``hot``, the others from ``cold`` (two
    int8 candidates of one weight with per-channel scales on ``axis``): still int8 codes times one
    scale per channel, decoded by the same nodes. Output-aware rounding is per channel (each row
    of GPTQ carries only its own error forward), so the halves are exactly what each rounding made."""
    hd, cd = hot.decode, cold.decode
    if hd is None or cd is None or set(hd.stored) != {"q", "scale"} or set(cd.stored) != {"q", "scale"}:
        raise quant.NotEncodable("only plain int8 codes with per-channel scales split by channel")
    if hd.stored["scale"].dtype != cd.stored["scale"].dtype:
        raise quant.NotEncodable("the two level counts store their scales in different precisions")
    shape = [1] * w.ndim
    shape[axis] = w.shape[axis]
    pick = mask.reshape(shape)
    stored = {"q": np.where(pick, hd.stored["q"], cd.stored["q"]),
              "scale": np.where(pick, hd.stored["scale"], cd.stored["scale"])}
    decoded = np.where(pick, hot.decoded, cold.decoded).astype(hot.decoded.dtype)
    h, c = levels_of(hot.kind), levels_of(cold.kind)
    label = f"int8 {h} levels for {int(mask.sum())} competing classes, {c} for {int((~mask).sum())} others, axis {axis}"
    if stored["scale"].dtype == np.float16:
        label = f"{label}, {HALF_SCALES}"
    dec = Decode(stored, hd.nodes, decoded, label)
    return Candidate(f"int8-{h}+{c}levels", label, dec.stored_bytes, decoded, dec,
                     error_energy(w, decoded, moments, lay), f"classes that never compete on the recording: {c} levels")


def sixteen_bit(w: npt.NDArray[np.float32], ctx: EncodeContext, moments: npt.NDArray[np.float64] | None,
                lay: Layout | None) -> Candidate | None:
    """The better of int16 per-channel and fp16 for this weight (None if neither applies)."""
    options: list[Candidate] = []
    try:
        q = quant.quantize_symmetric(w, ctx.axis, 16)
        dec = float_decode(q, w.dtype, ctx.opset, f"int16 {'per-tensor' if ctx.axis is None else f'axis {ctx.axis}'}")
        options.append(Candidate("int16", dec.label, dec.stored_bytes, q.decoded, dec,
                                 error_energy(w, q.decoded, moments, lay)))
    except quant.NotEncodable:
        pass
    try:
        half = Fp16Encoder().encode(w, ctx)
        options.append(Candidate("fp16", half.label, half.stored_bytes, half.decoded, half,
                                 error_energy(w, half.decoded, moments, lay)))
    except quant.NotEncodable:
        pass
    return None if not options else min(options, key=lambda c: (c.weight_error, c.stored_bytes))


def float32_scales(c: Candidate) -> Candidate:
    """``c`` with fp16 scales stored as the float32 values they are: the same decoded weight, without
    the scale's ``Cast`` to fold at load. For a small weight the few dozen bytes fp16 saves cost more
    load time than they are worth (a node folded at load costs about as much whatever its size).
    Chains with more than the codes and one scale (non-finite values restored) keep theirs."""
    d = c.decode
    if d is None or set(d.stored) != {"q", "scale"} or d.stored["scale"].dtype != np.float16:
        return c
    q = quant.Quantized(d.stored["q"], d.stored["scale"].astype(np.float32), None, d.decoded, None, None)
    decode = float_decode(q, d.decoded.dtype, WHERE_MIN_OPSET, d.label.replace(f", {HALF_SCALES}", ""))
    return Candidate(c.kind, c.label.replace(f", {HALF_SCALES}", ""), decode.stored_bytes, c.decoded, decode,
                     c.weight_error, c.note)


def fp32(w: npt.NDArray[np.float32]) -> Candidate:
    return Candidate("fp32", "kept", int(w.nbytes), w, None, 0.0)
