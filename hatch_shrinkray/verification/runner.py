"""Does the shrunk model still compute what the original computes? Both models run in onnxruntime
on the same inputs with default session options (what users get); ``compare`` judges the outputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.errors import ShrinkrayError, one_line
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import VerifyResult
from hatch_shrinkray.verification.compare import compare
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
