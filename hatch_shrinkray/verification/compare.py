"""Judging one output of the shrunk model against the original's. Pure numpy.

Every output: max abs error, relative L2 and cosine over the finite values; non-finite values must
match position by position. Outputs whose answers are discrete also get an agreement count: the
per-position argmax of class scores, or the ``> 0.5`` decision of a probability output.

The limits gate on what was observed (decision 7): an output fails when its observed share of
unchanged decisions is below ``min-agreement``, or a figure is past a tolerance. Two refinements,
neither of which lets an observed figure past a limit the user set:

* a flip where the original itself was nearly tied (its top-1/top-2 gap under ``NEAR_TIE`` of the
  row's range, or a probability within ``NEAR_TIE`` of the threshold) is reported but not counted:
  any rounding may flip a tie;
* a default numeric tolerance (relative L2, cosine) does not count for an output whose judge
  compared what the package takes from it and found every answer held (``tolerance_applies``); a
  tolerance the user set always counts.

The one-sided 95% Wilson bound of the flip rate is shown beside a failed agreement, to say how sure
the verdict is; it never decides it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import OutputComparison
from hatch_shrinkray.verification.judges import THRESHOLD, Judge, detect
from hatch_shrinkray.verification.judges.base import NEAR_TIE
from hatch_shrinkray.verification.judges.boxes import Boxes
from hatch_shrinkray.verification.judges.decisions import Segments
from hatch_shrinkray.verification.judges.maps import THRESHOLDS as MAP_THRESHOLDS

CHUNK = 1 << 15
"""Values per step of ``dots``: float64 copies of this size stay in cache (the whole-vector copies
of a 23M-value output took about twice as long)."""
Z_95 = 1.6448536269514722
"""One-sided 95% normal quantile."""

Arrays = list[npt.NDArray[Any]]


@dataclass(frozen=True)
class Agreement:
    kind: str
    """``top-1`` (argmax of class scores) or ``decision`` (``> 0.5`` of a probability)."""
    positions: int
    flips: int
    near_ties: int
    """Flips at positions the original had nearly tied; not counted against the model."""

    @property
    def counted(self) -> int:
        return self.flips - self.near_ties

    @property
    def share(self) -> float:
        return 1.0 - self.flips / self.positions if self.positions else 1.0


def flip_rate_lower_bound(flips: float, positions: int) -> float:
    """Lower end of the one-sided 95% Wilson interval of a flip rate (0 without positions): how sure a
    failed agreement is, shown beside it."""
    if positions <= 0 or flips <= 0:
        return 0.0
    p = min(flips / positions, 1.0)
    z2 = Z_95 * Z_95
    centre = p + z2 / (2 * positions)
    margin = Z_95 * math.sqrt(p * (1 - p) / positions + z2 / (4 * positions * positions))
    return max(0.0, (centre - margin) / (1 + z2 / positions))


def agreement_fails(flips: float, positions: int, min_agreement: float) -> bool:
    """Whether the observed share of unchanged decisions is below ``min_agreement``."""
    return positions > 0 and flips / positions > 1.0 - min_agreement


def agreement_failure(kind: str, positions: int, flips: int, counted: int, min_agreement: float) -> str:
    """``top-1 93.3% (152/163) < 95% (11 flips; flip rate >= 4.1% at 95%)``: the observed agreement
    past its limit, then how sure that is."""
    bound = flip_rate_lower_bound(counted, positions)
    ties = f", {flips - counted} more at near-ties" if flips > counted else ""
    return (f"{kind} {100 * (1 - counted / positions):.1f}% ({positions - counted}/{positions}) < "
            f"{100 * min_agreement:g}% ({counted} flip{'s' if counted != 1 else ''}{ties}; "
            f"flip rate >= {100 * bound:.1f}% at 95%)")


@dataclass(frozen=True)
class Expected:
    """One output of the original over all feeds, with everything a comparison needs from it computed
    once: ``auto`` compares hundreds of candidate models against the same original outputs."""

    arrays: Arrays
    flat: npt.NDArray[Any]
    """All values in one vector (float64 for float outputs)."""
    finite: npt.NDArray[np.bool_]
    kind: str
    """The fine-grained decisions counted: ``top-1`` (argmax per row or frame), ``decision`` (a
    probability or pixel against a threshold), ``equal`` (integer values) or empty."""
    judge: Judge
    """What the package takes from the output (``verification.judges``)."""
    top1: npt.NDArray[np.intp] | None = None
    """``top-1``: the original's argmax per position."""
    tied: npt.NDArray[np.bool_] | None = None
    """Positions where the original is nearly tied (top-1 vs top-2 gap, or distance to the threshold)."""
    threshold: float = THRESHOLD
    """The decision threshold of a probability output."""
    decided: npt.NDArray[np.float64] | None = None
    """``decision``: the probability its decisions are read from, where that is not ``flat`` itself
    (a streaming detector's speech probability per frame, 1 - p[silence])."""

    @property
    def classes(self) -> int:
        return int(np.asarray(self.arrays[0]).shape[-1])


