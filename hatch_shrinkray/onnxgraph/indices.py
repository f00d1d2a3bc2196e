"""Integer inputs that index a table: an input that reaches the indices of a ``Gather`` on a constant
table (an embedding of R rows), directly or through ops that only change its type or shape.

Generated inputs draw integers from ``int-range``; an index past the table's rows makes onnxruntime
refuse the call (``indices element out of data bounds``), so a character-level model with a 49-row
embedding did not run on generated inputs at all. Knowing the rows, generated indices stay inside.
"""

from __future__ import annotations

from collections import defaultdict

from onnx import ModelProto, NodeProto, TensorProto

from hatch_shrinkray.onnxgraph.graph import constant_value

PASS_THROUGH = frozenset({"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand", "Transpose"})
"""Ops whose output holds the same integers as their first input (only their type or layout changes)."""
INTEGER_TYPES = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                           TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64})


def table_rows(model: ModelProto) -> dict[str, int]:
    """Per integer graph input that indexes constant tables only through ``PASS_THROUGH`` ops: the
    fewest rows of those tables. Inputs that reach anything else (arithmetic, a comparison) are left
    out: their values may mean something other than a row."""
    graph = model.graph
    shapes: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in graph.initializer}
    for node in graph.node:
        value = constant_value(node) if node.op_type == "Constant" else None
        if value is not None:
            shapes[node.output[0]] = tuple(value.dims)
    consumers: dict[str, list[NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    rows: dict[str, int] = {}
    for value_info in graph.input:
        if value_info.name in shapes or value_info.type.tensor_type.elem_type not in INTEGER_TYPES:
            continue
        found = _rows(value_info.name, consumers, shapes, set())
        if found:
            rows[value_info.name] = found
    return rows


def _rows(name: str, consumers: dict[str, list[NodeProto]], shapes: dict[str, tuple[int, ...]],
          seen: set[str]) -> int | None:
    """The fewest rows of the tables ``name`` indexes (None: it reaches something else, or nothing)."""
    if name in seen:
        return None
    seen.add(name)
    users = consumers.get(name, [])
    if not users:
        return None
    fewest: int | None = None
    for node in users:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == name and node.input[0] != name:
            table = shapes.get(node.input[0])
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            if table is None or not -len(table) <= axis < len(table) or table[axis] <= 0:
                return None
            found: int | None = table[axis]
        elif node.op_type in PASS_THROUGH and node.input[0] == name:
            found = _rows(node.output[0], consumers, shapes, seen)
        else:
            return None
        if found is None:
            return None
        fewest = found if fewest is None else min(fewest, found)
    return fewest
