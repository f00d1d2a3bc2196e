"""Probabilities read against a threshold (speech / no speech, yes / no).

``Decisions``: one call's probabilities; the answer is its vector of decisions (per batch row).
``Segments``: a streaming detector's speech probability in time order; the answer is where it
crosses the threshold, i.e. the segment list a voice-activity detector reports. Two forms carry it:
one probability per call of a recurrent model (Silero VAD: the stream is the sample, one step per
call), and frames of class probabilities of a streaming model (FSMN-VAD: ``[1, frames, C]`` per call,
class 0 silence, speech = 1 - p[silence]; a call, or a stream of calls, is the sample).

Two segment lists are the same answer when the speech decisions differ in no run of more than
``TOLERANCE`` steps or frames: a boundary one frame off, or a blip of one frame appearing or
vanishing, is what any rounding does near a boundary (and what a package's own smoothing absorbs),
not a changed answer. The detail says how far boundaries moved (in steps: one step of Silero VAD
is 32 ms of audio, one frame of FSMN-VAD 10 ms) and whether the error grows along the stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import NEAR_TIE, Answers, Arrays

TOLERANCE = 1
"""Steps (or frames) by which a segment list may differ and still be the same answer: the longest
run of differing speech decisions."""
MIN_RUN = 8
"""Mean length, in frames, of the runs of frames above the threshold for frame probabilities of a
streaming model to be read as segments: speech lasts tens of frames, while a streaming CTC
recogniser's characters are spikes of one or two frames between blanks (``speech_runs``)."""


class Decisions:
    name = "decision"
    decision = "decision"
    describes = "rows"  # a batch row's decisions: a character of a tagger, not a recorded sample

    def __init__(self, tolerance: float = NEAR_TIE) -> None:
        self.tolerance = tolerance

    def same(self) -> str:
        return f"the same decisions (> 0.5; a flip within {self.tolerance:g} of it aside)"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        items = moved = 0
        for r, g in zip(ref, got, strict=True):
            a, b = np.asarray(r), np.asarray(g)
            rows_a = a.reshape(a.shape[0], -1) if a.ndim >= 2 else a.reshape(1, -1)
            rows_b = b.reshape(rows_a.shape)
            flipped = ((rows_a > threshold) != (rows_b > threshold)) & (np.abs(rows_a - threshold) >= self.tolerance)
            diff = int(np.count_nonzero(flipped.any(axis=1)))
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


def longest_run(differ: npt.NDArray[np.bool_]) -> int:
    """The longest run of True in a 1-D mask."""
    starts, ends = edges(differ.astype(np.float64), 0.5)
    return int((ends - starts).max()) if starts.size else 0


def speech(x: npt.NDArray[Any], silence: int | None, log: bool = False) -> npt.NDArray[np.float64]:
    """The speech probability of one sample in time order: its values (one per step), or for frames of
    class probabilities 1 - p[silence] per frame (``log``: the classes are log-probabilities)."""
    a = np.asarray(x, dtype=np.float64)
    if silence is None:
        return a.reshape(-1)
    quiet = a.reshape(-1, a.shape[-1])[:, silence]
    return 1.0 - (np.exp(quiet) if log else quiet)


def speech_runs(ref: Arrays, silence: int, log: bool, threshold: float) -> float:
    """Mean length of the runs of frames whose speech probability is above ``threshold``, over all
    samples (0 without any)."""
    frames = runs = 0
    for r in ref:
        starts, ends = edges(speech(r, silence, log), threshold)
        frames += int((ends - starts).sum())
        runs += starts.size
    return frames / runs if runs else 0.0


class Segments:
    name = "segments"
    decision = "decision"
    describes = "segment lists"

    def __init__(self, silence: int | None = None, *, log: bool = False, tolerance: float = TOLERANCE) -> None:
        self.silence = silence
        """The silence class of frame probabilities (None: the output is the speech probability)."""
        self.log = log
        self.tolerance = tolerance

    @property
    def step(self) -> str:
        return "step" if self.silence is None else "frame"

    def same(self) -> str:
        n = int(self.tolerance)
        return f"boundaries within {n} {self.step}{'s' if n != 1 else ''}"

    def positions(self, flat: npt.NDArray[Any], classes: int) -> npt.NDArray[np.float64]:
        """The speech probability at every position of an output's values in one vector (``compare``
        counts decisions there)."""
        return speech(flat.reshape(-1, classes) if self.silence is not None else flat, self.silence, self.log)

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        shifts: list[int] = []
        drift: list[float] = []
        within = 0
        for r, g in zip(ref, got, strict=True):
            a, b = speech(r, self.silence, self.log), speech(g, self.silence, self.log)
            (sa, ea), (sb, eb) = edges(a, threshold), edges(b, threshold)
            exact = np.array_equal(sa, sb) and np.array_equal(ea, eb)
            same = exact or longest_run((a > threshold) != (b > threshold)) <= self.tolerance
            changed.append(not same)
            if not same:
                shifts.append(max(boundary_shift(sa, sb), boundary_shift(ea, eb)) if len(sa) == len(sb) else -1)
            within += same and not exact
            drift.append(_drift(a, b))
        detail = [self.same() + (f" ({within} not exact)" if within else "")]
        if shifts:
            moved = [s for s in shifts if s >= 0]
            appeared = len(shifts) - len(moved)
            if moved:
                detail.append(f"boundaries moved by up to {max(moved)} {self.step}{'s' if max(moved) != 1 else ''}")
            if appeared:
                detail.append(f"{appeared} list{'s' if appeared != 1 else ''} gained or lost a segment")
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
