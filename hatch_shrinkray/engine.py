"""``shrink``: load -> refuse re-quantization -> dedup -> encode -> check -> write -> verify -> rename.

The destination only appears once the shrunk model passed onnx.checker and the output comparison,
so nothing that failed verification ever lands where a build would pick it up.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from pathlib import Path

import onnx
from onnx import ModelProto

from hatch_shrinkray.auto.choices import encode_chosen
from hatch_shrinkray.auto.method import needs_real_inputs
from hatch_shrinkray.auto.sensitivity import keep_hint, rank
from hatch_shrinkray.errors import (
    CHECK_HINT,
    RECORD_HINT,
    AlreadyQuantizedError,
    ShrinkrayError,
    VerificationError,
    one_line,
)
from hatch_shrinkray.methods import runtimes
from hatch_shrinkray.onnxgraph.graph import find_sites, scopes
from hatch_shrinkray.onnxgraph.modelio import Loaded, Staged, fits_one_file, load_model
from hatch_shrinkray.options import ShrinkOptions, option_errors
from hatch_shrinkray.registry import METHODS, Dedup
from hatch_shrinkray.result import ShrinkResult, TensorRecord, VerifyResult
from hatch_shrinkray.verification.inputs import Feed
from hatch_shrinkray.verification.runner import Reference, reference_outputs, verify_against

QUANTIZED_OPS = {"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                 "ConvInteger", "QLinearConv", "QLinearMatMul", "MatMulNBits", "GatherBlockQuantized",
                 "DynamicQuantizeMatMul", "DynamicQuantizeLSTM", "QGemm", "MatMulIntegerToFloat"}
INT_CODES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16,
             onnx.TensorProto.UINT16, onnx.TensorProto.INT4, onnx.TensorProto.UINT4}
CODES_MIN = 1024
HINT_MAX_BYTES = 1 << 30
"""Above this the failure hint does not measure tensors (it would hold the model twice in memory)."""


def quantization_signs(model: ModelProto) -> str | None:
    """Why ``model`` looks already quantized (QDQ/integer ops, or a Cast of integer weight codes)."""
    for scope in scopes(model):
        for node in scope.graph.node:
            if node.op_type in QUANTIZED_OPS:
                return f"it contains {node.op_type} nodes"
    codes = {s.name for s in find_sites(model) if s.dtype in INT_CODES and s.size >= CODES_MIN}
    for scope in scopes(model):
        for node in scope.graph.node:
            if node.op_type == "Cast" and node.input and node.input[0] in codes:
                return f"integer weight codes are cast to float ({node.input[0]})"
    return None


def shrink(source: str | os.PathLike[str] | ModelProto, destination: str | os.PathLike[str] | None = None,
           options: ShrinkOptions | None = None, *, keep_failed: bool = False) -> ShrinkResult:
    """Shrink ``source`` with ``options.method``, verify, and write ``destination`` atomically.

    Raises ShrinkrayError (or its subclasses AlreadyQuantizedError / VerificationError) for every
    user-facing problem. With ``destination=None`` nothing is written (the result still carries
    sizes and verification). ``keep_failed`` writes a model that fails verification too, with the
    failed figures in its result: for ``check``, which lets the package's own tests judge it and
    never ships it.
    """
    options = options or ShrinkOptions()
    problems = option_errors(options)
    if problems:
        raise ShrinkrayError("invalid options: " + "; ".join(problems))
    start = time.perf_counter()
    loaded = load_model(source)
    signs = quantization_signs(loaded.model)
    if signs:
        raise AlreadyQuantizedError(f"already quantized: {signs}", path=loaded.label,
                                    hint="shrinking it again would compound the error; ship it as is")
    runtimes.check(loaded.model, options.method, options.decode, options.runtimes, loaded.label)
    checker = _check_input(loaded)
    original_ref = _reference_source(loaded, source)
    work = loaded.model
    method = METHODS[options.method]
    reference, calibration, notes = _reference(original_ref, loaded.label, options, method.calibrates(options))
    records: list[TensorRecord] = []
    if options.dedup:
        records += Dedup().apply(work, options)
    chosen, stored = encode_chosen(work, options)
    if stored:  # what the chosen encodings stored is not the method's to encode again
        method_options = dataclasses.replace(
            options, exclude_tensors=(*options.exclude_tensors, *(glob.escape(n) for n in sorted(stored))))
        mine = {(c.scope, c.name) for c in chosen}
        records += [r for r in method.apply(work, method_options, calibration)
                    if r.name not in stored and (r.scope, r.name) not in mine]
    else:
        records += method.apply(work, options, calibration)
    records += chosen
    dest = Path(destination) if destination is not None else None
    staged: Staged | None = None
    extra: tuple[Path, ...] = ()
    try:
        if dest is not None:
            staged = Staged(work, dest)
            shrunk_ref: str | bytes = str(staged.path)
            size = staged.size
            # Protos over 2 GB cannot be serialized for the checker: check the staged files instead.
            _check_output(str(staged.path) if staged.data_files else work, loaded.label, checker)
        else:
            if not fits_one_file(work):
                raise ShrinkrayError("the shrunk model is over 2 GB and can only be written to a file",
                                     path=loaded.label, hint="pass a destination path")
            _check_output(work, loaded.label, checker)
            shrunk_ref = work.SerializeToString()
            size = len(shrunk_ref)
        del work  # the working copy can be big; onnxruntime reads the staged file from here on
        loaded.model = ModelProto()
        verification: VerifyResult | None = None
        if options.verify is not None and reference is not None:
            verification = verify_against(reference, shrunk_ref, loaded.label, options.verify, checker)
            verification = dataclasses.replace(verification, notes=verification.notes + notes)
            if not verification.passed and not keep_failed:
                v = options.verify
                hint = _failure_hint(original_ref, options, reference)
                if not verification.real:
                    hint = f"this ran on generated inputs, which prove little either way: {RECORD_HINT}; or {hint}"
                raise VerificationError(
                    f"shrunk model ({options.method}) differs too much from the original on {verification.basis()}",
                    path=loaded.label, table=verification.table(
                        {"max rel L2": v.max_rel_l2, "min cosine": v.min_cosine, "min agreement": v.min_top1}),
                    hint=hint)
        if staged is not None:
            extra = staged.commit()
    finally:
        if staged is not None:
            staged.discard()
    return ShrinkResult(
        source=loaded.label, destination=None if dest is None else str(dest), method=options.method,
        original_size=loaded.size, shrunk_size=size, tensors=tuple(records),
        seconds=time.perf_counter() - start, verification=verification, options=options.describe(),
        external_data=tuple(p.name for p in extra))


def _failure_hint(original: str | bytes, options: ShrinkOptions, reference: Reference) -> str:
    """Which tensors to keep, measured one at a time on the verification inputs; the generic advice
    where that cannot be measured (no eligible float32 weight, a model too big to probe again)."""
    generic = "exclude the sensitive tensors (exclude-tensors / exclude-ops) or use method fp16"
    if isinstance(original, str) and os.path.getsize(original) > HINT_MAX_BYTES:
        return generic
    try:
        model = load_model(original if isinstance(original, str) else onnx.load_from_string(original)).model
        if options.dedup:
            Dedup().apply(model, options)
        found = keep_hint(rank(model, options, [*(reference.calibration or []), *reference.feeds]))
    except (ShrinkrayError, MemoryError):
        return generic
    return f"{found}; or let your tests judge: {CHECK_HINT}" if found else generic


def _reference(original: str | bytes, label: str, options: ShrinkOptions,
               calibrates: bool) -> tuple[Reference | None, list[Feed] | None, tuple[str, ...]]:
    """The original's outputs on the verification inputs, the real samples held out from them for a
    data-dependent method, and notes on what that method had to do without."""
    needs_data = options.method == "auto"
    if options.verify is None:
        if needs_data:
            raise needs_real_inputs(options.method)
        return None, None, ()
    reference = reference_outputs(original, label, options.verify, split=calibrates)
    if not calibrates or reference.calibration is not None:
        return reference, reference.calibration, ()
    if not reference.samples.real:
        if needs_data:
            raise needs_real_inputs(options.method)
        return reference, None, ()
    if needs_data:
        raise ShrinkrayError(f"method {options.method} needs at least 2 real samples (one to fit, one to verify on); "
                             f"{reference.samples.source} has 1", path=label,
                             hint="record more: hatch-shrinkray record keeps up to 32 calls per model by default")
    return reference, None, ("1 real sample: nothing to hold out, so round-to-nearest (no output-aware rounding)",)


def _reference_source(loaded: Loaded, source: str | os.PathLike[str] | ModelProto) -> str | bytes:
    if loaded.path is not None:
        return str(loaded.path)
    assert isinstance(source, ModelProto)
    return bytes(loaded.model.SerializeToString())


def _check_input(loaded: Loaded) -> str:
    """Reject what onnx.checker rejects; note when only the basic check passes.

    Models with external data are checked from their file: a loaded proto over 2 GB cannot be
    serialized for the checker.
    """
    model: ModelProto | str = str(loaded.path) if loaded.data_files else loaded.model
    try:
        onnx.checker.check_model(model, full_check=False)
    except Exception as exc:
        raise ShrinkrayError(f"onnx.checker rejects the model: {one_line(exc)}", path=loaded.label,
                             hint="fix or re-export the model") from exc
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        return f"basic (the original fails the full check: {one_line(exc)})"
    return "full"


def _check_output(model: ModelProto | str, label: str, checker: str) -> None:
    try:
        onnx.checker.check_model(model, full_check=checker == "full")
    except Exception as exc:
        raise ShrinkrayError(f"the shrunk model fails onnx.checker: {one_line(exc)}", path=label,
                             hint="please report this as a bug; use exclude-tensors or method fp16 meanwhile") from exc
