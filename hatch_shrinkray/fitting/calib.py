"""Second moments of the activations that multiply a weight (``H = sum x x^T``), from calibration runs.

With ``H`` the output error a weight change ``dW`` causes on the calibration inputs is, per output
channel ``r``, ``dW[r] H dW[r]^T``: that is what the rounding in ``gptq`` minimises instead of the
weight error. Supported readers: ``MatMul`` (2-D weight as input 1), ``Gemm`` (input 1, any
``transA``/``transB``) and 1-D/2-D ``Conv`` with explicit pads, strides, dilations and groups
(the activations are unfolded into patches the way the weight is flattened).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import NodeProto

from hatch_shrinkray.onnxgraph.graph import attribute

MAX_ROWS = 2048
"""Patches per sample at most; evenly thinned above this (big early feature maps)."""
ROWS_PER_FEATURE = 16
"""Rows wanted per input feature over all calibration samples (``rows_per_sample``): enough for a
well-conditioned ``H``; beyond it, more rows of the same images cost Gram products and move no
rounding."""
MIN_ROWS = 64


@dataclass
class Layout:
    """How a weight reads as ``[rows, K]`` (output channels x input features) and which
    activation feeds it; ``groups`` > 1 for grouped convolutions (rows split evenly)."""

    node: NodeProto
    activation: str
    groups: int
    transpose: bool
    """MatMul ``[K, N]`` and Gemm ``transB=0`` weights are stored transposed to ``[rows, K]``."""


def layout(node: NodeProto, index: int, shape: tuple[int, ...]) -> Layout | None:
    """The reading of input ``index`` of ``node``, or None when it is not a supported weight."""
    if node.domain not in ("", "ai.onnx") or index != 1 or not node.input[0]:
        return None
    op = node.op_type
    if op == "MatMul" and len(shape) == 2:
        return Layout(node, node.input[0], 1, True)
    if op == "Gemm" and len(shape) == 2:
        return Layout(node, node.input[0], 1, not attribute(node, "transB", 0))
    if op == "Conv" and len(shape) in (3, 4) and attribute(node, "auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET"):
        return Layout(node, node.input[0], int(attribute(node, "group", 1)), False)
    return None


def as_rows(w: npt.NDArray[Any], lay: Layout) -> npt.NDArray[Any]:
    """The weight as ``[rows, K]``."""
    return np.ascontiguousarray(w.T) if lay.transpose else w.reshape(w.shape[0], -1)


def from_rows(rows: npt.NDArray[Any], lay: Layout, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    return np.ascontiguousarray(rows.T) if lay.transpose else rows.reshape(shape)


FEW_ROWS = 8
"""Adds of fewer rows than this are stacked (up to ``STACKED_ROWS``) before their Gram product: an
unrolled recurrent cell's Gemm gives one row per time step and call, and a rank-one product per row
writes a whole ``K x K`` float64 matrix each time, which for a wide LSTM input weight dominates
the build. Adds of more rows keep their own product, so the sums, and the codes
fitted to them, are those of a product per add wherever no add is that small."""
STACKED_ROWS = 256


@dataclass
class Moments:
    """Accumulated ``[groups, K/groups... ]`` second moments and the number of rows seen (call
    ``flush`` before reading ``h``)."""

    h: npt.NDArray[np.float64] | None = None
    count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    stacked: list[npt.NDArray[np.float32]] = field(default_factory=list)
    """Adds of fewer than ``FEW_ROWS`` rows not yet in ``h``."""

    def add(self, patches: npt.NDArray[Any]) -> None:
        """``patches``: ``[n, groups, Kg]``."""
        p = np.asarray(patches, dtype=np.float32)  # float32 products, float64 sums across samples
        if p.shape[0] >= FEW_ROWS:
            self._gram(p)
            return
        self.stacked.append(p)
        if sum(x.shape[0] for x in self.stacked) >= STACKED_ROWS:
            self.flush()

    def flush(self) -> None:
        """Add the stacked rows' product to ``h``."""
        if self.stacked:
            p = np.concatenate(self.stacked)
            self.stacked = []
            self._gram(p)

    def _gram(self, p: npt.NDArray[np.float32]) -> None:
        if p.shape[1] == 1:
            rows = p[:, 0, :]
            h = (rows.T @ rows)[None]  # one Gram matrix: numpy hands A^T A to BLAS syrk (half the work)
        else:
            h = np.matmul(p.transpose(1, 2, 0), p.transpose(1, 0, 2))
        if self.h is None:
            self.h = h.astype(np.float64)
        else:
            self.h += h  # in place: a large K x K sum allocated anew per add cost as much as the product
        self.count += int(p.shape[0])


