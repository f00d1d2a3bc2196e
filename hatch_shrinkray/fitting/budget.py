"""How far a candidate model's outputs are from the original's, in the terms of the accuracy budget.

Three figures, each the worst over the model's outputs: relative L2, cosine, and agreement of the
discrete answer a caller would take from the output (per-position argmax of class scores, or the
``> 0.5`` decision of a probability output such as a voice-activity detector's speech probability). ``energy``
(the sum of squared relative L2 over outputs) is the additive quantity the search estimates with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.result import OutputComparison
from hatch_shrinkray.verification.compare import Expected, agreement, agreement_fails, compare, decided, dots, expect
from hatch_shrinkray.verification.judges import judge_for
from hatch_shrinkray.verification.judges.labels import Values

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
        """Within the absolute budget (``Limits.of`` without a reference)."""
        return Limits.of(options).within(self)

    def load(self, options: ShrinkOptions) -> float:
        """How much of the absolute budget this deviation uses (``Limits.load``)."""
        return Limits.of(options).load(self)

    @property
    def decides(self) -> bool:
        """Some output carries discrete answers (argmax positions or thresholded probabilities)."""
        return bool(self.flips) or self.risk > 0 or self.top1 < 1.0

    def scaled(self, ratio: float) -> Deviation:
        """The deviation of an error ``ratio`` times as large in energy (proxy for unmeasured levels)."""
        return Deviation(self.rel_l2 * ratio**0.5, 1.0 - (1.0 - self.cosine) * ratio,
                         1.0 - (1.0 - self.agreement) * ratio, self.energy * ratio, self.risk * ratio,
                         1.0 - (1.0 - self.top1) * ratio, tuple((n, f * ratio) for n, f in self.flips))

    def text(self) -> str:
        return f"rel-L2 {self.rel_l2:.2e}, cos {self.cosine:.7f}, agreement {100 * self.agreement:.2f}%"


ZERO = Deviation(0.0, 1.0, 1.0, 0.0, 0.0)


SPEND = 0.5
"""The share of what output-aware rounding wins over round-to-nearest int8 (on the fitting samples)
that ``auto`` spends on bytes by default; the rest is its margin on units it was not fitted on."""


def _between(plain: float, fitted: float, *, higher: bool = False) -> float:
    """``SPEND`` of the way from ``fitted`` back to ``plain`` where ``fitted`` is better (higher or
    lower), else ``plain``."""
    better = fitted > plain if higher else fitted < plain
    return fitted + SPEND * (plain - fitted) if better else plain

ABSOLUTE = (0.05, 0.998, 0.998)
"""rel-L2, cosine and agreement limits when a budget is unset and there is no reference to be
relative to (the per-tensor report of ``sensitivity``)."""
DECISION_SLACK = 2.0
"""With discrete answers to keep, the budget is the answers (agreement at least round-to-nearest
int8's); relative L2 may then reach this multiple of int8's, so that fewer levels fitted by
output-aware rounding can spend the error int8's rounding wasted: such a fit can keep more held-out
answers than round-to-nearest int8 at a higher relative L2."""


@dataclass(frozen=True)
class Limits:
    """What ``auto`` may spend: limits on the worst output's relative L2, cosine and agreement, and
    verification's own limits (the search must never pick a model that the verification after it
    rejects on the same inputs).

    An unset budget key is *relative to round-to-nearest int8* on the same fitting inputs: as many
    answers kept (soft agreement, which counts near-flips), and int8's error (``DECISION_SLACK``
    times it where answers exist). So by default ``auto`` ships the smallest assignment that is as
    good as plain int8 where it was fitted; the do-no-harm guard then checks that on units it
    never saw."""

    rel_l2: float
    cosine: float
    agreement: float
    verify: VerifyOptions | None = None
    relative: bool = False
    """Some limit was taken from round-to-nearest int8's deviation."""

    @classmethod
    def of(cls, options: ShrinkOptions, int8: Deviation | None = None, fitted: Deviation | None = None) -> Limits:
        """The limits for ``options``; unset keys relative to round-to-nearest ``int8``'s deviation
        and, when given, to ``fitted`` (every weight int8 with output-aware rounding): half of what
        the fitted rounding wins over round-to-nearest is spent on bytes (``SPEND``), the rest kept
        as a margin, so that the plan still beats round-to-nearest on units it was not fitted on."""
        rel, cos, agree = ABSOLUTE
        if int8 is not None:
            best = fitted if fitted is not None else int8
            slack = DECISION_SLACK if int8.decides else 1.0
            rel = max(_between(int8.rel_l2, best.rel_l2) * slack, 1e-9)
            cos = 1.0 - max(1.0 - _between(int8.cosine, best.cosine, higher=True), 0.0) * slack * slack
            agree = _between(int8.agreement, best.agreement, higher=True) if int8.decides else 0.0
        relative = int8 is not None and None in (options.budget_rel_l2, options.budget_cosine,
                                                  options.budget_agreement)
        return cls(rel if options.budget_rel_l2 is None else options.budget_rel_l2,
                   cos if options.budget_cosine is None else options.budget_cosine,
                   agree if options.budget_agreement is None else options.budget_agreement,
                   options.verify, relative)

    def within(self, d: Deviation) -> bool:
        v = self.verify
        if v is not None and not (d.rel_l2 <= v.rel_l2_limit and d.cosine >= v.cosine_limit
                                  and not any(agreement_fails(f, n, v.agreement_limit) for n, f in d.flips)):
            return False
        return d.rel_l2 <= self.rel_l2 and d.cosine >= self.cosine and d.agreement >= self.agreement

    def screening(self, on: Deviation) -> Limits:
        """These limits for a screen on a few feeds, where ``on`` is round-to-nearest int8's deviation:
        without the answers term where some output has fewer than ``MIN_UNITS`` decision positions
        there (a classifier's few files: one position's margin moves the soft agreement past the
        budget either way, and points that keep it on every fitting feed were screened out), else
        unchanged (a recogniser's hundreds of characters: there the answers term screens out points
        whose error the fitting feeds underrate). A screen only spares full runs; the full check on
        every feed still judges the answers."""
        return replace(self, agreement=0.0) if any(positions < MIN_UNITS for positions, _ in on.flips) else self

    def load(self, d: Deviation) -> float:
        """How much of the budget ``d`` uses, summed over its terms (additive estimate)."""
        total = d.energy / max(self.rel_l2, 1e-12) ** 2
        total += (1.0 - d.cosine) / max(1.0 - self.cosine, 1e-12)
        if self.agreement > 0:
            total += d.risk / max(1.0 - self.agreement, 1e-6)
        return total

    def text(self) -> str:
        base = " (relative to round-to-nearest int8)" if self.relative else ""
        return (f"rel-L2 <= {self.rel_l2:.2e}, cos >= {self.cosine:.6f}, agreement >= "
                f"{100 * self.agreement:.2f}%{base}")
