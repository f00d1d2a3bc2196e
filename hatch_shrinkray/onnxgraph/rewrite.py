"""Apply a per-tensor encoder to every eligible weight, in place, keeping each weight's name.

The decode chain's last node outputs the original tensor name, so consumers, graph outputs and
outer-scope references are untouched. Stored tensors live where the weight lived: initializers
stay initializers of the same graph; a ``Constant`` node becomes ``Constant`` nodes plus decode
nodes at the same position, which keeps the graph topologically sorted.

One exception: a table read only by ``Gather`` (embeddings) whose chain works row by row is not
rebuilt at all: each Gather takes the rows of the stored tensors and the chain decodes just those
rows on every inference (a few hundred values). The values are the same, and loading costs nothing
(folding a large vocabulary table would dominate a sentence encoder's session creation).

A chain that replaces its consumers (``Decode.replaces``: ``MatMulNBits``, ``GatherBlockQuantized``)
takes the place of each consumer node instead; the weight's definition goes, and its stored
tensors become initializers of its graph (``consumers_replaceable`` says where that is allowed).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.numerics.quant import NotEncodable, error_stats
from hatch_shrinkray.onnxgraph.axes import choose_axis, lowest_error_axis
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext, TensorEncoder
from hatch_shrinkray.onnxgraph.graph import FLOAT_TYPES, Names, Site, find_sites, opset_version
from hatch_shrinkray.options import ShrinkOptions, chosen_encoding
from hatch_shrinkray.result import TensorRecord

SUPPORTED = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE}


def record(site: Site, encoding: str, note: str = "", stored: int | None = None,
           errors: tuple[float, float] = (0.0, 0.0)) -> TensorRecord:
    nbytes = site.nbytes
    return TensorRecord(
        name=site.name, scope=site.scope.path, location=site.location, shape=site.shape,
        dtype=FLOAT_TYPES.get(site.dtype, str(site.dtype)), original_bytes=nbytes,
        stored_bytes=nbytes if stored is None else stored, encoding=encoding, note=note,
        max_abs_error=errors[0], rel_rms_error=errors[1])


def skip_reason(site: Site, options: ShrinkOptions) -> str | None:
    """Why a site is not a candidate, or None when it is."""
    if site.dtype not in FLOAT_TYPES:
        return "not a float tensor"
    if site.size < options.min_elements:
        return f"below min-elements ({site.size} < {options.min_elements})"
    if site.dtype not in SUPPORTED:
        return f"{FLOAT_TYPES[site.dtype]} weights are left alone"
    for pattern in options.exclude_tensors:
        if fnmatch.fnmatchcase(site.name, pattern):
            return f"excluded by exclude-tensors pattern {pattern!r}"
    hit = sorted({n.op_type for n, _ in site.consumers} & set(options.exclude_ops))
    if hit:
        return f"excluded by exclude-ops ({', '.join(hit)})"
    if not site.consumers and not _is_output(site):
        return "unused"
    chosen = planned_encoding(site, options)
    if chosen is not None:
        return "kept float32 (encodings)" if chosen == "float32" else f"set to {chosen} by the plan or `encodings`"
    return None


def planned_encoding(site: Site, options: ShrinkOptions) -> str | None:
    """The encoding the plan or ``encodings`` gives this site, or None (the method decides)."""
    if not options.plan and not options.encodings:
        return None
    try:
        return chosen_encoding(site.scope.path, site.name, options)
    except ValueError as exc:
        raise ShrinkrayError(str(exc), hint="make the `encodings` patterns agree, or name the tensor exactly") from exc


def _is_output(site: Site) -> bool:
    return any(o.name == site.name for o in site.scope.graph.output)


def encode_context(site: Site, w: npt.NDArray[np.floating], options: ShrinkOptions, opset: int) -> EncodeContext:
    """What an encoder gets for ``site``: the channel axis its consumers name, else the axis whose
    per-channel scales reconstruct ``w`` best."""
    axis, how = choose_axis(site.consumers, site.shape)
    if axis is None:
        axis, how = lowest_error_axis(w, how)
    return EncodeContext(options, opset, tuple(n for n, _ in site.consumers), axis, how)


def encode_weights(model: ModelProto, encoder: TensorEncoder, options: ShrinkOptions,
                   select: Callable[[Site], bool] | None = None) -> list[TensorRecord]:
    """Encode every eligible weight of ``model`` in place; one record per float weight."""
    names = Names(model)
    opset = opset_version(model)
    records: list[TensorRecord] = []
    plans: dict[int, list[tuple[Site, Decode]]] = defaultdict(list)
    for site in find_sites(model):
        if site.dtype not in FLOAT_TYPES:
            continue
        reason = skip_reason(site, options)
        if reason is None and select is not None and not select(site):
            reason = "handled by another encoding"
        if reason is not None:
            if site.size >= options.min_elements:
                records.append(record(site, "kept", reason))
            continue
        w: npt.NDArray[np.floating] = site.array()  # type: ignore[assignment]  # float-typed site
        ctx = encode_context(site, w, options, opset)
        try:
            dec = encoder.encode(w, ctx)
        except NotEncodable as exc:
            records.append(record(site, "kept", str(exc)))
            continue
        if dec.stored_bytes >= w.nbytes and dec.nodes:
            records.append(record(site, "kept", f"{dec.label} would not be smaller"))
            continue
        note = ctx.axis_note if ("axis" in dec.label or "tensor" in dec.label) else ""
        if rows_decodable(site, dec):
            note = f"{note}; {ROWS_NOTE}".lstrip("; ")
        records.append(record(site, dec.label, note, dec.stored_bytes, error_stats(w, dec.decoded)))
        if dec.replaces and not consumers_replaceable(site, dec.replaces):
            records.append(record(site, "kept", f"{dec.label} cannot take the place of its consumers"))
            continue
        if not dec.nodes:
            # Stored in place of the weight (float-levels): written now, so the stored arrays of
            # every weight are never held at once beside the model (as much memory again).
            site.tensor.CopyFrom(_tensor(_only(dec), site.name))
        else:
            # Keep only what gets stored: the float reconstruction of every weight at once would
            # cost as much memory as the model itself.
            plans[id(site.scope)].append((site, dataclasses.replace(dec, decoded=np.empty(0, dec.decoded.dtype))))
        del w, dec
    domains: set[str] = set()
    for items in plans.values():
        _apply(items, names)
        domains.update(n.domain for _, dec in items for n in dec.nodes if n.domain)
    have = {imp.domain for imp in model.opset_import}
    model.opset_import.extend(helper.make_opsetid(d, 1) for d in sorted(domains - have))
    return records


def consumers_replaceable(site: Site, op: str) -> bool:
    """Every consumer of ``site`` is an ``op`` node of its own graph reading it directly as the weight
    (``Gather``'s table, ``MatMul``'s or ``Gemm``'s right-hand side), and the weight is no graph output:
    a chain that replaces those nodes then leaves nothing that reads the weight itself."""
    if site.location not in ("initializer", "constant") or not site.consumers or _is_output(site):
        return False
    index = 0 if op == "Gather" else 1
    own = {id(n) for n in site.scope.graph.node}
    return all(node.op_type == op and node.domain in ("", "ai.onnx") and i == index and id(node) in own
               and len(node.input) > index and node.input[index] == site.name for node, i in site.consumers)


def _apply(items: list[tuple[Site, Decode]], names: Names) -> None:
    """Rewrite one graph: constants replaced in place (back to front), then decode prologue."""
    graph = items[0][0].scope.graph
    const_index = {n.output[0]: i for i, n in enumerate(graph.node)
                   if n.op_type == "Constant" and len(n.output) == 1}
    constants = sorted((it for it in items if it[0].location == "constant"),
                       key=lambda it: const_index[it[0].name], reverse=True)
    for site, dec in constants:
        idx = const_index[site.name]
        if dec.replaces:
            stored = {role: names.fresh(f"{site.name}_{role}") for role in dec.stored}
            graph.initializer.extend(_tensor(arr, stored[role]) for role, arr in dec.stored.items())
            _replace_consumers(site, dec, stored, names)  # after the Constant: its index stays valid
            del graph.node[idx]
            continue
        if not dec.nodes:
            site.tensor.CopyFrom(_tensor(_only(dec), site.name))
            continue
        stored = {role: names.fresh(f"{site.name}_{role}") for role in dec.stored}
        new = [helper.make_node("Constant", [], [stored[role]], name=names.fresh(f"{stored[role]}_const"),
                                value=_tensor(arr, stored[role])) for role, arr in dec.stored.items()]
        new += _decode_nodes(site.name, dec, stored, names)
        graph.node[idx].CopyFrom(new[-1])
        for offset, node in enumerate(new[:-1]):
            graph.node.insert(idx + offset, node)
    prologue: list[NodeProto] = []
    drop: set[str] = set()
    for site, dec in items:
        if site.location != "initializer":
            continue
        if not dec.nodes:
            site.tensor.CopyFrom(_tensor(_only(dec), site.name))
            continue
        stored = {role: names.fresh(f"{site.name}_{role}") for role in dec.stored}
        drop.add(site.name)
        for role, arr in dec.stored.items():
            graph.initializer.append(_tensor(arr, stored[role]))
        if dec.replaces:
            _replace_consumers(site, dec, stored, names)
            continue
        if rows_decodable(site, dec):
            _decode_gathered_rows(site, dec, stored, names)
            continue
        prologue += _decode_nodes(site.name, dec, stored, names)
    if drop:
        keep = [i for i, t in enumerate(graph.initializer) if t.name not in drop]
        for i in sorted(set(range(len(graph.initializer))) - set(keep), reverse=True):
            del graph.initializer[i]
    for offset, node in enumerate(prologue):
        graph.node.insert(offset, node)


ROWS_NOTE = "decoded per inference on the gathered rows (nothing folded at load)"
ROW_OPS = {"Cast", "Mul", "Sum", "Add", "Sub", "BitShift", "Mod", "Equal", "Where"}
"""Decode ops that work element by element (with broadcasting), so they commute with Gather."""


def rows_decodable(site: Site, dec: Decode) -> bool:
    """Every consumer gathers rows (axis 0) of this initializer, directly and in its own graph, and
    every decode node works row by row on stored tensors that are per row or broadcast."""
    if site.location != "initializer" or not dec.nodes or dec.replaces or not site.consumers or _is_output(site):
        return False
    own = {id(n) for n in site.scope.graph.node}
    for node, index in site.consumers:
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if node.op_type != "Gather" or index != 0 or axis != 0 or id(node) not in own or node.input[0] != site.name:
            return False
    ndim = len(site.shape)
    for spec in dec.nodes:
        if spec.op == "Concat":
            if not -ndim < spec.attrs.get("axis", 0) < 0:  # counted from the end, never the rows
                return False
        elif spec.op not in ROW_OPS:
            return False
    return all(a.ndim == 0 or (a.ndim == ndim and a.shape[0] in (site.shape[0], 1)) for a in dec.stored.values())


def _decode_gathered_rows(site: Site, dec: Decode, stored: dict[str, str], names: Names) -> None:
    """Replace each ``Gather(weight, idx)`` by Gathers of the per-row stored tensors and the chain."""
    graph = site.scope.graph
    per_row = {role for role, a in dec.stored.items() if a.ndim and a.shape[0] == site.shape[0] != 1}
    for node, _ in site.consumers:
        idx = next(i for i, n in enumerate(graph.node) if n is node)
        target, indices = node.output[0], node.input[1]
        new: list[NodeProto] = []
        rows = dict(stored)
        for role in sorted(per_row):
            rows[role] = names.fresh(f"{stored[role]}_rows")
            new.append(helper.make_node("Gather", [stored[role], indices], [rows[role]], axis=0,
                                        name=names.fresh(f"{target}_Gather_{role}")))
        new += _decode_nodes(target, dec, rows, names)
        graph.node[idx].CopyFrom(new[-1])
        for offset, n in enumerate(new[:-1]):
            graph.node.insert(idx + offset, n)


def _replace_consumers(site: Site, dec: Decode, stored: dict[str, str], names: Names) -> None:
    """Replace each consumer node by the chain, which reads its other inputs (``$k``) and the stored
    tensors and gives its output."""
    graph = site.scope.graph
    for node, _ in site.consumers:
        idx = next(i for i, n in enumerate(graph.node) if n is node)
        target = node.output[0]
        new = _decode_nodes(target, dec, {**stored, **{f"${k}": name for k, name in enumerate(node.input)}}, names)
        graph.node[idx].CopyFrom(new[-1])
        for offset, n in enumerate(new[:-1]):
            graph.node.insert(idx + offset, n)


def _only(dec: Decode) -> np.ndarray:
    """The single stored tensor of a decode without nodes: it replaces the weight in place."""
    (arr,) = dec.stored.values()
    return arr


def _decode_nodes(target: str, dec: Decode, stored: dict[str, str], names: Names) -> list[NodeProto]:
    outputs: list[str] = []
    nodes: list[NodeProto] = []
    for k, spec in enumerate(dec.nodes):
        out = target if k == len(dec.nodes) - 1 else names.fresh(f"{target}_{spec.op.lower()}")
        ins = [outputs[int(i[1:])] if i.startswith("@") else stored[i] for i in spec.inputs]
        nodes.append(helper.make_node(spec.op, ins, [out], name=names.fresh(f"{target}_{spec.op}"),
                                      domain=spec.domain or None, **spec.attrs))
        outputs.append(out)
    return nodes


def _tensor(arr: np.ndarray, name: str) -> TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)
