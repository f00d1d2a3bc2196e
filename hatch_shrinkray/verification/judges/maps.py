"""Dense probability maps (``[batch, channels, height, width]`` in [0, 1]: text detectors, segmenters).

What a package takes from a map is its regions: the connected areas above a threshold (DB text
detectors box each region of the map above 0.3). So a page's answer is its region set, compared at
several thresholds: the same number of regions, each matched one to one (IoU >= ``MATCH``) and
drawn almost the same (IoU >= ``SAME``). Counting pixels would call a page "all but the same" while
two words merged into one box.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays

THRESHOLDS = (0.3, 0.5, 0.7)
MATCH = 0.5
"""IoU at which two regions are the same object."""
SAME = 0.9
"""IoU at which a matched region is drawn the same (its box would barely move)."""


def label(mask: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int32], int]:
    """8-connected components of a 2-D mask: (labels 1..n, 0 for background; n).

    Runs of each row are found at once, runs of neighbouring rows that touch are joined, and the
    joins are resolved by repeated minimum propagation: all in numpy, fast on 960x960 pages."""
    h, w = mask.shape
    padded = np.zeros((h, w + 2), dtype=np.int8)
    padded[:, 1:-1] = mask
    d = np.diff(padded, axis=1)
    sr, sc = np.nonzero(d == 1)  # starts, row-major: sorted by row then column
    er, ec = np.nonzero(d == -1)  # ends (exclusive), in the same order
    n = sr.size
    out = np.zeros((h, w), dtype=np.int32)
    if not n:
        return out, 0
    width = w + 2
    start_key = sr.astype(np.int64) * width + sc
    end_key = er.astype(np.int64) * width + ec
    # Run b (row r+1) touches run a (row r) when a ends at or after b's start - 1 and starts at or
    # before b's end (8-connectivity): a contiguous range of row r's runs.
    prev_row = sr - 1
    lo = np.searchsorted(end_key, prev_row.astype(np.int64) * width + sc, side="left")
    hi = np.searchsorted(start_key, prev_row.astype(np.int64) * width + ec, side="right")
    counts = np.maximum(hi - lo, 0)
    b_idx = np.repeat(np.arange(n), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    a_idx = np.repeat(lo, counts) + offsets
    keep = sr[a_idx] == sr[b_idx] - 1 if a_idx.size else np.zeros(0, dtype=bool)
    a_idx, b_idx = a_idx[keep], b_idx[keep]
    parent = np.arange(n)
    while a_idx.size:
        low = np.minimum(parent[a_idx], parent[b_idx])
        before = parent.copy()
        np.minimum.at(parent, a_idx, low)
        np.minimum.at(parent, b_idx, low)
        while True:  # pointer jumping
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
        if np.array_equal(parent, before):
            break
    roots, labels = np.unique(parent, return_inverse=True)
    lengths = ec - sc
    flat = np.repeat(sr.astype(np.int64) * w + sc, lengths) + (
        np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    out.reshape(-1)[flat] = np.repeat(labels + 1, lengths)
    return out, int(roots.size)


def match(a: npt.NDArray[np.int32], na: int, b: npt.NDArray[np.int32], nb: int) -> tuple[int, list[float]]:
    """Regions matched one to one (best IoU >= ``MATCH``, greedily) and their IoUs."""
    if not na or not nb:
        return 0, []
    both = (a > 0) & (b > 0)
    inter = np.bincount(a[both].astype(np.int64) * (nb + 1) + b[both], minlength=(na + 1) * (nb + 1))
    inter = inter.reshape(na + 1, nb + 1)[1:, 1:].astype(np.float64)
    area_a = np.bincount(a.reshape(-1), minlength=na + 1)[1:].astype(np.float64)
    area_b = np.bincount(b.reshape(-1), minlength=nb + 1)[1:].astype(np.float64)
    iou = inter / (area_a[:, None] + area_b[None, :] - inter)
    pairs = np.argwhere(iou >= MATCH)
    order = np.argsort(-iou[pairs[:, 0], pairs[:, 1]], kind="stable")
    used_a: set[int] = set()
    used_b: set[int] = set()
    ious: list[float] = []
    for i, j in pairs[order]:
        if int(i) in used_a or int(j) in used_b:
            continue
        used_a.add(int(i))
        used_b.add(int(j))
        ious.append(float(iou[i, j]))
    return len(ious), ious


def planes(x: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
    """The 2-D maps of a ``[..., H, W]`` output (every batch row and channel)."""
    a = np.asarray(x)
    return list(a.reshape(-1, a.shape[-2], a.shape[-1]))


class Maps:
    name = "map"
    decision = "decision"
    describes = "maps"

    def __init__(self, tolerance: float = SAME) -> None:
        self.tolerance = tolerance
        """IoU at which a matched region is drawn the same."""

    def same(self) -> str:
        return f"the same regions (IoU >= {self.tolerance:g})"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        items = moved = regions = lost = 0
        worst = 1.0
        for r, g in zip(ref, got, strict=True):
            sample_changed = False
            for pa, pb in zip(planes(r), planes(g), strict=True):
                plane_changed = False
                for t in THRESHOLDS:
                    la, na = label(pa > t)
                    lb, nb = label(pb > t)
                    matched, ious = match(la, na, lb, nb)
                    regions += na
                    lost += (na - matched) + (nb - matched)
                    worst = min([worst, *ious])
                    if matched != na or matched != nb or any(v < self.tolerance for v in ious):
                        plane_changed = True
                items += 1
                moved += plane_changed
                sample_changed |= plane_changed
            changed.append(sample_changed)
        detail = (f"regions at {'/'.join(f'{t:g}' for t in THRESHOLDS)}: {regions - lost if lost <= regions else 0} "
                  f"of {regions} matched one to one, worst IoU {worst:.2f}")
        return Answers(tuple(changed), items, moved, detail)
