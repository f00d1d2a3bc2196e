"""The interface every per-tensor encoding implements, and the pieces the graph layer rewrites with.

An encoding (int8, fp16, float-levels, ...) only writes ``encode``: a weight array in, a ``Decode``
out, i.e. the tensors to store plus the nodes that rebuild the weight under its original name. An
encoding that onnxruntime reads packed (``MatMulNBits``, ``GatherBlockQuantized``) instead names
the consumer its nodes replace (``Decode.replaces``): the weight is then never rebuilt, in the file
or in memory. The whole-model interface of a method is ``methods.base``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from onnx import NodeProto, helper

from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.samples import Calibration, Feed

__all__ = ["Calibration", "Decode", "DecodeNode", "EncodeContext", "Feed", "TensorEncoder"]


@dataclass(frozen=True)
class DecodeNode:
    """One node of a decode chain. Inputs name stored tensors by role, earlier nodes as ``@k``, and
    (in a chain that replaces a consumer) the consumer's k-th input as ``$k``."""

    op: str
    inputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""


@dataclass(frozen=True)
class Decode:
    """Tensors to store and nodes that rebuild the weight. No nodes: the one stored tensor *is* it."""

    stored: dict[str, npt.NDArray[Any]]
    nodes: tuple[DecodeNode, ...]
    decoded: npt.NDArray[Any]
    label: str
    replaces: str = ""
    """The consumer op (``MatMul``, ``Gemm``, ``Gather``) whose nodes this chain replaces, its last
    node giving each consumer's output from the consumer's other inputs (``$k``) and the stored
    tensors, which onnxruntime's kernel reads as they are: nothing is folded at load, and the weight
    stays packed in memory. Empty: the chain rebuilds the weight under its name."""

    @property
    def stored_bytes(self) -> int:
        return sum(int(a.nbytes) for a in self.stored.values())

    @property
    def folded_bytes(self) -> int:
        """Bytes of every intermediate onnxruntime allocates when it folds the chain at load; it
        keeps them all until folding ends, so this is the chain's load cost (time and memory).
        A DequantizeLinear is never folded (fused or run per inference): it costs nothing here, as
        a chain that replaces its consumer does not."""
        if self.replaces:
            return 0
        shapes: list[tuple[tuple[int, ...], int]] = []

        def info(ref: str) -> tuple[tuple[int, ...], int]:
            if ref.startswith("@"):
                return shapes[int(ref[1:])]
            a = self.stored[ref]
            return tuple(a.shape), int(a.itemsize)

        total = 0
        for node in self.nodes:
            ins = [info(i) for i in node.inputs]
            size = ins[0][1]
            if node.op == "Concat":
                axis = int(node.attrs.get("axis", 0)) % len(ins[0][0])
                shape = (*ins[0][0][:axis], sum(s[axis] for s, _ in ins), *ins[0][0][axis + 1:])
            elif node.op == "Reshape":
                shape = tuple(int(v) for v in self.stored[node.inputs[1]])
            elif node.op == "Slice":  # the only Slice of a chain cuts the flat padding: ends - starts
                shape = (int(self.stored[node.inputs[2]][0]) - int(self.stored[node.inputs[1]][0]),)
            else:
                shape = np.broadcast_shapes(*(s for s, _ in ins))
            if node.op == "Cast":
                size = int(np.dtype(helper.tensor_dtype_to_np_dtype(node.attrs["to"])).itemsize)
            elif node.op == "Where":
                size = ins[1][1]
            elif node.op == "Equal":
                size = 1
            shapes.append((shape, size))
            if node.op != "DequantizeLinear":
                total += int(np.prod(shape, dtype=np.int64)) * size
        return total


@dataclass(frozen=True)
class EncodeContext:
    """What an encoder may need to know about the weight beyond its values."""

    options: ShrinkOptions
    opset: int
    consumers: tuple[NodeProto, ...]
    axis: int | None
    axis_note: str


class TensorEncoder(Protocol):
    """A per-tensor encoding; raises ``quant.NotEncodable`` to keep a tensor as it is."""

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode: ...
