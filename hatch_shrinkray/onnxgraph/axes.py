"""Which axis of a weight holds its output channels, as its consumer op implies.

Per-channel scales along that axis keep small channels from drowning in a large channel's range
(per-tensor, one outlier sets the step of every channel; docs/methods.md gives the figures).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from onnx import NodeProto

from hatch_shrinkray.onnxgraph.graph import attribute

RECURRENT = {"LSTM": 4, "GRU": 3, "RNN": 1}


def consumer_axis(node: NodeProto, index: int, rank: int) -> int | None:
    """The channel axis for input ``index`` of ``node``, or None when the op does not say."""
    op = node.op_type if node.domain in ("", "ai.onnx") else ""
    if rank == 0:
        return None
    if op == "Conv" and index == 1:
        return 0
    if op == "ConvTranspose" and index == 1 and rank >= 2:
        return 1
    if op == "MatMul":
        if index == 1:
            return rank - 1
        if index == 0 and rank >= 2:
            return rank - 2
    if op == "Gemm" and rank == 2:
        if index == 1:
            return 0 if attribute(node, "transB", 0) else 1
        if index == 0:
            return 1 if attribute(node, "transA", 0) else 0
    if op == "Gather" and index == 0:
        return int(attribute(node, "axis", 0)) % rank
    if op in RECURRENT and index in (1, 2) and rank == 3:
        return 1  # [directions, gates*hidden, in]: one scale per gate row
    return None


def choose_axis(consumers: Sequence[tuple[NodeProto, int]], shape: tuple[int, ...]) -> tuple[int | None, str]:
    """The axis all consumers agree on, with a word on how it was chosen.

    Disagreeing consumers (rare: a weight shared by ops that read it differently) and unknown ops
    fall back to per-tensor scales, which are valid for any reader.
    """
    rank = len(shape)
    axes = {consumer_axis(n, i, rank) for n, i in consumers}
    if len(axes) == 1:
        (axis,) = axes
        if axis is not None:
            ops = sorted({n.op_type for n, _ in consumers})
            return axis, f"axis {axis} ({'/'.join(ops)})"
    if not consumers:
        return None, "per-tensor (no consumer)"
    if len(axes) > 1 and None not in axes:
        return None, "per-tensor (consumers disagree on the channel axis)"
    ops = sorted({n.op_type for n, _ in consumers})
    return None, f"per-tensor ({'/'.join(ops)} gives no channel axis)"


MAX_SCALE_SHARE = 16  # at most one fp32 scale per 16 weights: scales stay <= 25% of int8 codes


def lowest_error_axis(w: npt.NDArray[np.floating], note: str) -> tuple[int | None, str]:
    """When no consumer names the channel axis (a weight sliced into LSTM gates, an added
    embedding), pick the axis whose per-channel int8 grid reconstructs the weight best.

    Per-tensor scales break recurrent weights: one outlying gate value far above the rest
    leaves the others with a handful of levels.
    """
    from hatch_shrinkray.numerics.quant import NotEncodable

    if w.ndim < 2:
        return None, note
    finite = np.where(np.isfinite(w), w, 0).astype(np.float32)
    best: tuple[float, int | None] = (_sq_error(finite, None), None)
    for axis, size in enumerate(w.shape):
        if 2 <= size <= w.size // MAX_SCALE_SHARE:
            try:
                err = _sq_error(finite, axis)
            except NotEncodable:
                continue
            best = min(best, (err, axis), key=lambda b: b[0])
    if best[1] is None:
        return None, note
    return best[1], f"axis {best[1]} (lowest error; {note.removeprefix('per-tensor (').rstrip(')')})"


def _sq_error(w: npt.NDArray[np.float32], axis: int | None) -> float:
    from hatch_shrinkray.numerics.quant import quantize_symmetric

    return float(np.square(quantize_symmetric(w, axis).decoded.astype(np.float64) - w).sum())
