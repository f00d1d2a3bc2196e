"""Class scores (``[batch, classes]`` logits or probabilities): the answer is the argmax of each row."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import NEAR_TIE, Answers, Arrays


def _rows(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a = np.asarray(x)
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


def near_ties(rows: npt.NDArray[Any], share: float) -> npt.NDArray[np.bool_]:
    """Rows whose best two scores are within ``share`` of the row's range: any rounding may flip them."""
    x = np.asarray(rows, dtype=np.float64)
    if x.shape[-1] < 2:
        return np.zeros(x.shape[0], dtype=bool)
    part = np.partition(x, x.shape[1] - 2, axis=1)[:, -2:]
    return part[:, 1] - part[:, 0] < share * (part[:, 1] - x.min(axis=1))  # type: ignore[no-any-return]


class Labels:
    """A row's label; a flip where the original's best two scores were within ``tolerance`` of the
    row's range is no changed label (as ``compare`` leaves such a flip out of the decisions)."""

    name = "top-1"
    decision = "top-1"
    describes = "labels"

    def __init__(self, tolerance: float = NEAR_TIE) -> None:
        self.tolerance = tolerance

    def same(self) -> str:
        return f"the same label (a flip where the best two were within {100 * self.tolerance:g}% of the scores aside)"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        items = moved = 0
        for r, g in zip(ref, got, strict=True):
            rows = _rows(r)
            a, b = rows.argmax(axis=1), _rows(g).argmax(axis=1)
            diff = int(np.count_nonzero((a != b) & ~near_ties(rows, self.tolerance)))
            items += int(a.size)
            moved += diff
            changed.append(diff > 0)
        return Answers(tuple(changed), items, moved)


class Equal:
    """Integer outputs (token ids, indices, counts): the answer is the exact values of each sample."""

    name = "equal"
    decision = "equal"
    describes = "samples"
    tolerance = 0.0

    def same(self) -> str:
        return "the same values"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed = tuple(not np.array_equal(np.asarray(r), np.asarray(g)) for r, g in zip(ref, got, strict=True))
        return Answers(changed, len(changed), sum(changed))


class Values:
    """Outputs without discrete answers (embeddings, features, recurrent state): judged by their
    numeric figures alone (relative L2, cosine); no answer can change."""

    name = "values"
    decision = ""
    describes = "samples"
    tolerance = 0.0

    def same(self) -> str:
        return "no answer: max-rel-l2 and min-cosine are its tolerance"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        return Answers(tuple(False for _ in ref), 0, 0)
