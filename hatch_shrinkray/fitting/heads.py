"""Classifier heads: weights whose output channels are the classes of a model output that a package
reads as labels (``top-1``) or text (``sequence``), and which of those classes ever compete.

A text recogniser's last MatMul maps a few hundred features to one score per character, and with
a large alphabet it can hold a large share of the model's weights. On real lines only a small
fraction of the characters are ever the first or second choice at any time step; a class that never
competes changes no answer by a little more rounding error, so its channel can take far fewer int8
levels than the competing ones, for a much smaller head with the same answers. Which
classes compete is read off the fitting samples, so the do-no-harm guard's held-out units (with
their own, rarer characters) decide whether the plan ships.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import GraphProto, NodeProto, helper

from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.onnxgraph.graph import Site, attribute
from hatch_shrinkray.verification.judges import judge_for

Key = tuple[str, str]

MIN_CLASSES = 256
"""Heads with fewer classes are left alone: their rows are a small share of any model, and a
recording can show most of their classes competing anyway."""
TOP = 2
"""A class competes where it is among this many best classes at some position (row, time step)."""
MAX_COMPETING = 0.5
"""A head where more than this share of the classes competes gains little from the split."""

ORDER_KEEPING = {"Add", "Sub", "Mul", "Div", "Identity", "Softmax", "LogSoftmax", "Sigmoid", "Relu", "Cast"}
"""Ops between a head's MatMul and the model output that keep the last axis as the classes: an
element-wise op with a constant operand (a bias) or a softmax along the last axis."""
JUDGES = ("top-1", "sequence")


def competing(graph: GraphProto, sites: Sequence[Site], outputs: Sequence[str], base: Sequence[Sequence[Any]],
              judges: Sequence[str]) -> dict[Key, npt.NDArray[np.bool_]]:
    """Per head weight, a mask over its output channels: True for the classes that are among the
    ``TOP`` best at some position of the original's outputs ``base`` (per feed, per model output,
    named ``outputs``; ``judges``: the ``judges`` option per output)."""
    consumers: dict[str, list[NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant"
                                                        for o in n.output}
    index = {name: i for i, name in enumerate(outputs)}
    masks: dict[Key, npt.NDArray[np.bool_]] = {}
    for site in sites:
        axis = classes_axis(site)
        classes = 0 if axis is None else site.shape[axis]
        if classes < MIN_CLASSES:
            continue
        reached = _reaches(site.consumers[0][0].output[0], consumers, constants, set(index))
        if reached is None:
            continue
        out, chain = reached
        o = index[out]
        ref = [np.asarray(feed[o]) for feed in base]
        if not ref or any(r.ndim < 2 or r.shape[-1] != classes for r in ref):
            continue
        if any(n.op_type in ("Softmax", "LogSoftmax") and not _last_axis(n, ref[0].ndim) for n in chain):
            continue
        judge = judge_for(judges[o], ref)
        if judge is None or judge.name not in JUDGES:
            continue
        mask = np.zeros(classes, dtype=bool)
        for r in ref:
            rows = r.reshape(-1, classes)
            if rows.shape[0]:
                mask[np.argpartition(-rows, TOP - 1, axis=1)[:, :TOP].reshape(-1)] = True
        if 0 < mask.sum() <= MAX_COMPETING * classes:
            masks[site_key(site)] = mask
    return masks


def classes_axis(site: Site) -> int | None:
    """The weight axis of its consumer's output channels (MatMul's input 1: axis 1; Gemm's B: 1, or
    0 with ``transB``); None for any other use."""
    if site.scope.parent is not None or len(site.consumers) != 1 or len(site.shape) != 2:
        return None
    node, i = site.consumers[0]
    if node.op_type == "MatMul" and i == 1:
        return 1
    if node.op_type == "Gemm" and i == 1:
        return 0 if attribute(node, "transB", 0) else 1
    return None


def _reaches(start: str, consumers: dict[str, list[NodeProto]], constants: set[str],
             outputs: set[str]) -> tuple[str, list[NodeProto]] | None:
    """The model output that ``start`` flows into through order-keeping ops alone, each the only
    reader of its input, and those ops (None if it branches or meets another op)."""
    name = start
    chain: list[NodeProto] = []
    for _ in range(16):
        if name in outputs:
            return name, chain
        readers = consumers.get(name, [])
        if len(readers) != 1:
            return None
        node = readers[0]
        if node.op_type not in ORDER_KEEPING or len(node.output) != 1:
            return None
        others = [x for x in node.input if x != name]
        if any(x not in constants for x in others) or (node.op_type in ("Sub", "Div") and node.input[0] != name):
            return None
        chain.append(node)
        name = node.output[0]
    return None


def _last_axis(node: NodeProto, rank: int) -> bool:
    """A softmax along the last axis (opset 11's default axis 1 flattens the rest: last only for
    rank 2; opset 13's default is -1, which older models spell out)."""
    axis = next((int(helper.get_attribute_value(a)) for a in node.attribute if a.name == "axis"), None)
    if axis is None:
        return rank == 2  # conservative: the default depends on the opset
    return axis % rank == rank - 1
