"""``dynamic``: onnxruntime's own ``quantize_dynamic`` (int8 weights *and* activations).

Faster on MatMul-heavy models but the computation is no longer float, so accuracy may drop
(far, on speech models: docs/methods.md): verification decides whether it ships.

The quantizer derives the names of the nodes and tensors it adds from existing names
(``x`` -> ``x_quantized``, node ``fc`` -> ``fc_quant``) without checking that they are free, and
finds its own nodes again by those names: a model that already uses one of them (a Relu named
``x_QuantizeLinear``, a tensor named ``x_quantized``) came out broken or crashed it ("Graph is
not a DAG", an IndexError, a non-SSA graph). So it gets a copy in which every name except the
model's inputs and outputs is replaced by one in a namespace of our own, and the names are
mapped back afterwards; the names it adds are made readable and unique the same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto

from hatch_shrinkray.errors import ShrinkrayError, one_line
from hatch_shrinkray.files import temporary_directory
from hatch_shrinkray.methods.base import NarrowerDataFree
from hatch_shrinkray.onnxgraph.encoding import Calibration
from hatch_shrinkray.onnxgraph.graph import FLOAT_TYPES, Names, Site, find_sites, scopes
from hatch_shrinkray.onnxgraph.rewrite import record, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord


class Dynamic(NarrowerDataFree):
    name = "dynamic"

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        sites = [s for s in find_sites(model) if s.dtype in FLOAT_TYPES and s.size >= options.min_elements]
        reasons = [skip_reason(s, options) or _non_finite(s) for s in sites]
        excluded = [s for s, reason in zip(sites, reasons, strict=True) if reason is not None]
        token = _free_token(model)
        back = _neutralize(model, token)
        exclude_nodes = sorted({n.name for s in excluded for n, _ in s.consumers})
        quiet = logging.getLogger()  # the quantizer warns about pre-processing on the root logger
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        with temporary_directory("dynamic") as tmp:
            out = Path(tmp) / "dynamic.onnx"
            try:
                quantize_dynamic(model, out, weight_type=QuantType.QInt8, per_channel=True,
                                 nodes_to_exclude=exclude_nodes)
                result = onnx.load(str(out))
            except Exception as exc:  # onnxruntime raises bare Exceptions for unsupported graphs
                said = _ours(token).sub(lambda m: back.get(m.group(0)) or m.group(0), one_line(exc))
                raise ShrinkrayError(f"onnxruntime's quantize_dynamic failed: {said}",
                                     hint="use method int8, which keeps computation in float") from exc
            finally:
                quiet.setLevel(level)
        _restore(result, token, back)
        remaining = {t.name for t in result.graph.initializer}
        records = [record(site, "dynamic int8 (onnxruntime)", stored=site.size)
                   if reason is None and site.location == "initializer" and site.name not in remaining
                   else record(site, "kept", reason or "not quantized by quantize_dynamic")
                   for site, reason in zip(sites, reasons, strict=True)]
        model.CopyFrom(result)
        return records


def _non_finite(site: Site) -> str | None:
    """The quantizer fails on a NaN or inf weight ("scale issue"); such a weight stays float."""
    return None if np.isfinite(site.array()).all() else "holds NaN or inf, which quantize_dynamic cannot scale"


def _free_token(model: ModelProto) -> str:
    """A prefix that occurs in no name of the model, so every name carrying it is ours."""
    names: list[str] = []

    def collect(name: str) -> str:
        names.append(name)
        return name

    _rename(model, collect, lambda node: collect(node.name))
    text = "\0".join(names)
    n = 0
    while f"~sr{n}~" in text:
        n += 1
    return f"~sr{n}~"


def _neutralize(model: ModelProto, token: str) -> dict[str, str]:
    """Give every node and every tensor but the model's inputs and outputs a name of our own
    (``token`` + a number), in place; returns our names mapped to the originals."""
    interface = {v.name for v in model.graph.input} | {v.name for v in model.graph.output}
    back: dict[str, str] = {}
    tensors: dict[str, str] = {}

    def tensor(name: str) -> str:
        if name in interface:
            return name
        if name not in tensors:
            tensors[name] = f"{token}{len(tensors)}"
            back[tensors[name]] = name
        return tensors[name]

    def node(n: onnx.NodeProto) -> str:
        neutral = f"{token}n{len(back)}"
        back[neutral] = n.name
        return neutral

    _rename(model, tensor, node)
    return back


def _restore(model: ModelProto, token: str, back: dict[str, str]) -> None:
    """Map our names back. A name the quantizer added gets its readable form (our names inside
    it replaced by the originals), made unique against everything else in the model."""
    ours = _ours(token)
    interface = {v.name for v in (*model.graph.input, *model.graph.output)}
    names = Names(ModelProto())
    names.used.update(name for name in back.values() if name)
    names.used.update(interface)
    added: dict[str, str] = {}

    def original(name: str) -> str:
        if not name or name in back:
            return back.get(name, name)
        if name in interface:
            return name
        if name not in added:
            added[name] = names.fresh(ours.sub(lambda m: back.get(m.group(0), ""), name))
        return added[name]

    _rename(model, original, lambda n: original(n.name))


def _ours(token: str) -> re.Pattern[str]:
    """Our names, in a name the quantizer made or in a message it raised."""
    return re.compile(re.escape(token) + r"n?\d+")


def _rename(model: ModelProto, tensor: Callable[[str], str], node: Callable[[onnx.NodeProto], str]) -> None:
    """Rename every tensor (with ``tensor``) and every node (with ``node``) in every graph."""
    for scope in scopes(model):
        g = scope.graph
        for values in (g.input, g.output, g.value_info, g.initializer):
            for item in values:
                item.name = tensor(item.name)
        for sparse in g.sparse_initializer:
            sparse.values.name = tensor(sparse.values.name)
        for n in g.node:
            n.input[:] = [tensor(i) if i else i for i in n.input]
            n.output[:] = [tensor(o) if o else o for o in n.output]
            n.name = node(n)
