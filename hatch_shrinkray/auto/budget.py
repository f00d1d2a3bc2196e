"""How far a candidate model's outputs are from the original's, in the terms of the accuracy budget.

Three figures, each the worst over the model's outputs: relative L2, cosine, and agreement of the
discrete answer a caller would take from the output (per-position argmax of class scores, or the
``> 0.5`` decision of a probability output such as Silero VAD's speech probability). ``energy``
(the sum of squared relative L2 over outputs) is the additive quantity the search estimates with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.verification.compare import agreement_fails, compare

Outputs = list[list[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Deviation:
    rel_l2: float
    cosine: float
    agreement: float
    """min(share of unchanged answers, soft agreement): a position whose top-2 margin (or distance
    to the 0.5 threshold) is used up by a fraction f counts as f^2 of a flip. Flips are rare
    events a few calibration samples hardly show; the margins they come from are visible."""
    energy: float
    """Sum over outputs of squared relative L2."""
    risk: float
    """Mean over decision positions of ``(shift of the top-1 vs top-2 gap / the gap)^2``, unclipped:
    additive across independent weight errors, so the search can rank tensors by it."""
    top1: float = 1.0
    """Hard agreement of the discrete answers (worst output; 1 without any)."""
    flips: tuple[tuple[int, float], ...] = ()
    """Per output with discrete answers: (positions, flips verification counts, near-ties excluded),
    so the search applies verification's own agreement gate."""

    def within(self, options: ShrinkOptions) -> bool:
        """Within the budget, and within verification's limits: the search must never pick a
        model that the verification after it rejects on the same inputs."""
        v = options.verify
        if v is not None and not (self.rel_l2 <= v.max_rel_l2 and self.cosine >= v.min_cosine
                                  and not any(agreement_fails(f, n, v.min_top1) for n, f in self.flips)):
            return False
        return (self.rel_l2 <= options.budget_rel_l2 and self.cosine >= options.budget_cosine
                and self.agreement >= options.budget_agreement)

    def load(self, options: ShrinkOptions) -> float:
        """How much of the budget this deviation uses, summed over its terms (additive estimate)."""
        total = self.energy / max(options.budget_rel_l2, 1e-12) ** 2
        total += (1.0 - self.cosine) / max(1.0 - options.budget_cosine, 1e-12)
        if options.budget_agreement > 0:
            total += self.risk / max(1.0 - options.budget_agreement, 1e-6)
        return total

    def scaled(self, ratio: float) -> Deviation:
        """The deviation of an error ``ratio`` times as large in energy (proxy for unmeasured levels)."""
        return Deviation(self.rel_l2 * ratio**0.5, 1.0 - (1.0 - self.cosine) * ratio,
                         1.0 - (1.0 - self.agreement) * ratio, self.energy * ratio, self.risk * ratio,
                         1.0 - (1.0 - self.top1) * ratio, tuple((n, f * ratio) for n, f in self.flips))

    def text(self) -> str:
        return f"rel-L2 {self.rel_l2:.2e}, cos {self.cosine:.7f}, agreement {100 * self.agreement:.2f}%"


ZERO = Deviation(0.0, 1.0, 1.0, 0.0, 0.0)
BROKEN = Deviation(float("inf"), -1.0, 0.0, float("inf"), float("inf"), 0.0)


def deviation(ref: Outputs, got: Outputs) -> Deviation:
    """Worst-output deviation of ``got`` from ``ref`` (both: per feed, per output)."""
    if not ref:
        return ZERO
    rel = energy = risk = 0.0
    cos = agree = top1 = 1.0
    flips: list[tuple[int, float]] = []
    loose = VerifyOptions(max_rel_l2=float("inf"), min_cosine=-1.0, min_top1=0.0)
    for i in range(len(ref[0])):
        a = [r[i] for r in ref]
        b = [g[i] for g in got]
        c = compare(str(i), a, b, loose)
        if c.nonfinite_mismatch:
            return BROKEN
        r = c.rel_l2 if np.isfinite(c.rel_l2) else float("inf")
        rel = max(rel, r)
        energy += r * r
        cos = min(cos, c.cosine)
        if c.top1 is None:
            continue
        top1 = min(top1, c.top1)
        flips.append((c.positions, float(c.flips - c.near_ties)))
        shifts = {"top-1": _gap_shifts, "decision": _threshold_shifts}.get(c.agreement_kind)
        soft = c.top1
        if shifts is not None:
            moved = shifts(a, b)
            risk = max(risk, float(np.mean(moved)))
            soft = min(soft, 1.0 - float(np.mean(np.minimum(moved, 1.0))))
        agree = min(agree, soft)
    return Deviation(rel, cos, agree, energy, risk, top1, tuple(flips))


def _gap_shifts(ref: list[npt.NDArray[Any]], got: list[npt.NDArray[Any]]) -> npt.NDArray[np.float64]:
    """Per position: (change of the reference's top-1 minus top-2 gap / that gap)^2."""
    out = []
    for r, g in zip(ref, got, strict=True):
        ra = np.asarray(r, dtype=np.float64)
        ga = np.asarray(g, dtype=np.float64)
        c = ra.shape[-1]
        ra, ga = ra.reshape(-1, c), ga.reshape(-1, c)
        top2 = np.argpartition(-ra, 1, axis=1)[:, :2]
        first = np.where(np.take_along_axis(ra, top2[:, :1], 1) >= np.take_along_axis(ra, top2[:, 1:], 1),
                         top2[:, :1], top2[:, 1:])
        second = np.where(first == top2[:, :1], top2[:, 1:], top2[:, :1])
        gap = (np.take_along_axis(ra, first, 1) - np.take_along_axis(ra, second, 1))[:, 0]
        moved = (np.take_along_axis(ga, first, 1) - np.take_along_axis(ga, second, 1))[:, 0] - gap
        out.append(_ratio(moved, gap))
    return np.concatenate(out)


def _threshold_shifts(ref: list[npt.NDArray[Any]], got: list[npt.NDArray[Any]]) -> npt.NDArray[np.float64]:
    a = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in ref])
    b = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in got])
    return _ratio(b - a, np.abs(a - 0.5))


def _ratio(moved: npt.NDArray[np.float64], gap: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(moved / gap)^2 with a floor on the gap (1e-2 of the median gap), so exact ties in the
    reference, which any rounding flips, do not swamp every other position."""
    floor = max(1e-2 * float(np.median(gap)) if gap.size else 0.0, 1e-12)
    out: npt.NDArray[np.float64] = np.square(moved / np.maximum(gap, floor))
    return out
