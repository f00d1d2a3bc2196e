"""Sequence outputs (``[batch, time, classes]``, CTC-style text recognisers): the answer is the decoded
text of each batch row, argmax per time step with repeats and blanks collapsed (greedy CTC, what
PaddleOCR and its wrappers do). One changed character changes the line, however many frames agree
(a tolerance of N edits per line, set per output, makes lines within N edits the same).

Raw logits (no softmax in the graph: a captcha recogniser's ``[T, N, 37]``) decode the same way, but
their values alone do not tell them from an encoder's hidden states, so ``raw_ctc`` reads them as
text only where the calls' inputs are images or audio and the frames look like CTC's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays

BLANK_SHARE = 0.2
"""The blank class is the argmax of at least this share of frames in a CTC output (spaces between
characters); its index is 0 (PaddleOCR) or the last class (other exporters)."""


def blank_class(ref: Arrays) -> int | None:
    """The CTC blank, read off the original's outputs: class 0 or the last, if it dominates."""
    counts: npt.NDArray[np.int64] | None = None
    frames = 0
    for r in ref:
        a = np.asarray(r)
        if a.ndim < 2:
            return None
        top = a.reshape(-1, a.shape[-1]).argmax(axis=1)
        c = np.bincount(top, minlength=a.shape[-1])
        counts = c if counts is None else counts + c
        frames += top.size
    if counts is None or not frames:
        return None
    best = int(counts.argmax())
    return None if best not in (0, counts.size - 1) or counts[best] < BLANK_SHARE * frames else best


def batch_first(x: npt.NDArray[Any], time_major: bool = False) -> npt.NDArray[Any]:
    """``[batch, time, classes]``; a time-major ``[time, 1, classes]`` (torch's CTC layout, as ddddocr
    exports it) turned so, and any ``[time, batch, classes]`` where the calls' inputs say so
    (``time_major``). A batch of one-frame lines would read no more than a character each."""
    a: npt.NDArray[Any] = np.asarray(x)
    if a.ndim == 3 and ((a.shape[1] == 1 and a.shape[0] > 1) or time_major):
        turned: npt.NDArray[Any] = a.transpose(1, 0, 2)
        return turned
    return a


def decode(x: npt.NDArray[Any], blank: int | None, time_major: bool = False) -> list[tuple[int, ...]]:
    """Greedy CTC per batch row: argmax per frame, repeats collapsed, blanks dropped (``blank``
    None: not CTC, the argmax sequence as it is)."""
    a = batch_first(x, time_major)
    rows = a.reshape(-1, a.shape[-2], a.shape[-1]).argmax(axis=2)
    if blank is None:
        return [tuple(int(c) for c in row) for row in rows]
    out = []
    for row in rows:
        keep = np.ones(row.shape, dtype=bool)
        keep[1:] = row[1:] != row[:-1]
        keep &= row != blank
        out.append(tuple(int(c) for c in row[keep]))
    return out


MAX_BLANK_SHARE = 0.98
"""Raw logits: at most this share of frames may be blank (an embedding's constant outlier feature
would be the argmax of every frame; a recogniser reads some characters on real inputs)."""
MIN_CHARACTERS = 2
"""Raw logits: the non-blank frames must take at least this many distinct classes."""


def raw_ctc(ref: Arrays, time_major: bool = False) -> int | None:
    """The blank of raw CTC logits ``[N, T, C]`` / ``[T, N, C]`` (None: they do not look like CTC):
    class 0 or C-1 is the argmax of between ``BLANK_SHARE`` and ``MAX_BLANK_SHARE`` of the frames, the
    other frames name at least ``MIN_CHARACTERS`` classes, and no row is unit-length (an embedding).
    The caller checks that the inputs are images or audio."""
    blank = blank_class(ref)
    if blank is None:
        return None
    frames = blanks = 0
    seen: set[int] = set()
    for r in ref:
        a = batch_first(np.asarray(r, dtype=np.float64), time_major)
        if a.ndim != 3 or a.shape[-2] < 2 or a.shape[-1] < 3:
            return None
        rows = a.reshape(-1, a.shape[-1])
        if np.allclose(np.sqrt(np.square(rows).sum(axis=1)), 1.0, atol=1e-3):
            return None
        top = rows.argmax(axis=1)
        frames += top.size
        blanks += int(np.count_nonzero(top == blank))
        seen.update(int(c) for c in np.unique(top[top != blank]))
    return None if blanks > MAX_BLANK_SHARE * frames or len(seen) < MIN_CHARACTERS else blank


class Sequences:
    name = "sequence"
    decision = "top-1"
    describes = "lines"

    def __init__(self, blank: int | None = None, *, tolerance: float = 0, time_major: bool = False) -> None:
        self.blank = blank
        self.tolerance = tolerance
        self.time_major = time_major
        """``[time, batch, classes]`` whatever the batch (torch's CTC layout, batched)."""

    def same(self) -> str:
        n = int(self.tolerance)
        return "the same text" if not n else f"texts within {n} edit{'s' if n != 1 else ''}"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        blank = self.blank if self.blank is not None else blank_class(ref)
        changed: list[bool] = []
        items = moved = chars = edits = 0
        for r, g in zip(ref, got, strict=True):
            a, b = decode(r, blank, self.time_major), decode(g, blank, self.time_major)
            distances = [_edit_distance(x, y) if x != y else 0 for x, y in zip(a, b, strict=True)]
            diff = sum(d > self.tolerance for d in distances)
            items += len(a)
            moved += diff
            changed.append(diff > 0)
            chars += sum(len(x) for x in a)
            edits += sum(distances)
        how = f"{self.same()}, CTC greedy, blank {blank}" if blank is not None else f"{self.same()}, argmax per step"
        cer = f", character error rate {edits / chars:.4f}" if chars else ""
        return Answers(tuple(changed), items, moved, how + cer)


def _edit_distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]
