"""Judging one output of the shrunk model against the original's. Pure numpy.

Every output: max abs error, relative L2 and cosine over the finite values; non-finite values must
match position by position. Outputs whose answers are discrete also get an agreement count: the
per-position argmax of class scores, or the ``> 0.5`` decision of a probability output.

The agreement gate is statistical and margin-aware (README, "How agreement is judged"):

* a flip where the original itself was nearly tied (its top-1/top-2 gap under ``NEAR_TIE`` of the
  row's range, or a probability within ``NEAR_TIE`` of the threshold) is reported but not counted:
  any rounding may flip a tie, and one such flip on 2 samples must not fail a correct model;
* the gate fails when even the lower end of a one-sided 95% Wilson interval of the counted flip rate
  exceeds ``1 - min_top1``, so a verdict rests on enough positions to mean something, while a real
  regression (3% of 500 positions flipped with clear margins, against a 1% allowance) still fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import OutputComparison

NEAR_TIE = 0.01
Z_95 = 1.6448536269514722
"""One-sided 95% normal quantile."""
THRESHOLD = 0.5

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
    """Lower end of the one-sided 95% Wilson interval of a flip rate (0 without positions)."""
    if positions <= 0 or flips <= 0:
        return 0.0
    p = min(flips / positions, 1.0)
    z2 = Z_95 * Z_95
    centre = p + z2 / (2 * positions)
    margin = Z_95 * math.sqrt(p * (1 - p) / positions + z2 / (4 * positions * positions))
    return max(0.0, (centre - margin) / (1 + z2 / positions))


def agreement_fails(flips: float, positions: int, min_agreement: float) -> bool:
    return flip_rate_lower_bound(flips, positions) > 1.0 - min_agreement


def agreement(ref: Arrays, got: Arrays, threshold: float = THRESHOLD) -> Agreement | None:
    """Agreement of the discrete answers, for outputs that carry any (else None); ``threshold`` is
    the decision threshold of probability outputs."""
    first = np.asarray(ref[0])
    if first.dtype.kind != "f" or any(not np.isfinite(np.asarray(r)).all() for r in ref):
        return None
    if _class_scores(first):
        return _argmax_agreement(ref, got)
    if _probabilities(ref, first):
        return _decision_agreement(ref, got, threshold)
    return None


def _class_scores(first: npt.NDArray[Any]) -> bool:
    """(batch, classes) logits, or probability vectors along the last axis. Unit-length rows are
    embeddings (sentence encoders L2-normalise), whose argmax is no answer anyone takes."""
    if first.ndim < 2 or first.shape[-1] < 2 or _unit_rows(first):
        return False
    if first.ndim > 2:
        return bool(np.all((first >= 0) & (first <= 1)) and np.allclose(first.sum(axis=-1), 1, atol=1e-3))
    return True


def _probabilities(ref: Arrays, first: npt.NDArray[Any]) -> bool:
    """Probability outputs with a trailing axis of 1, one per position (1-D) or scalars: Silero VAD's
    speech probability, per chunk or per frame of a sequence."""
    if first.ndim > 1 and first.shape[-1] != 1:
        return False
    return all(bool(((np.asarray(r) >= 0) & (np.asarray(r) <= 1)).all()) for r in ref)


def _argmax_agreement(ref: Arrays, got: Arrays) -> Agreement | None:
    positions = flips = ties = 0
    for r, g in zip(ref, got, strict=True):
        ra = np.asarray(r, dtype=np.float64)
        ga = np.asarray(g, dtype=np.float64)
        if not np.isfinite(ga).all():
            return None
        c = ra.shape[-1]
        ra, ga = ra.reshape(-1, c), ga.reshape(-1, c)
        flipped = ra.argmax(axis=1) != ga.argmax(axis=1)
        top2 = -np.sort(-ra, axis=1)[:, :2]
        gap = top2[:, 0] - top2[:, 1]
        spread = ra.max(axis=1) - ra.min(axis=1)
        tied = gap < NEAR_TIE * spread
        positions += int(ra.shape[0])
        flips += int(flipped.sum())
        ties += int((flipped & tied).sum())
    return Agreement("top-1", positions, flips, ties)


def _decision_agreement(ref: Arrays, got: Arrays, threshold: float) -> Agreement:
    a = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in ref])
    b = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in got])
    flipped = (a > threshold) != (b > threshold)
    tied = np.abs(a - threshold) < NEAR_TIE
    return Agreement("decision", int(a.size), int(flipped.sum()), int((flipped & tied).sum()))


def _unit_rows(x: npt.NDArray[Any]) -> bool:
    """Every row along the last axis has L2 norm 1 and the rows have negative values: an embedding
    (a confident softmax row also has norm close to 1, but no negative entries)."""
    if not np.isfinite(x).all() or not (x < 0).any():
        return False
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    norms = np.sqrt(np.square(rows).sum(axis=1))
    return bool(np.allclose(norms, 1.0, atol=1e-3) and (np.count_nonzero(np.abs(rows) > 1e-6, axis=1) > 1).all())


def compare(name: str, ref: Arrays, got: Arrays, options: VerifyOptions,
            threshold: float = THRESHOLD) -> OutputComparison:
    a = np.concatenate([np.asarray(x).reshape(-1) for x in ref])
    b = np.concatenate([np.asarray(x).reshape(-1) for x in got])
    if a.shape != b.shape:
        return OutputComparison(name, float("inf"), float("inf"), 0.0, None, 0,
                                (f"shape changed: {[x.shape for x in ref]} -> {[x.shape for x in got]}",))
    if a.dtype.kind not in "fc":
        same = int(np.count_nonzero(a == b))
        fails = () if same == a.size or not agreement_fails(a.size - same, a.size, options.min_top1) else (
            f"agreement {same}/{a.size} below {100 * options.min_top1:g}%",)
        share = same / a.size if a.size else 1.0
        return OutputComparison(name, 0.0 if same == a.size else float("nan"), 0.0, 1.0, share, 0, fails,
                                "equal", a.size, a.size - same, 0)
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    fa, fb = np.isfinite(a64), np.isfinite(b64)
    same_special = (~fa & ~fb) & ((np.isnan(a64) & np.isnan(b64)) | (a64 == b64))
    mismatch = int(np.count_nonzero((fa != fb) | ((~fa & ~fb) & ~same_special)))
    both = fa & fb
    x, y = a64[both], b64[both]
    diff = x - y
    max_abs = float(np.abs(diff).max()) if diff.size else 0.0
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    nd = float(np.linalg.norm(diff))
    rel = nd / nx if nx > 0 else (0.0 if nd == 0 else float("inf"))
    cos = float(np.dot(x, y) / (nx * ny)) if nx > 0 and ny > 0 else (1.0 if nx == ny else 0.0)
    failures = []
    if mismatch:
        failures.append(f"{mismatch} non-finite values differ")
    if rel > options.max_rel_l2:
        failures.append(f"rel L2 {rel:.3g} > {options.max_rel_l2:g}")
    if cos < options.min_cosine:
        failures.append(f"cosine {cos:.6f} < {options.min_cosine:g}")
    agree = agreement(ref, got, threshold)
    if agree is None:
        return OutputComparison(name, max_abs, rel, cos, None, mismatch, tuple(failures))
    if agreement_fails(agree.counted, agree.positions, options.min_top1):
        bound = flip_rate_lower_bound(agree.counted, agree.positions)
        failures.append(f"{agree.kind} {agree.positions - agree.flips}/{agree.positions}: {agree.counted} clear "
                        f"flips, flip rate >= {100 * bound:.1f}% (95% bound) > {100 * (1 - options.min_top1):g}%")
    return OutputComparison(name, max_abs, rel, cos, agree.share, mismatch, tuple(failures), agree.kind,
                            agree.positions, agree.flips, agree.near_ties)


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
    if finite.min() == finite.max():
        return f"constant ({finite[0]:g}) everywhere"
    return ""