@dataclass(frozen=True)
class Dots:
    """Sums over two equally long vectors ``x`` (the original's) and ``y``, in float64."""

    xx: float
    yy: float
    xy: float
    dd: float
    """``sum((x - y)^2)``, summed directly (no cancellation)."""
    max_abs: float


def dots(x: npt.NDArray[np.float64], y: npt.NDArray[Any]) -> Dots:
    """``Dots`` of ``x`` and ``y`` (any float type), a cache-sized chunk at a time."""
    xx = yy = xy = dd = max_abs = 0.0
    for i in range(0, x.size, CHUNK):
        a, b = x[i:i + CHUNK], y[i:i + CHUNK].astype(np.float64)
        d = a - b
        xx, yy, xy, dd = xx + float(a @ a), yy + float(b @ b), xy + float(a @ b), dd + float(d @ d)
        max_abs = max(max_abs, float(np.abs(d).max()))
    return Dots(xx, yy, xy, dd, max_abs)


def _flat(arrays: Arrays) -> npt.NDArray[Any]:
    """All values in one vector (a view when there is one contiguous array)."""
    if len(arrays) == 1:
        return np.asarray(arrays[0]).reshape(-1)
    return np.concatenate([np.asarray(x).reshape(-1) for x in arrays])


def expect(ref: Arrays, threshold: float = THRESHOLD, judge: Judge | None = None, *,
           recurrent: bool = False) -> Expected:
    """The original's values of one output, prepared; ``judge`` as chosen (detected when None)."""
    flat = _flat(ref)
    judge = judge or detect(ref, recurrent=recurrent)
    if flat.dtype.kind not in "fc":  # no numbers to measure: the exact values are all there is to compare
        return Expected(ref, flat, np.ones(flat.shape, dtype=bool), "equal", judge)
    a64 = flat.astype(np.float64)
    finite = np.isfinite(a64)
    first = np.asarray(ref[0])
    if first.dtype.kind != "f" or not finite.all() or not judge.decision or judge.decision == "equal":
        return Expected(ref, a64, finite, "", judge)
    if judge.decision == "top-1" and first.ndim >= 1 and first.shape[-1] >= 2:
        rows = a64.reshape(-1, first.shape[-1])
        part = np.partition(rows, rows.shape[1] - 2, axis=1)[:, -2:]  # the two largest, ascending
        spread = part[:, 1] - rows.min(axis=1)
        return Expected(ref, a64, finite, "top-1", judge, rows.argmax(axis=1),
                        part[:, 1] - part[:, 0] < NEAR_TIE * spread)
    if judge.decision == "decision":
        if judge.name == "map":
            threshold = MAP_THRESHOLDS[0]
        decided = _positions(judge, a64, first)
        read = a64 if decided is None else decided
        return Expected(ref, a64, finite, "decision", judge, tied=np.abs(read - threshold) < NEAR_TIE,
                        threshold=threshold, decided=decided)
    return Expected(ref, a64, finite, "", judge)


