"""Judging one output of the shrunk model against the original's: max abs error, relative L2,
cosine similarity and, where it looks like class scores, top-1 agreement. Non-finite outputs must
match position by position. Pure numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import OutputComparison


def compare(name: str, ref: list[npt.NDArray[Any]], got: list[npt.NDArray[Any]],
            options: VerifyOptions) -> OutputComparison:
    a = np.concatenate([np.asarray(x).reshape(-1) for x in ref])
    b = np.concatenate([np.asarray(x).reshape(-1) for x in got])
    if a.shape != b.shape:
        return OutputComparison(name, float("inf"), float("inf"), 0.0, None, 0,
                                (f"shape changed: {[x.shape for x in ref]} -> {[x.shape for x in got]}",))
    top1 = _top1(ref, got)
    if a.dtype.kind not in "fc":
        agree = float(np.mean(a == b)) if a.size else 1.0
        fails = () if agree >= options.min_top1 else (f"agreement {100 * agree:.1f}% < {100 * options.min_top1:g}%",)
        return OutputComparison(name, 0.0 if agree == 1 else float("nan"), 0.0, 1.0, agree, 0, fails)
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
    if top1 is not None and top1 < options.min_top1:
        failures.append(f"top-1 {100 * top1:.1f}% < {100 * options.min_top1:g}%")
    return OutputComparison(name, max_abs, rel, cos, top1, mismatch, tuple(failures))


def _top1(ref: list[npt.NDArray[Any]], got: list[npt.NDArray[Any]]) -> float | None:
    """Argmax agreement over the last axis, for outputs that look like class scores:
    (batch, classes) logits, or probability vectors along the last axis. Unit-length rows are
    embeddings (sentence encoders L2-normalise), whose argmax is no answer anyone takes."""
    first = np.asarray(ref[0])
    if first.dtype.kind != "f" or first.ndim < 2 or first.shape[-1] < 2:
        return None
    if _unit_rows(first):
        return None
    if first.ndim > 2:
        probs = np.all((first >= 0) & (first <= 1)) and np.allclose(first.sum(axis=-1), 1, atol=1e-3)
        if not probs:
            return None
    hits = total = 0
    for r, g in zip(ref, got, strict=True):
        ra, ga = np.asarray(r), np.asarray(g)
        if not np.isfinite(ra).all() or not np.isfinite(ga).all():
            return None
        hits += int(np.count_nonzero(ra.argmax(axis=-1) == ga.argmax(axis=-1)))
        total += int(np.prod(ra.shape[:-1]))
    return hits / total if total else None


def _unit_rows(x: npt.NDArray[Any]) -> bool:
    """Every row along the last axis has L2 norm 1 (and is not one-hot, as a sure probability is)."""
    if not np.isfinite(x).all():
        return False
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    norms = np.sqrt(np.square(rows).sum(axis=1))
    return bool(np.allclose(norms, 1.0, atol=1e-3) and (np.count_nonzero(np.abs(rows) > 1e-6, axis=1) > 1).all())