BROKEN = Deviation(float("inf"), -1.0, 0.0, float("inf"), float("inf"), 0.0)


class Baseline:
    """The original's outputs on the feeds a candidate is run on, prepared once for the hundreds of
    comparisons of a search: ``compare.expect`` per output, and for each decision position the
    reference classes and the (floored) margin that the risk divides by."""

    def __init__(self, ref: Outputs, judges: Sequence[str] | None = None) -> None:
        """``judges``: per output, the judge the ``judges`` option names (``auto``: detected; an
        ``off`` output is left out of the budget)."""
        self.feeds = len(ref)
        count = len(ref[0]) if ref else 0
        names = list(judges or ["auto"] * count)
        chosen = [judge_for(names[i], [r[i] for r in ref]) for i in range(count)]
        self.skip = {i for i, j in enumerate(chosen) if j is None}
        self.outputs = [expect([r[i] for r in ref], judge=j if j is not None else Values())
                        for i, j in enumerate(chosen)]
        self.margins = [_margins(e, [r[i] for r in ref]) for i, e in enumerate(self.outputs)]
        self.squares = [float(e.flat @ e.flat) if e.kind != "equal" and e.finite.all() else None
                        for e in self.outputs]
        self._buffers: dict[int, npt.NDArray[Any]] = {}

    def gather(self, i: int, got: Outputs) -> npt.NDArray[Any]:
        """Output ``i`` of every feed of ``got`` in one vector, written into a buffer kept for the
        next call (a search compares hundreds of times, and a fresh large array each time
        multiplied the cost)."""
        arrays = [np.asarray(g[i]).reshape(-1) for g in got]
        size, dtype = sum(a.size for a in arrays), np.result_type(*arrays)
        buffer = self._buffers.get(i)
        if buffer is None or buffer.size != size or buffer.dtype != dtype:
            buffer = self._buffers[i] = np.empty(size, dtype)
        out: npt.NDArray[Any] = np.concatenate(arrays, out=buffer)
        return out


Margins = tuple[npt.NDArray[np.intp] | None, npt.NDArray[np.intp] | None, npt.NDArray[np.float64]]
"""Per decision position: the reference's top-1 and top-2 class (None for a probability) and the
top-1 vs top-2 gap (or the distance to 0.5), floored."""