def _positions(judge: Judge, flat: npt.NDArray[Any], first: npt.NDArray[Any]) -> npt.NDArray[np.float64] | None:
    """Where a judge reads its decisions off other values than the output's own: a streaming
    detector's frames of class probabilities give one speech probability per frame."""
    if isinstance(judge, Segments) and judge.silence is not None:
        return judge.positions(flat, int(np.shape(first)[-1]))
    return None


def decided(e: Expected, b: npt.NDArray[Any]) -> tuple[npt.NDArray[np.float64], npt.NDArray[Any]]:
    """The values a ``decision`` output's decisions are read from: the original's and those of ``b``
    (all the other model's values of the output, in one vector)."""
    if e.decided is None:
        return e.flat, b
    other = _positions(e.judge, b, e.arrays[0])
    assert other is not None
    return e.decided, other


def agreement(e: Expected, b: npt.NDArray[Any]) -> Agreement | None:
    """Agreement of the discrete answers in ``b`` (all the shrunk model's values of the output, in
    one vector) with the original's, for outputs that carry any (else None)."""
    if e.tied is None:
        return None
    if e.kind == "decision":
        limit = np.float64(e.threshold)  # compared in float64 whatever ``b``'s type, as the original's values
        read, other = decided(e, b)
        flipped = (read > limit) != (other > limit)
        return Agreement("decision", int(read.size), int(flipped.sum()), int((flipped & e.tied).sum()))
    if not np.isfinite(b).all():
        return None
    assert e.top1 is not None
    flipped = e.top1 != b.reshape(-1, e.classes).argmax(axis=1)
    return Agreement("top-1", int(e.top1.size), int(flipped.sum()), int((flipped & e.tied).sum()))


def compare(name: str, ref: Arrays | Expected, got: Arrays, options: VerifyOptions,
            threshold: float = THRESHOLD, *, answers: bool = True) -> OutputComparison:
    """``got`` judged against the original's ``ref`` (its values, or ``expect(ref)`` computed once);
    ``threshold`` is the decision threshold of probability outputs (that of ``ref`` if prepared).
    ``answers``: also let the output's judge compare the answers sample by sample (``got`` then has
    one array per sample of ``ref``)."""
    e = ref if isinstance(ref, Expected) else expect(ref, threshold)
    c, tolerances = _figures(name, e, got, options)
    if not answers or len(got) != len(e.arrays) or not all(
            _comparable(e.judge, np.shape(x), np.shape(y)) for x, y in zip(e.arrays, got, strict=True)):
        return dataclasses.replace(c, judge=e.judge.name)
    a = e.judge.answers(e.arrays, got, e.threshold)
    c = dataclasses.replace(c, judge=e.judge.name, describes=e.judge.describes, answers=a.items,
                            changed_answers=a.changed_items, changed=a.changed, detail=a.detail)
    if tolerances and not tolerance_applies(c):
        c = dataclasses.replace(c, failures=tuple(f for f in c.failures if f not in tolerances), waived=tolerances)
    return c


def _waivable(options: VerifyOptions, rel: float, cos: float) -> tuple[list[str], list[str]]:
    """The numeric tolerances ``rel`` and ``cos`` are past: those the user set (always failures), and
    the defaults (which an output whose answers all held does not count)."""
    set_: list[str] = []
    default: list[str] = []
    if rel > options.rel_l2_limit:
        (default if options.max_rel_l2 is None else set_).append(f"rel L2 {rel:.3g} > {options.rel_l2_limit:g}")
    if cos < options.cosine_limit:
        (default if options.min_cosine is None else set_).append(f"cosine {cos:.6f} < {options.cosine_limit:g}")
    return set_, default


def _ragged(judge: Judge) -> bool:
    """Boxes after NMS in the graph: an image holds as many rows as boxes were found."""
    return isinstance(judge, Boxes) and judge.layout.final


def _comparable(judge: Judge, ref: tuple[int, ...], got: tuple[int, ...]) -> bool:
    """Whether ``judge`` can compare a sample of these shapes: the same shape, or any number of rows
    for a ragged output."""
    return ref == got or (_ragged(judge) and len(ref) == len(got) and ref[:-2] == got[:-2] and ref[-1] == got[-1])


