"""Whether the original's outputs on generated inputs carry a signal a comparison could see.

Noise is not what a model sees, and on it many models answer nothing: a text detector's map is
2.7e-7 everywhere, a gate is closed, a classifier is saturated. Comparing the shrunk model's
outputs with such values measures rounding noise against rounding noise, so it can neither pass
nor fail a model honestly. The rule, per output, over its finite values on every sample:

* a float output is silent when every value lies within ``SILENT`` of zero, or all lie within
  ``SILENT`` (relative to their largest magnitude, when that is over 1) of one another: constant
  up to float32 rounding;
* any other output (integers, booleans) is silent when all its values are equal;
* an output without a finite value, or without any value, is silent.

A model is unverifiable on generated inputs when every one of its outputs is silent; one output
that moves is enough to compare. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

SILENT = 1e-6


def silent(arrays: Sequence[npt.NDArray[Any]]) -> str:
    """Why one output, over all samples, carries no signal ('' when it carries one)."""
    if not arrays:
        return ""
    values = np.concatenate([np.asarray(a).reshape(-1) for a in arrays])
    if not values.size:
        return "empty"
    if values.dtype.kind not in "fc":
        return "" if np.any(values != values[0]) else "constant"
    values = values.astype(np.float64) if values.dtype.kind == "f" else np.abs(values)
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "non-finite everywhere"
    largest = float(np.abs(finite).max())
    if largest <= SILENT:
        return f"within {SILENT:g} of 0"
    if float(finite.max() - finite.min()) <= SILENT * max(1.0, largest):
        return f"constant ({float(finite[0]):.6g})"
    return ""


def silent_outputs(names: Sequence[str], outputs: Sequence[Sequence[npt.NDArray[Any]]]) -> str:
    """``y within 1e-06 of 0; z constant (1)`` when every output is silent over ``outputs`` (the
    model's outputs per sample, in ``names`` order); '' when one carries a signal."""
    why = []
    for i, name in enumerate(names):
        reason = silent([sample[i] for sample in outputs])
        if not reason:
            return ""
        why.append(f"{name} {reason}")
    return "; ".join(why)
