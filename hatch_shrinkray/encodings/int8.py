"""``int8``: per-channel 8-bit codes on the axis the consumer implies, decoded in float.

Symmetric by default: decoding is one Mul (no zero point), zero stays exactly zero, and on real
weights it is at least as accurate as asymmetric (docs/methods.md). ``decode = "fast"`` emits
``DequantizeLinear`` before MatMul instead, which onnxruntime (>= 1.25) fuses into MatMulNBits:
faster at small batch but with int8 activations, hence opt-in and never raising the opset. Where
the build's onnxruntime does not fuse it (a MatMul that its MatMul+Add fusion turned into a Gemm
first), the DequantizeLinear would run on every inference, so that weight is
decoded in float instead and its record says so.

``levels = k`` (3..254) keeps at most k distinct codes per channel on the same uniform grid (codes
-m..m with scale amax/m for k = 2m+1; an even k gives the extra code to the channel's wider side):
the same container, nodes and load cost as int8, and a smaller download, since deflate and brotli
store each code in about the empirical entropy of the codes (``numerics.entropy``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import ModelProto, TensorProto, helper

from hatch_shrinkray.encodings._decode import float_decode
from hatch_shrinkray.files import temporary_directory
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.numerics.quant import quantize_affine, quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode, EncodeContext
from hatch_shrinkray.onnxgraph.graph import Names, scopes
from hatch_shrinkray.onnxgraph.modelio import fits_one_file
from hatch_shrinkray.result import TensorRecord

PER_AXIS_DQ_OPSET = 13
INT8_LEVELS = 255
"""Every symmetric int8 code (-127..127): ``levels`` below it keep fewer per channel (module docstring)."""


class Int8Encoder:
    name = "int8"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        levels = ctx.options.level_count() if facts(ctx.options.method).int8_levels else INT8_LEVELS
        where = ("" if levels == INT8_LEVELS else f"{levels} levels ") + (
            "per-tensor" if ctx.axis is None else f"axis {ctx.axis}")
        if ctx.options.scheme == "asymmetric":
            q = quantize_affine(w, ctx.axis, 256 if levels == INT8_LEVELS else levels)
            return float_decode(q, w.dtype, ctx.opset, f"int8 asymmetric {where}")
        q = quantize_symmetric(w, ctx.axis, 8, levels)
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


def keep_fused(model: ModelProto, records: list[TensorRecord]) -> list[TensorRecord]:
    """``decode = "fast"``: decode in float, in place, the weights whose DequantizeLinear the build's
    onnxruntime does not fuse (it would run on every inference); their records say so."""
    unfused = unfused_dequantize(model)
    if not unfused:
        return records
    version = _float_decode(model, unfused)
    note = f"DequantizeLinear not fused by onnxruntime {version} (it would run on every inference): decoded in float"
    return [dataclasses.replace(r, encoding=r.encoding.replace(" DequantizeLinear", ""),
                                note=f"{r.note}; {note}".lstrip("; ")) if r.name in unfused else r
            for r in records]


def unfused_dequantize(model: ModelProto) -> set[str]:
    """Outputs of the DequantizeLinear nodes left in the graph the build's onnxruntime optimizes."""
    import onnxruntime as ort

    if not fits_one_file(model) or not any(n.op_type == "DequantizeLinear" for s in scopes(model)
                                           for n in s.graph.node):
        return set()
    with temporary_directory("fused") as tmp:
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        optimized = onnx.load(so.optimized_model_filepath)
    return {n.output[0] for s in scopes(optimized) for n in s.graph.node if n.op_type == "DequantizeLinear"}


def _float_decode(model: ModelProto, names: set[str]) -> str:
    """Replace the DequantizeLinear producing each of ``names`` by ``Cast -> Mul`` (folded at load),
    in place: the per-axis scale gets its broadcast shape. Returns onnxruntime's version."""
    import onnxruntime as ort

    fresh = Names(model)
    for scope in scopes(model):
        graph = scope.graph
        tensors = {t.name: t for t in graph.initializer}
        tensors.update({n.output[0]: n.attribute[0].t for n in graph.node if n.op_type == "Constant"})
        targets = [i for i, n in enumerate(graph.node) if n.op_type == "DequantizeLinear" and n.output[0] in names]
        for i in reversed(targets):  # back to front: inserting keeps the earlier indices valid
            node = graph.node[i]
            codes, scale = (tensors[name] for name in node.input[:2])
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            if scale.dims:
                shape = [1] * len(codes.dims)
                shape[axis % len(codes.dims)] = scale.dims[0]
                del scale.dims[:]
                scale.dims.extend(shape)
            target = node.output[0]
            cast = helper.make_node("Cast", [node.input[0]], [fresh.fresh(f"{target}_cast")], to=TensorProto.FLOAT,
                                    name=fresh.fresh(f"{target}_Cast"))
            mul = helper.make_node("Mul", [cast.output[0], node.input[1]], [target], name=fresh.fresh(f"{target}_Mul"))
            graph.node[i].CopyFrom(mul)
            graph.node.insert(i, cast)
    return str(ort.__version__)
