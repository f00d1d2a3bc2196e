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
from hatch_shrinkray.verification import compare

Outputs = list[list[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Deviation:
    rel_l2: float
    cosine: float
    agreement: float
    energy: float

    def within(self, options: ShrinkOptions) -> bool:
        return (self.rel_l2 <= options.budget_rel_l2 and self.cosine >= options.budget_cosine
                and self.agreement >= options.budget_agreement)

    def text(self) -> str:
        return f"rel-L2 {self.rel_l2:.2e}, cos {self.cosine:.7f}, agreement {100 * self.agreement:.2f}%"


ZERO = Deviation(0.0, 1.0, 1.0, 0.0)


def deviation(ref: Outputs, got: Outputs) -> Deviation:
    """Worst-output deviation of ``got`` from ``ref`` (both: per feed, per output)."""
    if not ref:
        return ZERO
    rel = energy = 0.0
    cos = agree = 1.0
    loose = VerifyOptions(max_rel_l2=float("inf"), min_cosine=-1.0, min_top1=0.0)
    for i in range(len(ref[0])):
        a = [r[i] for r in ref]
        b = [g[i] for g in got]
        c = compare(str(i), a, b, loose)
        if c.nonfinite_mismatch:
            return Deviation(float("inf"), -1.0, 0.0, float("inf"))
        r = c.rel_l2 if np.isfinite(c.rel_l2) else float("inf")
        rel = max(rel, r)
        energy += r * r
        cos = min(cos, c.cosine)
        top = c.top1 if c.top1 is not None else _decisions(a, b)
        if top is not None:
            agree = min(agree, top)
    return Deviation(rel, cos, agree, energy)


def _decisions(ref: list[npt.NDArray[Any]], got: list[npt.NDArray[Any]]) -> float | None:
    """Agreement of ``> 0.5`` decisions for probability outputs with a trailing axis of 1 (or scalars)."""
    a = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in ref])
    b = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in got])
    first = np.asarray(ref[0])
    if first.dtype.kind != "f" or (first.ndim and first.shape[-1] != 1) or a.size == 0:
        return None
    if not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
        return None
    return float(np.mean((a > 0.5) == (b > 0.5)))