def deviation(ref: Outputs | Baseline, got: Outputs) -> Deviation:
    """Worst-output deviation of ``got`` from ``ref`` (both: per feed, per output)."""
    base = ref if isinstance(ref, Baseline) else Baseline(ref)
    if not base.feeds:
        return ZERO
    rel = energy = risk = 0.0
    cos = agree = top1 = 1.0
    flips: list[tuple[int, float]] = []
    loose = VerifyOptions(max_rel_l2=float("inf"), min_cosine=-1.0, min_agreement=0.0)
    for i, (e, margins, square) in enumerate(zip(base.outputs, base.margins, base.squares, strict=True)):
        if i in base.skip:
            continue
        flat = base.gather(i, got)
        c = _quick(e, square, flat) or compare(str(i), e, [flat], loose)
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
        soft = c.top1
        if margins is not None:
            moved = _shifts(e, margins, flat)
            risk = max(risk, float(np.mean(moved)))
            soft = min(soft, 1.0 - float(np.mean(np.minimum(moved, 1.0))))
        agree = min(agree, soft)
    return Deviation(rel, cos, agree, energy, risk, top1, tuple(flips))


def _quick(e: Expected, square: float | None, got: npt.NDArray[Any]) -> OutputComparison | None:
    """``compare``'s rel-L2, cosine and agreement for finite float values of the original's size,
    from two dot products instead of a difference array (a third of the memory traffic, the same
    figures up to rounding); None where ``compare`` has to look closer."""
    if square is None or got.shape != e.flat.shape or got.dtype.kind != "f" or not np.isfinite(got).all():
        return None
    sums = dots(e.flat, got)
    yy, xy = sums.yy, sums.xy
    nx, ny = math.sqrt(square), math.sqrt(yy)
    rel = math.sqrt(sums.dd) / nx if nx > 0 else (0.0 if yy == 0 else math.inf)
    cos = xy / (nx * ny) if nx > 0 and ny > 0 else (1.0 if nx == ny else 0.0)
    agree = agreement(e, got)
    if agree is None:
        return OutputComparison("", math.nan, rel, cos, None, 0)
    return OutputComparison("", math.nan, rel, cos, agree.share, 0, (), agree.kind, agree.positions, agree.flips,
                            agree.near_ties)


def _margins(e: Expected, ref: list[npt.NDArray[Any]]) -> Margins | None:
    if e.kind == "decision":
        return None, None, _floored(np.abs(decided(e, e.flat)[0] - e.threshold))
    if e.kind != "top-1":
        return None
    firsts, seconds, gaps = [], [], []
    for r in ref:  # the gap floor is per feed (a text line's own median margin)
        ra = np.asarray(r, dtype=np.float64).reshape(-1, e.classes)
        top2 = np.argpartition(-ra, 1, axis=1)[:, :2]
        first = np.where(np.take_along_axis(ra, top2[:, :1], 1) >= np.take_along_axis(ra, top2[:, 1:], 1),
                         top2[:, :1], top2[:, 1:])
        second = np.where(first == top2[:, :1], top2[:, 1:], top2[:, :1])
        firsts.append(first)
        seconds.append(second)
        gaps.append(_floored((np.take_along_axis(ra, first, 1) - np.take_along_axis(ra, second, 1))[:, 0]))
    return np.concatenate(firsts), np.concatenate(seconds), np.concatenate(gaps)


def _shifts(e: Expected, margins: Margins, got: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per position: (shift of the reference's top-1 minus top-2 gap, or of the distance to the 0.5
    threshold, / that margin)^2."""
    first, second, margin = margins
    if first is None or second is None:
        read, other = decided(e, got)
        moved = other.astype(np.float64) - read
    else:
        ga = got.reshape(-1, e.classes)
        ra = e.flat.reshape(-1, e.classes)
        moved = ((np.take_along_axis(ga, first, 1).astype(np.float64)
                  - np.take_along_axis(ga, second, 1).astype(np.float64))
                 - (np.take_along_axis(ra, first, 1) - np.take_along_axis(ra, second, 1)))[:, 0]
    out: npt.NDArray[np.float64] = np.square(moved / margin)
    return out


def _floored(gap: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The margins with a floor (1e-2 of their median), so exact ties in the reference, which any
    rounding flips, do not swamp every other position."""
    return np.maximum(gap, max(1e-2 * float(np.median(gap)) if gap.size else 0.0, 1e-12))
