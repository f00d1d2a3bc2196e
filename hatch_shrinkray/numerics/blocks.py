"""Block-wise symmetric codes, pure numpy: what onnxruntime's block-quantized kernels read.

``MatMulNBits`` and ``GatherBlockQuantized`` keep a weight as unsigned codes with one float scale
per block of ``block`` consecutive values along one axis, and decode ``(code - 2^(b-1)) * scale``
inside the kernel, so the weight stays packed in memory. The scale maps the block's value of
largest magnitude to the code ``-2^(b-1)`` exactly (as onnxruntime's own symmetric quantizer does),
so the other side keeps ``2^(b-1) - 1`` codes and all ``2^b`` codes are used. A block of zeros gets
scale 1 (its codes are the zero point); a short last block is padded with zeros, which the kernels
never read back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics.quant import FLUSH, NotEncodable

F32 = np.float32


@dataclass(frozen=True)
class Blocks:
    """Codes of a ``[rows, length]`` matrix quantized in blocks along its rows."""

    codes: npt.NDArray[np.uint8]
    """``[rows, blocks, block]``, unsigned (the zero point ``2^(bits-1)`` added), not yet packed."""
    scale: npt.NDArray[np.float32]
    """``[rows, blocks]``."""
    decoded: npt.NDArray[np.float32]
    """``[rows, length]``: what the kernel reconstructs."""
    bits: int


def quantize_blocks(rows: npt.NDArray[np.floating], bits: int, block: int) -> Blocks:
    """Symmetric ``bits``-bit codes of ``rows`` (2-D) in blocks of ``block`` along its last axis."""
    if rows.ndim != 2:
        raise NotEncodable("block codes need a 2-D weight")
    if not np.isfinite(rows).all():
        raise NotEncodable("has non-finite values, which block codes cannot hold")
    n, k = rows.shape
    count = -(-k // block)
    padded = np.zeros((n, count * block), dtype=F32)
    padded[:, :k] = rows
    grouped = padded.reshape(n, count, block)
    idx = np.abs(grouped).argmax(axis=2)
    extreme = np.take_along_axis(grouped, idx[:, :, None], axis=2)[:, :, 0].astype(np.float64)
    low = -(2 ** (bits - 1))
    scale = np.where(np.abs(extreme) >= FLUSH, extreme / low, 1.0).astype(F32)
    codes = np.clip(np.rint(grouped / scale[:, :, None]), low, -low - 1)
    decoded = (codes * scale[:, :, None]).astype(F32)
    decoded[np.abs(decoded) < FLUSH] = 0
    return Blocks((codes - low).astype(np.uint8), scale, decoded.reshape(n, count * block)[:, :k], bits)


def packed(blocks: Blocks) -> npt.NDArray[np.uint8]:
    """The codes as the kernels read them: one byte each at 8 bits; at 4 bits two to a byte, the
    first in the low nibble."""
    if blocks.bits == 8:
        return blocks.codes
    if blocks.bits != 4:
        raise ValueError(f"only 4- and 8-bit codes are packed here; got {blocks.bits}")
    c = blocks.codes
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def stored_bytes(rows: int, length: int, bits: int, block: int) -> int:
    """Bytes of the packed codes and float32 scales of a ``[rows, length]`` weight."""
    return rows * (-(-length // block)) * (block * bits // 8 + 4)
