"""``shrink``: load -> refuse re-quantization -> dedup -> encode -> check -> write -> verify -> rename.

The destination only appears once the shrunk model passed onnx.checker and the output comparison,
so nothing that failed verification ever lands where a build would pick it up.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import onnx
from onnx import ModelProto

from hatch_shrinkray.errors import AlreadyQuantizedError, ShrinkrayError, VerificationError, one_line
from hatch_shrinkray.methods import runtimes
from hatch_shrinkray.onnxgraph.graph import find_sites, scopes
from hatch_shrinkray.onnxgraph.modelio import Loaded, Staged, fits_one_file, load_model
from hatch_shrinkray.options import ShrinkOptions, option_errors
from hatch_shrinkray.registry import METHODS, Dedup
from hatch_shrinkray.result import ShrinkResult, TensorRecord, VerifyResult
from hatch_shrinkray.verification.runner import reference_outputs, verify_against

QUANTIZED_OPS = {"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                 "ConvInteger", "QLinearConv", "QLinearMatMul", "MatMulNBits", "GatherBlockQuantized",
                 "DynamicQuantizeMatMul", "DynamicQuantizeLSTM", "QGemm", "MatMulIntegerToFloat"}
INT_CODES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16,
             onnx.TensorProto.UINT16, onnx.TensorProto.INT4, onnx.TensorProto.UINT4}
CODES_MIN = 1024


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
           options: ShrinkOptions | None = None) -> ShrinkResult:
    """Shrink ``source`` with ``options.method``, verify, and write ``destination`` atomically.

    Raises ShrinkrayError (or its subclasses AlreadyQuantizedError / VerificationError) for every
    user-facing problem. With ``destination=None`` nothing is written (the result still carries
    sizes and verification).
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
    records: list[TensorRecord] = []
    if options.dedup:
        records += Dedup().apply(work, options)
    records += METHODS[options.method].apply(work, options)
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
        if options.verify is not None:
            reference = reference_outputs(original_ref, loaded.label, options.verify)
            verification = verify_against(reference, shrunk_ref, loaded.label, options.verify, checker)
            if not verification.passed:
                v = options.verify
                raise VerificationError(
                    f"shrunk model ({options.method}) differs too much from the original",
                    path=loaded.label, table=verification.table(
                        {"max rel L2": v.max_rel_l2, "min cosine": v.min_cosine, "min top-1": v.min_top1}),
                    hint="exclude the sensitive tensors (exclude-tensors / exclude-ops), use method fp16, "
                         "or loosen the tolerances")
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
