"""The interface every encoding method implements, and the pieces per-tensor methods share.

A method turns a model into a smaller one and reports per tensor what it did. Per-tensor methods
(int8, fp16, float-levels) only write ``encode``: a weight array in, a ``Decode`` out, i.e. the
tensors to store plus the nodes that rebuild the weight under its original name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from onnx import ModelProto, NodeProto, helper

from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord
from hatch_shrinkray.samples import Calibration, Feed

__all__ = ["Calibration", "DataFree", "Decode", "DecodeNode", "EncodeContext", "Feed", "Method", "TensorEncoder"]


@dataclass(frozen=True)
class DecodeNode:
    """One node of a decode chain. Inputs name stored tensors by role or earlier nodes as ``@k``."""

    op: str
    inputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decode:
    """Tensors to store and nodes that rebuild the weight. No nodes: the one stored tensor *is* it."""

    stored: dict[str, npt.NDArray[Any]]
    nodes: tuple[DecodeNode, ...]
    decoded: npt.NDArray[Any]
    label: str

    @property
    def stored_bytes(self) -> int:
        return sum(int(a.nbytes) for a in self.stored.values())

    @property
    def folded_bytes(self) -> int:
        """Bytes of every intermediate onnxruntime allocates when it folds the chain at load; it
        keeps them all until folding ends, so this is the chain's load cost (time and memory).
        A DequantizeLinear is never folded (fused or run per inference): it costs nothing here."""
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


class Method(Protocol):
    """A whole-model transformation chosen by name.

    ``calibration`` holds real sample inputs for methods whose choices depend on data (``auto``,
    output-aware ``int8``); None without real inputs, or when they are too few to tell a fitted
    choice from chance (``evidence.MIN_UNITS``). ``calibrates`` says whether the method would use
    them (so the engine prepares samples only when it must)."""

    name: str

    def calibrates(self, options: ShrinkOptions) -> bool: ...

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None) -> list[TensorRecord]: ...


class DataFree:
    """Base of the methods whose output does not depend on sample inputs."""

    def calibrates(self, options: ShrinkOptions) -> bool:
        return False
