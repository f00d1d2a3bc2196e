"""fp16 scales for int8 codes: ``auto`` stores a channel's scale in 2 bytes instead of 4.

Once the codes are small (few levels, coarse steps), the per-channel float32 scales are a visible
part of a download, and four bytes of mantissa noise compress poorly. A scale rounded to the
nearest fp16 moves its channel's grid by at most 2^-12 of itself; the codes are then rounded
against the rounded scale (never the other way round), so every decoded value is exactly
``code x scale`` and still within half a step of the weight: the encoding's error is what it was
with the float32 scale, only on a grid a hair wider or narrower.

That holds in fp16's normal range only: below 2^-14 fp16's spacing is absolute and the relative
error grows, above 65504 it overflows. A scale outside that range stays as it is, and so does a
scale that is itself a stored value (a constant channel is stored exactly as code +-1 times its
value). A tensor stores its scales as fp16 only if every one of them is then an fp16 value, so the
``Cast`` back to float32 when the session is created gives exactly the scales the codes were
rounded against; otherwise it keeps float32 scales (the same values, exact either way).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

HALF_MIN = float(np.finfo(np.float16).tiny)
"""Smallest normal fp16 (2^-14)."""


def on_half_grid(scale: npt.NDArray[np.floating], keep: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.float64]:
    """Each scale rounded to the nearest fp16 where that is a normal fp16; the others, and those
    where ``keep`` is True, unchanged (float64, as the codes are computed)."""
    s = np.asarray(scale, dtype=np.float64)
    with np.errstate(over="ignore"):
        half = s.astype(np.float16).astype(np.float64)
    ok = np.isfinite(half) & (np.abs(half) >= HALF_MIN)
    if keep is not None:
        ok &= ~np.broadcast_to(keep, ok.shape)
    out: npt.NDArray[np.float64] = np.where(ok, half, s)
    return out


def stored_scales(scale: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
    """``scale`` as fp16 where every value is an fp16 value (the cast back is exact), else as it is."""
    with np.errstate(over="ignore"):
        half = scale.astype(np.float16)
    return half if np.array_equal(half.astype(np.float32), scale) else scale
