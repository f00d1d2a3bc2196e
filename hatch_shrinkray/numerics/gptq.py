"""Integer codes that minimise a layer's *output* error on calibration data, not its weight error.

Round-to-nearest makes every weight's error as small as possible independently; the layer output
``W x`` sums those errors, and on real activations (correlated, with a few dominant features) the
sum is far from minimal. Two steps, both scored by ``dW H dW^T`` with ``H = sum x x^T`` (``calib``):

1. per-channel scale search: shrink each channel's range by a factor in ``ALPHAS`` (clipping the
   largest weights a little buys a finer grid for all others) and keep the best factor, judged by
   the activation energy of each input feature;
2. GPTQ (Frantar et al. 2022): quantize input features one at a time, most active first, and
   push each rounding error onto the not-yet-quantized features through ``H^-1``, so later roundings
   compensate it.

The result is kept only where it beats plain round-to-nearest on the same ``H`` (it always did on
the corpus, but a degenerate ``H`` must not make things worse).

Speed: the scale trials are weighted by the diagonal of ``H`` only
(better and cheaper, see ``_trial_errors``); GPTQ works on the transposed weight (one input feature
per contiguous row) with small blocks, so most of its work is in matrix products rather than
per-column numpy calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics.scales import on_half_grid

ALPHAS = tuple(1.0 - 0.01 * i for i in range(16))
DAMP = 0.01
BLOCK = 16
"""Columns quantized one by one before their error is pushed onto the rest with one matrix product."""
BLOCK_INVERSE = 64
"""Triangular blocks inverted directly (``_lower_inverse``)."""
TRIAL_VALUES = 1 << 22
"""Weight values per batch of scale trials (bounds the temporaries to a few tens of MB)."""

F64 = npt.NDArray[np.float64]
Bounds = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
"""Per row ``(neg, pos)``: the codes allowed are ``-neg .. pos`` (``quant.code_bounds``)."""


@dataclass(frozen=True)
class Rounded:
    codes: F64
    """``[rows, K]`` integer-valued codes."""
    scale: F64
    """``[rows]``."""
    rtn_error: float
    """Output error energy ``sum dW H dW^T`` of plain round-to-nearest with the original scales."""
    error: float
    """The same for the returned codes."""


def output_error(dw: F64, h: F64) -> F64:
    """Per-row ``dW[r] H dW[r]^T``; the product in float32 (half the time of float64; the errors
    only rank encodings and rows), each row's sum in float64."""
    d = np.asarray(dw, dtype=np.float32)
    out: F64 = ((d @ np.asarray(h, dtype=np.float32)) * d).sum(axis=1, dtype=np.float64)
    return out


def _rtn(w: F64, s: F64, bounds: Bounds) -> F64:
    return np.clip(np.rint(w / s[:, None]), -bounds[0][:, None], bounds[1][:, None])


def symmetric_bounds(rows: int, bits: int) -> Bounds:
    """Every code of a ``bits``-bit symmetric grid, for each of ``rows``."""
    full = np.full(rows, 2 ** (bits - 1) - 1, dtype=np.int64)
    return full, full.copy()


def round_rows(w: F64, scale: F64, h: F64, bits: int = 8, bounds: Bounds | None = None, *,
               half_scales: bool = False) -> Rounded:
    """Codes for ``w`` ``[rows, K]`` given RTN scales ``[rows]`` and ``h`` ``[K, K]``, within
    ``bounds`` (default: the whole ``bits``-bit grid; fewer levels: ``quant.code_bounds``).
    ``half_scales``: the scales the search picks are rounded to fp16 (``scales``) before the codes
    are fitted to them (``scale`` itself is taken as given)."""
    bounds = symmetric_bounds(w.shape[0], bits) if bounds is None else bounds
    rtn = _rtn(w, scale, bounds)
    rtn_err = output_error(w - rtn * scale[:, None], h)
    best_s = scale * np.asarray(ALPHAS)[np.argmin(_trial_errors(w, scale, h, bounds), axis=0)]
    if half_scales:
        best_s = on_half_grid(best_s)
    clipped = _rtn(w, best_s, bounds)
    clip_err = output_error(w - clipped * best_s[:, None], h)
    codes = gptq(w, best_s, h, bounds)
    err = output_error(w - codes * best_s[:, None], h)
    use_gptq = err < clip_err
    codes = np.where(use_gptq[:, None], codes, clipped)
    final_err = np.where(use_gptq, err, clip_err)
    worse = final_err > rtn_err
    codes = np.where(worse[:, None], rtn, codes)
    best_s = np.where(worse, scale, best_s)
    final_err = np.where(worse, rtn_err, final_err)
    return Rounded(codes, best_s, float(rtn_err.sum()), float(final_err.sum()))


