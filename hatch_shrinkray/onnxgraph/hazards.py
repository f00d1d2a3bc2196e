"""Graph patterns a runtime users have is known to compute wrongly: none may be emitted.

onnxruntime's QDQ propagation (``ORT_ENABLE_ALL``) moves a ``DequantizeLinear`` past the
data-movement op it feeds (Reshape, Transpose, Squeeze, Unsqueeze, Flatten) by wrapping that op in
a new Quantize/Dequantize pair whose type defaults to uint8: every negative int8 weight behind it
then becomes zero, while ``ORT_DISABLE_ALL`` computes it right (docs/runtimes.md names the reports).
Verification, which runs at one level, would see it in the build's onnxruntime only, and a user's
runtime may be another release; the engine therefore refuses to write any graph holding the pattern
(``engine``), whichever encoding put it there.
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.onnxgraph.graph import scopes

MOVES = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})
"""Ops QDQ propagation moves a DequantizeLinear across."""
PASSES = frozenset({"Identity"})
"""Ops the optimizer removes first, so the pattern reaches through them."""


def miscompiled(model: ModelProto) -> tuple[NodeProto, NodeProto] | None:
    """A ``DequantizeLinear`` of ``model`` and the data-movement node it feeds (through Identity
    nodes): a pattern a runtime miscompiles; None when there is none."""
    nodes = [node for scope in scopes(model) for node in scope.graph.node]
    consumers: dict[str, list[NodeProto]] = {}  # over every graph: a branch may read its parent's names
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in nodes:
        if node.op_type != "DequantizeLinear":
            continue
        pending, seen = list(node.output[:1]), set()
        while pending:
            for consumer in consumers.get(pending.pop(), []):
                if consumer.op_type in MOVES:
                    return node, consumer
                if consumer.op_type in PASSES and consumer.output[0] not in seen:
                    seen.add(consumer.output[0])
                    pending.append(consumer.output[0])
    return None


def refuse_miscompiled(model: ModelProto, label: str) -> None:
    """ShrinkrayError, before anything is written, where ``model`` holds such a pattern: a defect
    of the encoding that put it there, never something to ship."""
    found = miscompiled(model)
    if found is not None:
        raise ShrinkrayError(f"shrunk graph has DequantizeLinear -> {found[1].op_type} (onnxruntime miscompiles "
                             "it); nothing written", path=label, hint="a bug: report it")
