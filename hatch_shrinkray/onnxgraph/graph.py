"""Finding weights in a model: initializers and ``Constant`` nodes at every subgraph depth,
who consumes them, and fresh names that collide with nothing anywhere in the model.

A *site* is one place a weight is defined. Sites are scoped: two branches of an ``If`` may each
define a tensor called ``W`` and those are different tensors, never merged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, helper, numpy_helper

FLOAT_TYPES: dict[int, str] = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16",
                               TensorProto.DOUBLE: "float64", TensorProto.BFLOAT16: "bfloat16"}


@dataclass(eq=False)
class Scope:
    """One graph: the main graph or a subgraph attribute of a node."""

    graph: GraphProto
    path: str
    parent: Scope | None
    owner: NodeProto | None = None
    children: list[Scope] = field(default_factory=list)

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    def ancestors(self) -> list[Scope]:
        """This scope and its parents, innermost first."""
        out: list[Scope] = []
        s: Scope | None = self
        while s is not None:
            out.append(s)
            s = s.parent
        return out

    @cached_property
    def defines(self) -> set[str]:
        """Names this graph itself defines (which shadow outer-scope names)."""
        names = {i.name for i in self.graph.initializer} | {i.name for i in self.graph.input}
        names |= {i.values.name for i in self.graph.sparse_initializer if i.values.name}
        for node in self.graph.node:
            names.update(o for o in node.output if o)
        return names


@dataclass(eq=False)
class Site:
    """One weight definition: an initializer or a Constant node's ``value`` tensor."""

    scope: Scope
    name: str
    location: str  # "initializer" | "constant"
    tensor: TensorProto
    node: NodeProto | None = None
    consumers: list[tuple[NodeProto, int]] = field(default_factory=list)

    @property
    def dtype(self) -> int:
        return int(self.tensor.data_type)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.tensor.dims)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        """Bytes of the decoded values (0 for a type numpy has no item size for)."""
        try:
            return self.size * int(np.dtype(helper.tensor_dtype_to_np_dtype(self.dtype)).itemsize)
        except (KeyError, TypeError, ValueError):
            return 0

    def array(self) -> npt.NDArray[np.generic]:
        try:
            return numpy_helper.to_array(self.tensor)
        except (ValueError, TypeError) as exc:  # data length does not match dims, unknown type
            from hatch_shrinkray.errors import ShrinkrayError

            raise ShrinkrayError(f"tensor {self.name!r} is corrupt: {exc}",
                                 hint="re-export or re-download the model") from exc


def subgraph_attrs(node: NodeProto) -> Iterator[tuple[str, GraphProto]]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == AttributeProto.GRAPHS:
            for i, g in enumerate(attr.graphs):
                yield f"{attr.name}[{i}]", g


def scopes(model: ModelProto) -> list[Scope]:
    """All graphs, parents before children (depth-first in node order)."""
    root = Scope(model.graph, "main", None)
    out = [root]

    def visit(scope: Scope) -> None:
        for idx, node in enumerate(scope.graph.node):
            for attr_name, g in subgraph_attrs(node):
                label = node.name or f"#{idx}"
                child = Scope(g, f"{scope.path}/{node.op_type} {label}/{attr_name}", scope, node)
                scope.children.append(child)
                out.append(child)
                visit(child)

    visit(root)
    return out


