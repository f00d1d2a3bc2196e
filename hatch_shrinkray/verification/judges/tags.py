"""Per-character tags (word segmenters, diacritizers, taggers): ``[batch, T, C]`` scores, one tag per
character of a text fed as ``[batch, T]`` token ids.

The package reads the argmax tag of every character and builds the text from them (where words
split, which vowel marks go on a letter), so a text's answer is its whole tag sequence: one changed
tag is one changed text, however many characters agree. Greedy CTC decoding would collapse repeated
tags and hide the change, and counting characters would call a handful of changed tags in thousands
a pass while a quarter of the texts changed their segmentation.

Told apart from a CTC recogniser by what feeds it (``per_character``): a tagger's output has exactly
the batch and length of a token-id input, where a recogniser takes a float image, or audio whose
frames are far fewer than its samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.judges.base import Answers, Arrays

MAX_TAGS = 64
"""Most classes a tag output is detected with: taggers choose among a few (segmenters 2 to 4, a
diacritizer's marks 16, named entities or parts of speech a few dozen), while a text encoder's
per-token hidden states (384 or 768 features, fed the same token ids) are no tags to take an argmax
of. More tags: name the judge (``judges = { out = "tags" }``)."""


def per_character(outputs: Arrays, feeds: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every call's output ``[batch, T, C]`` (2 <= C <= ``MAX_TAGS``) has the ``[batch, T]``
    shape of one of that call's token-id inputs (integral, not negative: ids, whatever their dtype),
    with T >= 2 in some call."""
    if not outputs or len(outputs) != len(feeds):
        return False
    longest = 0
    for out, feed in zip(outputs, feeds, strict=True):
        shape = np.shape(out)
        if len(shape) != 3 or not 2 <= shape[-1] <= MAX_TAGS:
            return False
        if not any(_token_ids(x, shape[:2]) for x in feed.values()):
            return False
        longest = max(longest, shape[1])
    return longest >= 2


def _token_ids(x: Any, shape: tuple[int, ...]) -> bool:
    a = np.asarray(x)
    if a.shape != shape or a.dtype.kind not in "iuf":
        return False
    integral = a.dtype.kind != "f" or (np.isfinite(a).all() and np.array_equal(a, np.round(a)))
    return bool(integral) and bool((a >= 0).all())


def tags(x: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The argmax tag of every character: ``[texts, T]``."""
    a = np.asarray(x)
    out: npt.NDArray[np.intp] = a.reshape(-1, a.shape[-2], a.shape[-1]).argmax(axis=2)
    return out


class Tags:
    name = "tags"
    decision = "top-1"
    describes = "texts"

    def __init__(self, tolerance: float = 0) -> None:
        self.tolerance = tolerance
        """Changed tags a text may have and still be the same answer."""

    def same(self) -> str:
        n = int(self.tolerance)
        return "the same tags" if not n else f"at most {n} tag{'s' if n != 1 else ''} changed per text"

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        changed: list[bool] = []
        texts = moved = characters = flipped = 0
        for r, g in zip(ref, got, strict=True):
            a, b = tags(r), tags(g)
            differ = a != b
            rows = int(np.count_nonzero(differ.sum(axis=1) > self.tolerance))
            texts += a.shape[0]
            moved += rows
            characters += int(a.size)
            flipped += int(np.count_nonzero(differ))
            changed.append(rows > 0)
        return Answers(tuple(changed), texts, moved,
                       f"{self.same()}; one tag per character: {flipped} of {characters} tags changed")
