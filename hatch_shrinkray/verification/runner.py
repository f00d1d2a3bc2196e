"""Does the shrunk model still compute what the original computes? Checked with onnxruntime.

Both models run on the same inputs with default session options (what users get); every
output is compared by max abs error, relative L2, cosine similarity and, where it looks like
class scores, top-1 agreement. Non-finite outputs must match position by position.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.errors import ShrinkrayError, one_line
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import OutputComparison, VerifyResult
from hatch_shrinkray.verification.inputs import Feed, generate, load_npz, specs_of, symbolic

RETRY_DIMS = (32, 224)

ModelRef = str | os.PathLike[str] | bytes


def session(model: ModelRef, label: str) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # failures are reported by us, in one line
    try:
        ref = model if isinstance(model, bytes) else str(model)
        return ort.InferenceSession(ref, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
        raise ShrinkrayError(f"onnxruntime cannot load it: {one_line(exc)}", path=label,
                             hint="the model needs ops or types onnxruntime's CPU provider lacks") from exc


def run_all(sess: Any, feeds: list[Feed]) -> list[list[npt.NDArray[Any]]]:
    return [list(sess.run(None, feed)) for feed in feeds]


def reference_outputs(original: ModelRef, label: str, options: VerifyOptions
                      ) -> tuple[list[Feed], list[list[npt.NDArray[Any]]], list[str], str]:
    """Inputs and the original's outputs; the original session is released before returning
    so two big models are never resident at once."""
    sess = session(original, label)
    try:
        specs = specs_of(sess)
        names = [o.name for o in sess.get_outputs()]
    except Exception as exc:  # e.g. UnicodeDecodeError for a name that is not UTF-8
        raise ShrinkrayError(f"onnxruntime cannot read its inputs and outputs: {one_line(exc)}", path=label,
                             hint="re-export the model") from exc
    if options.inputs is not None:
        feeds = load_npz(Path(options.inputs), specs)
        source = str(options.inputs)
        try:
            return feeds, run_all(sess, feeds), names, source
        except Exception as exc:
            raise ShrinkrayError(f"the original model fails on the sample inputs: {one_line(exc)}",
                                 path=label, hint=f"check the arrays in {options.inputs}") from exc
    tried: list[str] = []
    candidates: list[int | None] = [None]
    if symbolic(specs, options):
        candidates += [d for d in RETRY_DIMS if d != options.default_dim]
    for dim in candidates:
        feeds = generate(specs, options, dim)
        try:
            outputs = run_all(sess, feeds)
        except Exception as exc:
            tried.append(f"{dim or options.default_dim}: {one_line(exc)}")
            continue
        named = "".join(f"{k}={v}, " for k, v in options.dims)
        source = f"generated (seed {options.seed}; symbolic dims {named}others={dim or options.default_dim})"
        return feeds, outputs, names, source
    raise ShrinkrayError("the original model does not run on generated inputs (" + tried[0] + ")",
                         path=label, hint="provide real sample inputs with `inputs` (a .npz) or set "
                         "`dims` for the symbolic dimensions")


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


def verify_against(reference: tuple[list[Feed], list[list[npt.NDArray[Any]]], list[str], str],
                   shrunk: ModelRef, label: str, options: VerifyOptions, checker: str = "full") -> VerifyResult:
    feeds, ref_out, names, source = reference
    sess = session(shrunk, label)
    try:
        got = run_all(sess, feeds)
    except Exception as exc:
        raise ShrinkrayError(f"the shrunk model fails to run: {one_line(exc)}", path=label,
                             hint="please report this as a bug; use method fp16 meanwhile") from exc
    comparisons = tuple(compare(n, [o[i] for o in ref_out], [o[i] for o in got], options)
                        for i, n in enumerate(names))
    return VerifyResult(comparisons, len(feeds), source, checker)


def verify(original: ModelRef | ModelProto, shrunk: ModelRef | ModelProto,
           options: VerifyOptions | None = None) -> VerifyResult:
    """Compare two models' outputs (paths, serialized bytes or ModelProtos); also runs onnx.checker
    on ``shrunk``. Raises ShrinkrayError when either model cannot be loaded or run."""
    import onnx

    if isinstance(original, ModelProto):
        original = original.SerializeToString()
    if isinstance(shrunk, ModelProto):
        shrunk = shrunk.SerializeToString()
    options = options or VerifyOptions()
    label = "<shrunk>" if isinstance(shrunk, bytes) else str(shrunk)
    try:
        if isinstance(shrunk, bytes):
            onnx.checker.check_model(onnx.load_from_string(shrunk), full_check=True)
        else:
            onnx.checker.check_model(str(shrunk), full_check=True)
    except Exception as exc:
        raise ShrinkrayError(f"onnx.checker rejects it: {one_line(exc)}", path=label) from exc
    ref = reference_outputs(original, "<original>" if isinstance(original, bytes) else str(original), options)
    return verify_against(ref, shrunk, label, options)