def rows_per_sample(lay: Layout, shape: tuple[int, ...], samples: int) -> int:
    """How many activation rows to keep per sample: ``ROWS_PER_FEATURE`` per input feature over all
    ``samples``, within ``[MIN_ROWS, MAX_ROWS]``."""
    features = shape[0] if lay.transpose else int(np.prod(shape[1:]))
    return int(min(MAX_ROWS, max(MIN_ROWS, -(-ROWS_PER_FEATURE * features // max(samples, 1)))))


def patches(x: npt.NDArray[Any], lay: Layout, shape: tuple[int, ...],
            max_rows: int = MAX_ROWS) -> npt.NDArray[Any] | None:
    """Activation rows ``[n, groups, Kg]`` (at most ``max_rows``, evenly spread) in the order the
    weight's ``[rows, K]`` columns use."""
    op = lay.node.op_type
    if op == "MatMul":
        k = shape[0]
        return None if x.shape[-1] != k else _thin(x.reshape(-1, 1, k), max_rows)
    if op == "Gemm":
        a = x.T if attribute(lay.node, "transA", 0) else x
        return _thin(a.reshape(-1, 1, a.shape[-1]), max_rows)
    return _conv_patches(x, lay, shape, max_rows)


def _thin(rows: npt.NDArray[Any], max_rows: int) -> npt.NDArray[Any]:
    if rows.shape[0] <= max_rows:
        return rows
    idx = np.linspace(0, rows.shape[0] - 1, max_rows).round().astype(np.int64)
    out: npt.NDArray[Any] = rows[idx]
    return out


def _conv_patches(x: npt.NDArray[Any], lay: Layout, shape: tuple[int, ...],
                  max_rows: int) -> npt.NDArray[Any] | None:
    node = lay.node
    spatial = len(shape) - 2
    if x.ndim != spatial + 2:
        return None
    if spatial == 1:
        x = x[:, :, None, :]
        shape = (shape[0], shape[1], 1, shape[2])
    kh, kw = shape[2], shape[3]
    pads = list(attribute(node, "pads", [0] * (2 * spatial)))
    strides = list(attribute(node, "strides", [1] * spatial))
    dil = list(attribute(node, "dilations", [1] * spatial))
    if spatial == 1:
        pads = [0, pads[0], 0, pads[1]]
        strides = [1, strides[0]]
        dil = [1, dil[0]]
    g = lay.groups
    n, c = x.shape[0], x.shape[1]
    if c % g or c // g != shape[1]:
        return None
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))) if any(pads) else x
    eh, ew = (kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1
    if xp.shape[2] < eh or xp.shape[3] < ew:
        return None
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    win = win[:, :, :: strides[0], :: strides[1], :: dil[0], :: dil[1]]  # [n, c, oh, ow, kh, kw]
    oh, ow = win.shape[2], win.shape[3]
    rows = n * oh * ow
    if rows > max_rows:  # pick the rows from the window view, without unfolding every one first
        sample, rest = np.divmod(np.linspace(0, rows - 1, max_rows).round().astype(np.int64), oh * ow)
        sel = win[sample, :, rest // ow, rest % ow]  # [max_rows, c, kh, kw]
    else:
        sel = win.transpose(0, 2, 3, 1, 4, 5).reshape(rows, c, kh, kw)
    return np.ascontiguousarray(sel.reshape(sel.shape[0], g, (c // g) * kh * kw))
