"""``MatMulNBits``: a MatMul or Gemm weight kept as block-wise 4- or 8-bit codes that onnxruntime's
contrib kernel reads as they are, so the weight stays packed in memory after the session loads.

The chain replaces the consumer (``Decode.replaces``): ``MatMul(A, W)`` becomes
``MatMulNBits(A, codes, scales)``, and ``Gemm(A, W, C)`` (``transA = 0``, ``alpha = beta = 1``, either
``transB``) the same followed by ``Add(C)``, not the kernel's bias input, which releases before 1.19 lack.
Blocks run along K (``numerics.blocks``): ``[N, blocks, block * bits / 8]`` bytes plus one float32
scale per block. ``accuracy_level`` 4 quantizes the activations to int8 per block inside the kernel
(the 8-bit kernel computes in float otherwise, several times slower than float32 MatMul); 0 keeps
float compute (the decoded weight is exactly what the kernel multiplies with). Which releases have which
kernel is in ``methods.runtimes``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from onnx import NodeProto

from hatch_shrinkray.numerics.blocks import packed, quantize_blocks
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode, EncodeContext
from hatch_shrinkray.onnxgraph.graph import attribute

CONTRIB = "com.microsoft"
INT8_ACTIVATIONS = 4
"""``accuracy_level`` at which the kernel quantizes its activations to int8."""


def consumer_layout(consumers: tuple[NodeProto, ...]) -> tuple[str, bool, bool]:
    """``(op, transposed, bias)`` shared by every consumer: ``MatMul`` or ``Gemm``, whether the weight
    is stored ``[N, K]`` (``transB``), and whether a Gemm adds its ``C``; NotEncodable otherwise."""
    ops = {n.op_type for n in consumers}
    if len(ops) != 1 or not ops <= {"MatMul", "Gemm"}:
        raise NotEncodable(f"MatMulNBits replaces MatMul or Gemm, not {', '.join(sorted(ops))}")
    op = ops.pop()
    if op == "MatMul":
        return op, False, False
    layouts = {(int(attribute(n, "transA", 0)), float(attribute(n, "alpha", 1.0)), float(attribute(n, "beta", 1.0)),
                int(attribute(n, "transB", 0)), len(n.input) > 2 and bool(n.input[2])) for n in consumers}
    if len(layouts) != 1:
        raise NotEncodable("its Gemm consumers differ in their attributes")
    trans_a, alpha, beta, trans_b, bias = layouts.pop()
    if trans_a or alpha != 1.0 or beta != 1.0:
        raise NotEncodable("MatMulNBits replaces a Gemm only with transA = 0 and alpha = beta = 1")
    return op, bool(trans_b), bias


class MatMulNBitsEncoder:
    name = "matmul-nbits"

    def __init__(self, bits: int, block: int, accuracy_level: int = 0) -> None:
        self.bits, self.block, self.accuracy_level = bits, block, accuracy_level

    def label(self) -> str:
        compute = ", int8 activations" if self.accuracy_level == INT8_ACTIVATIONS else ""
        return f"MatMulNBits {self.bits}-bit, block {self.block}{compute}"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        if w.dtype != np.float32 or w.ndim != 2:
            raise NotEncodable("MatMulNBits reads 2-D float32 weights")
        op, transposed, bias = consumer_layout(ctx.consumers)
        rows = w if transposed else w.T  # [N, K]: blocks run along K
        b = quantize_blocks(rows, self.bits, self.block)
        n, k = rows.shape
        attrs = {"K": k, "N": n, "bits": self.bits, "block_size": self.block}
        if self.accuracy_level:
            attrs["accuracy_level"] = self.accuracy_level
        nodes = [DecodeNode("MatMulNBits", ("$0", "q", "scales"), attrs, CONTRIB)]
        if bias:
            nodes.append(DecodeNode("Add", ("@0", "$2")))
        decoded = b.decoded if transposed else np.ascontiguousarray(b.decoded.T)
        return Decode({"q": packed(b), "scales": b.scale}, tuple(nodes), decoded, self.label(), replaces=op)