def constant_value(node: NodeProto) -> TensorProto | None:
    """The tensor of a ``Constant`` node's ``value`` attribute; other attribute forms are left alone."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
        return None
    for attr in node.attribute:
        if attr.name == "value" and attr.type == AttributeProto.TENSOR:
            tensor: TensorProto = attr.t
            return tensor
    return None


def find_sites(model: ModelProto) -> list[Site]:
    """Every weight definition in the model with its consumers (outer-scope uses included)."""
    all_scopes = scopes(model)
    sites: list[Site] = []
    for scope in all_scopes:
        inputs = {i.name for i in scope.graph.input}
        for init in scope.graph.initializer:
            # An initializer that is also a graph input is an overridable default: part of the
            # model's interface, so it is never rewritten.
            if init.name not in inputs:
                sites.append(Site(scope, init.name, "initializer", init))
        for node in scope.graph.node:
            t = constant_value(node)
            if t is not None:
                sites.append(Site(scope, node.output[0], "constant", t, node))
    uses: Uses = {}
    for scope in all_scopes:
        _collect_uses(scope, uses)
    for site in sites:
        site.consumers = _through_identity(uses.get((id(site.scope), site.name), []), uses)
    return sites


Uses = dict[tuple[int, str], list[tuple[NodeProto, int, Scope]]]


def _through_identity(direct: list[tuple[NodeProto, int, Scope]], uses: Uses) -> list[tuple[NodeProto, int]]:
    """Consumers, looking through Identity nodes (dedup leaves those in front of shared weights)."""
    out: list[tuple[NodeProto, int]] = []
    for node, i, scope in direct:
        onward = uses.get((id(scope), node.output[0]), []) if node.op_type == "Identity" else []
        out.extend(_through_identity(onward, uses) if onward else [(node, i)])
    return out


def _collect_uses(scope: Scope, uses: Uses) -> None:
    """Record each node input of ``scope`` under the (defining scope, name) it refers to."""
    owners: dict[str, Scope | None] = {}
    for node in scope.graph.node:
        for i, name in enumerate(node.input):
            if not name:
                continue
            if name not in owners:
                owners[name] = next((s for s in scope.ancestors() if name in s.defines), None)
            owner = owners[name]
            if owner is not None:
                uses.setdefault((id(owner), name), []).append((node, i, scope))


MAX_BASE = 96


class Names:
    """Fresh names unique across the whole model, subgraphs included."""

    def __init__(self, model: ModelProto) -> None:
        self.used: set[str] = set()
        for scope in scopes(model):
            g = scope.graph
            self.used.update(i.name for i in g.initializer)
            self.used.update(i.values.name for i in g.sparse_initializer)
            self.used.update(i.name for i in g.input)
            self.used.update(o.name for o in g.output)
            self.used.update(v.name for v in g.value_info)
            for node in g.node:
                self.used.update(node.input)
                self.used.update(node.output)
                if node.name:
                    self.used.add(node.name)

    def fresh(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ... A long base (derived from a long weight name)
        is cut to its first ``MAX_BASE`` characters plus a digest of the rest, so derived names
        never repeat a name of any length."""
        if len(base) > MAX_BASE:
            base = base[:MAX_BASE - 17] + "~" + hashlib.sha256(base.encode()).hexdigest()[:16]
        candidate = base
        n = 1
        while candidate in self.used:
            candidate = f"{base}_{n}"
            n += 1
        self.used.add(candidate)
        return candidate


def attribute(node: NodeProto, name: str, default: Any) -> Any:
    """``node``'s attribute ``name`` as a Python value, ``default`` where it is not set."""
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def opset_version(model: ModelProto) -> int:
    return next((int(imp.version) for imp in model.opset_import if imp.domain in ("", "ai.onnx")), 1)


QUANTIZED_OPS = {"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                 "ConvInteger", "QLinearConv", "QLinearMatMul", "MatMulNBits", "GatherBlockQuantized",
                 "DynamicQuantizeMatMul", "DynamicQuantizeLSTM", "QGemm", "MatMulIntegerToFloat"}
INT_CODES = {TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
             TensorProto.UINT16, TensorProto.INT4, TensorProto.UINT4}
CODES_MIN = 1024


def quantization_signs(model: ModelProto) -> str | None:
    """Why ``model`` looks already quantized (QDQ/integer ops, or a Cast of integer weight codes)."""
    nodes = [node for scope in scopes(model) for node in scope.graph.node]
    quantized = next((n.op_type for n in nodes if n.op_type in QUANTIZED_OPS), None)
    if quantized is not None:
        return f"it contains {quantized} nodes"
    codes = {s.name for s in find_sites(model) if s.dtype in INT_CODES and s.size >= CODES_MIN}
    cast = next((n.input[0] for n in nodes if n.op_type == "Cast" and n.input and n.input[0] in codes), None)
    return None if cast is None else f"integer weight codes are cast to float ({cast})"
