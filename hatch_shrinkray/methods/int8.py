"""``int8``: per-channel 8-bit codes on the axis the consumer implies, decoded in float.

Symmetric by default: decoding is one Mul (no zero point), zero stays exactly zero, and on real
weights it was at least as accurate as asymmetric (see README). ``decode = "fast"`` emits
``DequantizeLinear`` before MatMul instead, which onnxruntime fuses into MatMulNBits: faster at
small batch but with int8 activations, hence opt-in and never raising the opset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.methods._decode import float_decode
from hatch_shrinkray.numerics.quant import quantize_affine, quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode, EncodeContext

PER_AXIS_DQ_OPSET = 13


class Int8Encoder:
    name = "int8"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        where = "per-tensor" if ctx.axis is None else f"axis {ctx.axis}"
        if ctx.options.scheme == "asymmetric":
            q = quantize_affine(w, ctx.axis, 256)
            return float_decode(q, w.dtype, ctx.opset, f"int8 asymmetric {where}")
        q = quantize_symmetric(w, ctx.axis, 8)
        if self._fast(w, ctx) and q.nonfinite is None:
            return _dequantize_linear(q, ctx.axis, where)
        return float_decode(q, w.dtype, ctx.opset, f"int8 {where}")

    @staticmethod
    def _fast(w: npt.NDArray[np.floating], ctx: EncodeContext) -> bool:
        return (ctx.options.decode == "fast" and w.dtype == np.float32 and ctx.opset >= PER_AXIS_DQ_OPSET
                and bool(ctx.consumers) and all(n.op_type == "MatMul" for n in ctx.consumers))


def _dequantize_linear(q: Any, axis: int | None, where: str) -> Decode:
    scale = q.scale.reshape(-1) if axis is not None else q.scale.reshape(())
    attrs = {"axis": axis} if axis is not None else {}
    stored: dict[str, npt.NDArray[Any]] = {"q": q.codes, "scale": scale}
    return Decode(stored, (DecodeNode("DequantizeLinear", ("q", "scale"), attrs),), q.decoded,
                  f"int8 {where} DequantizeLinear")
