"""How sure a verification is: counted over independent units, never over correlated steps.

A verdict on 762 decisions taken from 2 audio streams rests on 2 pieces of evidence, not 762: the
steps of one stream share its state, its speaker and its noise, and a shrunk model that drifts
changes many of them together. So every figure that says how sure we are is computed over *units*:
a whole stream, a whole pytest test case, a standalone call, a sample of a user's ``.npz``.

* The upper bound is the one-sided 95% Clopper-Pearson bound on the share of units whose answers
  changed (0 of 16 units: at most 17%; 0 of 2: at most 78%).
* Below ``MIN_UNITS`` independent units the evidence is *weak*: the line says so and data-fitted
  choices (output-aware rounding, ``auto``'s plan, ``check --search``'s plan) are not made, because
  whether they beat round-to-nearest cannot be told from chance (README, "How sure").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_UNITS = 16
"""Independent units needed before data-fitted choices are made and before a verdict is called
more than weak evidence: with none of 16 changed, the 95% upper bound on the share of units that
change is 17%; split in two folds for cross-fitting, each side still has 8."""
CONFIDENCE = 0.95

UNIT_NAMES = {"stream": ("stream", "streams"), "test": ("test case", "test cases"), "call": ("call", "calls"),
              "sample": ("sample", "samples")}


def upper_bound(changed: int, units: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate (1.0 without units)."""
    if units <= 0:
        return 1.0
    if changed >= units:
        return 1.0
    alpha = 1.0 - confidence
    if changed == 0:
        return float(1.0 - alpha ** (1.0 / units))
    lo, hi = changed / units, 1.0
    for _ in range(60):  # bisection on P(X <= changed | p) = alpha; decreasing in p
        mid = (lo + hi) / 2
        if _cdf(changed, units, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def _cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n can be thousands)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0 if k < n else 1.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
             for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def percent(share: float) -> str:
    """``17%``, ``4.2%``, ``0.079%``: two significant digits below 10%, so a small bound never reads 0%."""
    p = 100 * share
    return f"{p:.0f}%" if p >= 10 else f"{p:.2g}%"


def unit_kind(units: Sequence[str]) -> str:
    """What the units are, for people: ``streams``, ``test cases``, ``calls``, ``samples`` (or ``units``)."""
    kinds = {u.split(":", 1)[0] for u in units}
    if len(kinds) == 1:
        (kind,) = kinds
        if kind in UNIT_NAMES:
            return UNIT_NAMES[kind][1]
    return "units"


@dataclass(frozen=True)
class Evidence:
    """What a verdict rests on, counted over independent units."""

    units: int
    """Independent units judged."""
    changed_units: int
    """Units where any judged answer changed."""
    unit_kind: str
    """``streams``, ``test cases``, ``calls``, ``samples`` or ``units``."""
    answers: int = 0
    """Answers judged (a label, a text line, a page's regions, a stream's segments)."""
    changed_answers: int = 0
    decisions: int = 0
    """Fine-grained decisions compared (argmax per row or frame, thresholded steps or pixels)."""
    flips: int = 0
    real: bool = True
    describes: str = "answers"
    """What one answer is (``lines``, ``maps``, ``streams``, ``labels``), for people."""

    @property
    def bound(self) -> float:
        """95% upper bound on the share of units whose answers change."""
        return upper_bound(self.changed_units, self.units)

    @property
    def weak(self) -> bool:
        return not self.real or self.units < MIN_UNITS

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        """Written with the bound and the verdict, for people (read back, they are worked out again)."""
        return {**body, "upper_bound": round(self.bound, 6), "weak": self.weak}

    def text(self) -> str:
        """``0 of 762 decisions flipped over 2 streams (0 changed; <= 78% at 95%): weak evidence``."""
        parts = []
        if self.decisions:
            parts.append(f"{self.flips} of {self.decisions} decisions flipped")
        said = (self.answers == self.units and self.describes in (self.unit_kind, "rows")) or (
            self.answers == self.decisions and self.changed_answers == self.flips)
        if self.answers and not said:
            parts.append(f"{self.changed_answers} of {self.answers} {self.describes} changed")
        if not parts:  # nothing counted: a bound on "changed" units would claim what was never compared
            text = (f"no answers judged over {self.units} {self.unit_kind} (outputs compared as numbers only; "
                    "`judges` says how your package reads an output)")
        else:
            text = (f"{', '.join(parts)} over {self.units} {self.unit_kind} ({self.changed_units} changed; "
                    f"<= {percent(self.bound)} at 95%)")
        if not self.real:
            return f"{text}: generated inputs, no evidence"
        return f"{text}: weak evidence" if self.weak else text