def _trial_errors(w: F64, scale: F64, h: F64, bounds: Bounds) -> F64:
    """``[len(ALPHAS), rows]``: error of round-to-nearest at ``scale * alpha`` per factor and row,
    weighted by each input feature's activation energy (the diagonal of ``h``; GPTQ then handles the
    correlations). Scales chosen this way leave GPTQ less output error than scales chosen with the
    full ``h`` for round-to-nearest, at a fraction of the cost."""
    rows, k = w.shape
    w32 = w.astype(np.float32)
    energy = np.diag(h).astype(np.float32)
    alphas = np.asarray(ALPHAS)
    out = np.empty((len(alphas), rows))
    low, high = -bounds[0][:, None].astype(np.float32), bounds[1][:, None].astype(np.float32)
    step = max(1, TRIAL_VALUES // max(1, rows * k))
    for t0 in range(0, len(alphas), step):
        s = (alphas[t0:t0 + step, None] * scale[None, :]).astype(np.float32)[:, :, None]  # [trials, rows, 1]
        dw = w32[None] - np.clip(np.rint(w32[None] / s), low, high) * s
        out[t0:t0 + step] = (dw * dw) @ energy
    return out


def gptq(w: F64, s: F64, h: F64, bounds: Bounds | int) -> F64:
    """GPTQ with activation order and lazy block updates; returns codes ``[rows, K]``, each rounded
    to the nearest code its row allows (``bounds``, or ``-qmax .. qmax`` given an int)."""
    if isinstance(bounds, int):
        full = np.full(w.shape[0], bounds, dtype=np.int64)
        bounds = (full, full)
    k = w.shape[1]
    h = h.copy()
    dead = np.diag(h) <= 0
    h[dead, dead] = 1.0
    diag = np.diag(h)
    h[np.diag_indices(k)] += DAMP * float(diag.mean())
    perm = np.argsort(-diag, kind="stable")
    inv_perm = np.argsort(perm, kind="stable")
    u = inverse_factor(h[np.ix_(perm, perm)])
    if u is None:
        return _rtn(w, s, bounds)
    low, high = -bounds[0].astype(np.float64), bounds[1].astype(np.float64)
    wt = np.ascontiguousarray(w[:, perm].T)  # [K, rows]: each input feature a contiguous row
    q = np.zeros_like(wt)
    for i1 in range(0, k, BLOCK):
        i2 = min(i1 + BLOCK, k)
        block = wt[i1:i2].copy()
        err = np.zeros_like(block)
        u1 = u[i1:i2, i1:i2]
        for j in range(i2 - i1):
            codes = np.minimum(np.maximum(np.rint(block[j] / s), low), high)  # np.clip, without its wrapper's cost
            q[i1 + j] = codes
            e = (block[j] - codes * s) / u1[j, j]
            block[j + 1:] -= u1[j, j + 1:, None] * e
            err[j] = e
        wt[i2:] -= u[i1:i2, i2:].T @ err
    out: F64 = np.ascontiguousarray(q[inv_perm].T)
    return out


def inverse_factor(h: F64) -> F64 | None:
    """Upper triangular ``U`` with ``U^T U = h^-1`` (None if ``h`` is not positive definite), from one
    factorisation: with ``J`` the reversal, ``J h J = L L^T`` gives ``h = R R^T`` for the upper
    triangular ``R = J L J``, so ``U = R^-1 = J L^-1 J``."""
    try:
        low = np.linalg.cholesky(h[::-1, ::-1]).astype(np.float64, copy=False)
    except np.linalg.LinAlgError:
        return None
    out: F64 = _lower_inverse(low)[::-1, ::-1]
    return out


def _lower_inverse(low: F64) -> F64:
    """Inverse of a lower triangular matrix by halves, ``[[A, 0], [B, C]]^-1 = [[A^-1, 0],
    [-C^-1 B A^-1, C^-1]]``: matrix products, about a sixth of the work of a general inverse
    (which is slow for a convolution with thousands of input features)."""
    n = low.shape[0]
    if n <= 2 * BLOCK_INVERSE:
        direct: F64 = np.tril(np.linalg.inv(low)).astype(np.float64, copy=False)
        return direct
    m = n // 2
    a_inv, c_inv = _lower_inverse(low[:m, :m]), _lower_inverse(low[m:, m:])
    out: F64 = np.zeros_like(low)
    out[:m, :m] = a_inv
    out[m:, m:] = c_inv
    out[m:, :m] = -(c_inv @ low[m:, :m]) @ a_inv
    return out
