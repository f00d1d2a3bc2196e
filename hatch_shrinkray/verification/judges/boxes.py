"""Ranked box lists (YOLO-style detectors): the answer is the set of boxes found in each image.

Two layouts carry them. *Candidates*, the raw head of a detector without NMS in its graph:
``[batch, 4 + C, N]`` (YOLOv8's export) or ``[batch, N, 4 + C]``, each of the N candidates a box
(centre x, centre y, width, height) and C class scores in [0, 1]. The package keeps the candidates
whose best class scores at least ``SCORE`` and suppresses overlaps per class (NMS at ``NMS_IOU``), so
the judge does the same. *Final* boxes, NMS done in the graph: ``[N, 6]`` or ``[batch, N, 6]`` rows
of (x1, y1, x2, y2, score, class), class and score in either order; the rows scoring at least ``SCORE``
are the boxes (an exporter pads the list with near-zero rows, some of them not even boxes).

Two images give the same answer when their boxes match one to one, same class, each pair drawn almost
the same (IoU >= ``SAME``, as a map's regions, or no corner moved by more than ``SHIFT`` pixels: a
10-pixel box one pixel off has an IoU of 0.82). Counting coordinates would call a model barely off
while a face vanished, and a relative L2 over thousands of candidates nobody keeps would refuse a
model whose boxes all stayed within a pixel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays, in_unit_range

SCORE = 0.25
"""Class score a candidate needs to be a box (ultralytics' default confidence)."""
NMS_IOU = 0.45
"""IoU above which a lower-scored candidate of the same class is suppressed."""
SAME = 0.9
"""IoU at which two matched boxes are drawn the same (as a map's regions)."""
SHIFT = 1.0
"""Largest corner move, in the output's pixels, at which two boxes are the same whatever their IoU."""
MIN_CANDIDATES = 64
"""Fewest candidates for detecting the candidates' layout from values: a detector's head has
thousands; a small ``[1, 8, 20]`` is as likely any other tensor."""
FINAL_COLUMNS = 6
"""(x1, y1, x2, y2, score, class): other layouts after NMS (a batch index first) are not read."""


@dataclass(frozen=True)
class Layout:
    final: bool
    """NMS is in the graph: rows of (x1, y1, x2, y2, score, class)."""
    channels_first: bool = False
    """Candidates as ``[batch, 4 + C, N]`` (else ``[batch, N, 4 + C]``)."""
    score: int = 4
    label: int = 5
    """Final rows: the score's and the class's column."""


@dataclass(frozen=True)
class Found:
    """One image's boxes: corners ``[k, 4]`` (x1, y1, x2, y2) and classes ``[k]``."""

    corners: npt.NDArray[np.float64]
    classes: npt.NDArray[np.int64]


def layout_of(ref: Arrays, *, forced: bool = False) -> Layout | None:
    """The box layout of an output, from the original's values (None: not a box list). Conservative:
    score columns in [0, 1], widths and heights (or x2 >= x1, y2 >= y1) not negative, coordinates in
    pixels (some above 1), and for candidates at least ``MIN_CANDIDATES`` of them. ``forced`` (the
    ``judges`` key names it): the shape alone decides."""
    arrays = [np.asarray(r) for r in ref]
    if not arrays or arrays[0].dtype.kind != "f" or not all(np.isfinite(a).all() for a in arrays):
        return None
    first = arrays[0]
    if first.ndim in (2, 3) and first.shape[-1] == FINAL_COLUMNS and all(a.ndim == first.ndim for a in arrays):
        final = _final(arrays, forced)
        if final is not None:
            return final
    if any(a.ndim != 3 for a in arrays):
        return None
    short = min(first.shape[1:])
    channels_first = first.shape[1] == short
    attributes = 1 if channels_first else 2  # the same axis in every call; the candidates' count may vary
    if short < 5 or any(a.shape[attributes] != short for a in arrays):
        return None
    if not forced and any(a.shape[3 - attributes] < max(MIN_CANDIDATES, 2 * short) for a in arrays):
        return None
    if forced:
        return Layout(False, channels_first)
    rows = [_candidates(a, channels_first) for a in arrays]
    scores_ok = all(in_unit_range(r[:, :, 4:]) for r in rows)
    sizes_ok = all(bool((r[:, :, 2:4] >= 0).all()) for r in rows)
    pixels = any(bool((r[:, :, :4] > 1.0).any()) for r in rows)
    return Layout(False, channels_first) if scores_ok and sizes_ok and pixels else None


def _final(arrays: list[npt.NDArray[Any]], forced: bool) -> Layout | None:
    rows = np.concatenate([a.reshape(-1, a.shape[-1]) for a in arrays])
    if forced and not rows.size:
        return Layout(True)
    if not rows.size:
        return None
    integral = [bool(np.array_equal(rows[:, c], np.round(rows[:, c])) and (rows[:, c] >= 0).all()) for c in (4, 5)]
    unit = [in_unit_range(rows[:, c]) for c in (4, 5)]
    if integral[1] and unit[0] and not integral[0]:
        layout = Layout(True, score=4, label=5)
    elif integral[0] and unit[1] and not integral[1]:
        layout = Layout(True, score=5, label=4)
    else:
        return Layout(True) if forced else None
    if forced:
        return layout
    live = rows[rows[:, layout.score] >= SCORE]
    ordered = bool((live[:, 2] >= live[:, 0]).all() and (live[:, 3] >= live[:, 1]).all())
    return layout if ordered and bool((live[:, :4] > 1.0).any()) else None


def _candidates(a: npt.NDArray[Any], channels_first: bool) -> npt.NDArray[np.float64]:
    """``[batch, N, 4 + C]`` in float64."""
    x = np.asarray(a, dtype=np.float64)
    x = x.reshape((1, *x.shape)) if x.ndim == 2 else x
    return x.transpose(0, 2, 1) if channels_first else x


def iou(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """IoU of every box of ``a`` ``[n, 4]`` with every box of ``b`` ``[m, 4]`` (corners)."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    out: npt.NDArray[np.float64] = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return out


def nms(corners: npt.NDArray[np.float64], scores: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """Indices kept by greedy NMS (highest score first; one class)."""
    order = np.argsort(-scores, kind="stable")
    overlaps = iou(corners[order], corners[order])
    kept: list[int] = []
    suppressed = np.zeros(order.size, dtype=bool)
    for i in range(order.size):
        if suppressed[i]:
            continue
        kept.append(i)
        suppressed |= overlaps[i] > NMS_IOU
    return order[np.asarray(kept, dtype=np.intp)]


def boxes(x: npt.NDArray[Any], layout: Layout) -> list[Found]:
    """The boxes of each image of one output value."""
    if layout.final:
        a = np.asarray(x, dtype=np.float64)
        images = a.reshape(-1, a.shape[-2], a.shape[-1]) if a.ndim >= 3 else a.reshape(1, -1, a.shape[-1])
        out = []
        for rows in images:
            live = rows[rows[:, layout.score] >= SCORE]
            out.append(Found(live[:, :4], np.round(live[:, layout.label]).astype(np.int64)))
        return out
    found = []
    for p in _candidates(x, layout.channels_first):
        scores = p[:, 4:]
        classes = scores.argmax(axis=1)
        best = scores.max(axis=1)
        corners = np.concatenate([p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2], axis=1)
        keep = np.flatnonzero(best >= SCORE)
        picked = [np.zeros(0, dtype=np.intp)]
        for c in np.unique(classes[keep]):
            idx = keep[classes[keep] == c]
            picked.append(idx[nms(corners[idx], best[idx])])
        chosen = np.sort(np.concatenate(picked))
        found.append(Found(corners[chosen], classes[chosen].astype(np.int64)))
    return found


def match(a: Found, b: Found, pixels: bool, same_iou: float = SAME) -> tuple[int, float]:
    """Boxes of ``a`` and ``b`` paired one to one (same class, best IoU first) that are drawn the
    same; and the worst IoU among the pairs (1 without any)."""
    same = 0
    worst = 1.0
    for c in np.union1d(a.classes, b.classes):
        ca, cb = a.corners[a.classes == c], b.corners[b.classes == c]
        if not len(ca) or not len(cb):
            continue
        overlaps = iou(ca, cb)
        moved = np.abs(ca[:, None, :] - cb[None, :, :]).max(axis=2)
        used_a: set[int] = set()
        used_b: set[int] = set()
        for flat in np.argsort(-overlaps, axis=None, kind="stable"):
            i, j = divmod(int(flat), len(cb))
            if i in used_a or j in used_b or overlaps[i, j] <= 0:
                continue
            used_a.add(i)
            used_b.add(j)
            worst = min(worst, float(overlaps[i, j]))
            if overlaps[i, j] >= same_iou or (pixels and moved[i, j] <= SHIFT):
                same += 1
    return same, worst


class Boxes:
    name = "boxes"
    decision = ""
    describes = "images"

    def __init__(self, layout: Layout, *, tolerance: float = SAME) -> None:
        self.layout = layout
        self.tolerance = tolerance
        """IoU at which two matched boxes are drawn the same."""

    def same(self) -> str:
        return f"the same boxes (IoU >= {self.tolerance:g}, or within {SHIFT:g} px)"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        images = moved = total = kept = 0
        worst = 1.0
        for r, g in zip(ref, got, strict=True):
            sample_changed = False
            for a, b in zip(boxes(r, self.layout), boxes(g, self.layout), strict=True):
                pixels = bool((a.corners > 1.0).any() or (b.corners > 1.0).any())
                same, low = match(a, b, pixels, self.tolerance)
                worst = min(worst, low)
                image_changed = same != len(a.classes) or same != len(b.classes)
                images += 1
                moved += image_changed
                total += len(a.classes)
                kept += same
                sample_changed |= image_changed
            changed.append(sample_changed)
        how = "NMS in the graph" if self.layout.final else f"score >= {SCORE:g}, NMS at IoU {NMS_IOU:g}"
        detail = f"{how}: {kept} of {total} boxes drawn the same, worst IoU {worst:.2f}"
        return Answers(tuple(changed), images, moved, detail)
