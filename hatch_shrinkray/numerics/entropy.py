"""What deflate (a wheel member) and brotli (a web download) make of the tensors a candidate stores,
estimated without writing a model, and without brotli 11 (which is slow on weight data).

On int8 codes at 255 down to 7 levels per channel,
brotli 11 stores a code in about the order-0 entropy of the codes (below it where weights have
structure beyond their histogram, as an STFT basis does), so the web estimate is that entropy, on
the large side. Deflate does worse than the entropy, and the more so the fewer the levels (its
Huffman-coded literals spend at least a bit per code and its short matches do not pay on such
data), which no formula of the histogram caught closely; so the wheel estimate deflates the bytes
themselves (level 6, as hatchling), an evenly spread sample of them for large tensors. Fewer
levels are the only lever: no byte transform moved either compressor below the entropy.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

WHEEL_LEVEL = 6
SAMPLE = 1 << 20
"""Bytes of a tensor deflated for the wheel estimate at most (``SLICES`` slices spread evenly)."""
SLICES = 16


def entropy_bits(data: npt.NDArray[Any]) -> float:
    """Order-0 empirical entropy of ``data``'s bytes (as a file stores them), bits per byte."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    counts = np.bincount(raw, minlength=256)
    p = counts[counts > 0] / max(1, raw.size)
    return float(-(p * np.log2(p)).sum())


def deflated_bytes(data: npt.NDArray[Any]) -> int:
    """Deflate level 6 of ``data``'s bytes, from a sample of at most ``SAMPLE`` bytes when larger."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if raw.size <= SAMPLE:
        return len(zlib.compress(raw.tobytes(), WHEEL_LEVEL))
    size = SAMPLE // SLICES
    starts = np.linspace(0, raw.size - size, SLICES).round().astype(np.int64)
    packed = sum(len(zlib.compress(raw[s:s + size].tobytes(), WHEEL_LEVEL)) for s in starts)
    return math.ceil(packed * raw.size / (size * SLICES))


def estimated_bytes(stored: Mapping[str, npt.NDArray[Any]], target: str) -> int:
    """The bytes ``target`` (``wheel``, ``web``, ``disk``) would count for these stored tensors (codes,
    scales, ...): raw on disk; deflated in a wheel; their entropy on the web; never more than raw."""
    total = 0
    for array in stored.values():
        raw = int(array.nbytes)
        if target == "disk" or raw == 0:
            total += raw
        elif target == "wheel":
            total += min(raw, deflated_bytes(array))
        else:
            total += min(raw, math.ceil(raw * entropy_bits(array) / 8))
    return total
