"""Probabilities read against a threshold (speech / no speech, yes / no).

``Decisions``: one call's probabilities; the answer is its vector of decisions (per batch row).
``Segments``: a recurrent model's whole stream, the steps' probabilities in time order; the answer is
where the probability crosses the threshold, i.e. the segments a voice-activity detector reports.
A stream whose segments differ anywhere is changed; the detail says how far the boundaries moved
(in steps: one step of Silero VAD is 32 ms of audio) and whether the error grows along the stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays


class Decisions:
    name = "decision"
    decision = "decision"
    describes = "rows"  # a batch row's decisions: a character of a tagger, not a recorded sample

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        items = moved = 0
        for r, g in zip(ref, got, strict=True):
            a, b = np.asarray(r), np.asarray(g)
            rows_a = a.reshape(a.shape[0], -1) if a.ndim >= 2 else a.reshape(1, -1)
            rows_b = b.reshape(rows_a.shape)
            diff = int(np.count_nonzero(((rows_a > threshold) != (rows_b > threshold)).any(axis=1)))
            items += rows_a.shape[0]
            moved += diff
            changed.append(diff > 0)
        return Answers(tuple(changed), items, moved)


def edges(series: npt.NDArray[Any], threshold: float) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Steps where the series rises above / falls back to the threshold (segment starts and ends)."""
    above = np.concatenate([[False], np.asarray(series) > threshold, [False]]).astype(np.int8)
    d = np.diff(above)
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def boundary_shift(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp]) -> int:
    """Largest distance from a boundary of either side to the nearest one of the other side."""
    if not a.size and not b.size:
        return 0
    if not a.size or not b.size:
        return -1  # a segment appeared or vanished
    da = np.abs(a[:, None] - b[None, :]).min(axis=1).max()
    db = np.abs(b[:, None] - a[None, :]).min(axis=1).max()
    return int(max(da, db))


class Segments:
    name = "segments"
    decision = "decision"
    describes = "streams"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        shifts: list[int] = []
        drift: list[float] = []
        for r, g in zip(ref, got, strict=True):
            a = np.asarray(r, dtype=np.float64).reshape(len(r), -1).reshape(-1)
            b = np.asarray(g, dtype=np.float64).reshape(len(g), -1).reshape(-1)
            (sa, ea), (sb, eb) = edges(a, threshold), edges(b, threshold)
            same = np.array_equal(sa, sb) and np.array_equal(ea, eb)
            changed.append(not same)
            if not same:
                shifts.append(max(boundary_shift(sa, sb), boundary_shift(ea, eb))
                              if len(sa) == len(sb) else -1)
            drift.append(_drift(a, b))
        detail = []
        if shifts:
            moved = [s for s in shifts if s >= 0]
            appeared = len(shifts) - len(moved)
            if moved:
                detail.append(f"boundaries moved by up to {max(moved)} step{'s' if max(moved) != 1 else ''}")
            if appeared:
                detail.append(f"{appeared} stream{'s' if appeared != 1 else ''} gained or lost a segment")
        finite = [d for d in drift if np.isfinite(d)]
        if finite:
            detail.append(f"drift x{max(finite):.2g} (error of the last quarter of a stream over its first)")
        return Answers(tuple(changed), len(changed), sum(changed), "; ".join(detail))


def _drift(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Mean absolute error over the last quarter of a stream divided by that of its first quarter:
    above 1 when the shrunk model's own state carries its error forward and it grows."""
    q = len(a) // 4
    if q < 4:
        return float("nan")
    first = float(np.abs(a[:q] - b[:q]).mean())
    last = float(np.abs(a[-q:] - b[-q:]).mean())
    if first == 0.0:
        return float("nan") if last == 0.0 else float("inf")
    return last / first
