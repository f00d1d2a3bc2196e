"""Class scores (``[batch, classes]`` logits or probabilities): the answer is the argmax of each row."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays


def _rows(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a = np.asarray(x)
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


class Labels:
    name = "top-1"
    decision = "top-1"
    describes = "labels"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        items = moved = 0
        for r, g in zip(ref, got, strict=True):
            a, b = _rows(r).argmax(axis=1), _rows(g).argmax(axis=1)
            diff = int(np.count_nonzero(a != b))
            items += int(a.size)
            moved += diff
            changed.append(diff > 0)
        return Answers(tuple(changed), items, moved)


class Equal:
    """Integer outputs (token ids, indices, counts): the answer is the exact values of each sample."""

    name = "equal"
    decision = "equal"
    describes = "samples"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed = tuple(not np.array_equal(np.asarray(r), np.asarray(g)) for r, g in zip(ref, got, strict=True))
        return Answers(changed, len(changed), sum(changed))


class Values:
    """Outputs without discrete answers (embeddings, features, recurrent state): judged by their
    numeric figures alone (relative L2, cosine); no answer can change."""

    name = "values"
    decision = ""
    describes = "samples"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        return Answers(tuple(False for _ in ref), 0, 0)