def tolerance_applies(c: OutputComparison) -> bool:
    """Whether the numeric tolerances (relative L2, cosine) may fail ``c``'s output: not when its judge
    compared what the package takes from it and every answer held. Those figures then measure values
    nobody reads (a text detector's map of noise, near zero everywhere, is far off in relative L2
    while its regions, the page's answer, are all there); they still gate outputs judged as plain
    values, and outputs whose answers changed."""
    return c.judge in ("values", "") or not c.answers or c.changed_answers > 0


def _figures(name: str, e: Expected, got: Arrays, options: VerifyOptions) -> tuple[OutputComparison, tuple[str, ...]]:
    """Relative L2, cosine, non-finite mismatches and the fine-grained decisions, with the gate; and
    which of the failures are the numeric tolerances' (``tolerance_applies`` decides whether they count)."""
    b = _flat(got)
    if e.flat.shape != b.shape:
        shape = (f"shape changed: {[x.shape for x in e.arrays]} -> {[x.shape for x in got]}",)
        # Boxes after NMS: how many rows there are is the judge's to count, as their values are.
        inf = float("inf")
        return OutputComparison(name, inf, inf, 0.0, None, 0, shape), shape if _ragged(e.judge) else ()
    if e.kind == "equal":
        a = e.flat
        same = int(np.count_nonzero(a == b))
        changed = a.size - same
        fails = () if not agreement_fails(changed, a.size, options.agreement_limit) else (
            agreement_failure("equal", a.size, changed, changed, options.agreement_limit),)
        share = same / a.size if a.size else 1.0
        return OutputComparison(name, 0.0 if same == a.size else float("nan"), 0.0, 1.0, share, 0, fails,
                                "equal", a.size, a.size - same, 0), ()
    a64 = e.flat
    fa, fb = e.finite, np.isfinite(b)
    if fa.all() and fb.all():
        mismatch, x, y = 0, a64, b
    else:
        b64 = b.astype(np.float64)
        same_special = (~fa & ~fb) & ((np.isnan(a64) & np.isnan(b64)) | (a64 == b64))
        mismatch = int(np.count_nonzero((fa != fb) | ((~fa & ~fb) & ~same_special)))
        both = fa & fb
        x, y = a64[both], b64[both]
    sums = dots(x, y)
    max_abs = sums.max_abs
    nx, ny, nd = math.sqrt(sums.xx), math.sqrt(sums.yy), math.sqrt(sums.dd)
    rel = nd / nx if nx > 0 else (0.0 if nd == 0 else float("inf"))
    cos = sums.xy / (nx * ny) if nx > 0 and ny > 0 else (1.0 if nx == ny else 0.0)
    limits, tolerances = _waivable(options, rel, cos)
    failures = [f"{mismatch} non-finite values differ"] if mismatch else []
    failures += limits + tolerances
    agree = agreement(e, b)
    if agree is None:
        return OutputComparison(name, max_abs, rel, cos, None, mismatch, tuple(failures)), tuple(tolerances)
    if agreement_fails(agree.counted, agree.positions, options.agreement_limit):
        failures.append(agreement_failure(agree.kind, agree.positions, agree.flips, agree.counted,
                                          options.agreement_limit))
    return OutputComparison(name, max_abs, rel, cos, agree.share, mismatch, tuple(failures), agree.kind,
                            agree.positions, agree.flips, agree.near_ties), tuple(tolerances)


def unchecked(ref: Arrays) -> str:
    """Why an output of the original cannot show a difference ('' when it can): a float output whose
    finite values are all equal (constant) or that has none (all NaN/inf)."""
    first = np.asarray(ref[0])
    if first.dtype.kind != "f":
        return ""
    values = np.concatenate([np.asarray(r, dtype=np.float64).reshape(-1) for r in ref])
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "non-finite (NaN/inf) everywhere"
    return f"constant ({finite[0]:g}) everywhere" if finite.min() == finite.max() else ""
