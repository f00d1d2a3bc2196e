"""The interface every judge implements: what a package would take from one output, compared.

A judge looks at one output of the original and of the shrunk model, sample by sample (a sample is
one call, or for a recurrent model one whole stream with its steps stacked on a leading time axis),
and says which *answers* changed: a class label, a decoded text line, a page's text regions, a
stream's speech segments. Fine-grained *decisions* (argmax per row or frame, a thresholded
probability or pixel) are counted by ``verification.compare`` for the statistical gate; the judge
names which kind of decision its output carries (``decision``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Arrays = Sequence[npt.NDArray[Any]]

THRESHOLD = 0.5
NEAR_TIE = 0.01
"""How close to a tie the original may be for a flip not to count: a probability within this of the
threshold, or a top-1 / top-2 gap under this share of the row's range (any rounding may flip a tie)."""
UNIT_SLACK = 1e-6
"""How far outside [0, 1] a probability may round: a sigmoid computed along another kernel path (the
probe session that takes the weights as inputs) can land a hair above 1, and without this slack the
map was judged as plain values, its regions never compared (so the do-no-harm guard could keep a
rounding that changes what the map shows)."""


def in_unit_range(x: npt.ArrayLike) -> bool:
    """Every value a probability, up to ``UNIT_SLACK``."""
    a = np.asarray(x)
    return bool(((a >= -UNIT_SLACK) & (a <= 1 + UNIT_SLACK)).all())


@dataclass(frozen=True)
class Answers:
    """One output's answers over the samples judged."""

    changed: tuple[bool, ...]
    """Per sample: did any of its answers change?"""
    items: int
    """Answers judged (rows of a batch, text lines, pages, streams)."""
    changed_items: int
    detail: str = ""
    """What the judge measured beyond the counts (``max boundary shift 1 step``, ``mean IoU 0.97``)."""


class Judge(Protocol):
    name: str
    """``top-1``, ``decision``, ``segments``, ``map``, ``sequence``, ``equal`` or ``values``."""
    decision: str
    """The fine-grained decisions ``compare`` counts for it: ``top-1``, ``decision``, ``equal`` or ''."""
    describes: str
    """What one answer is, for reports: ``labels``, ``lines``, ``pages``, ``segment lists``."""
    tolerance: float
    """How far two answers may differ and still be the same (in the judge's unit: frames, edits,
    IoU, a share of the scores' range); ``judges = { out = "segments:2" }`` sets it per output."""

    def same(self) -> str:
        """The tolerance in words, for reports: ``boundaries within 1 frame``, ``the same text``."""
        ...

    def answers(self, ref: Arrays, got: Arrays, threshold: float) -> Answers:
        """Compare the original's ``ref`` with ``got``, sample by sample (same shapes)."""
        ...
