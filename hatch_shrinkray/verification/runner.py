"""Does the shrunk model still compute what the original computes? Both models run in onnxruntime
on the same inputs with default session options (what users get); ``compare`` judges the outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.errors import RECORD_HINT, ShrinkrayError, one_line
from hatch_shrinkray.numerics.threads import NO_SPINNING
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import VerifyResult
from hatch_shrinkray.verification.compare import compare, unchecked
from hatch_shrinkray.verification.inputs import (
    Feed,
    InputSpec,
    Samples,
    describe_generated,
    expand_streams,
    generate,
    load_samples,
    specs_of,
    symbolic,
)
from hatch_shrinkray.verification.recordings import NoRecording, read_recording

RETRY_DIMS = (224, 16, 1)
"""Sizes for symbolic dimensions tried in turn when the model does not run on the plausible ones."""

ModelRef = str | os.PathLike[str] | bytes
Outputs = list[list[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Reference:
    """The original's side of a verification: the inputs and its outputs on them."""

    samples: Samples
    feeds: list[Feed]
    """What the verification runs on: every sample, or the held-out part when ``calibration`` is set."""
    outputs: Outputs
    names: list[str]
    calibration: list[Feed] | None
    """Real samples for data-dependent choices (auto, output-aware rounding), disjoint from ``feeds``;
    None without real inputs, or when there is only one real sample (nothing to hold out)."""
    unchecked: dict[str, str]


def session(model: ModelRef, label: str) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # failures are reported by us, in one line
    opts.add_session_config_entry(*NO_SPINNING)
    try:
        ref = model if isinstance(model, bytes) else str(model)
        return ort.InferenceSession(ref, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
        raise ShrinkrayError(f"onnxruntime cannot load it: {one_line(exc)}", path=label,
                             hint="the model needs ops or types onnxruntime's CPU provider lacks") from exc


def run_all(sess: Any, feeds: list[Feed]) -> Outputs:
    return [list(sess.run(None, feed)) for feed in feeds]


def model_sha256(model: ModelRef) -> str:
    """The sha256 recordings are filed under: of the bytes a session is given (the model file)."""
    if isinstance(model, bytes):
        return hashlib.sha256(model).hexdigest()
    digest = hashlib.sha256()
    with open(model, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Prepared:
    """Real samples loaded before the original's session exists, split for a data-dependent method."""

    samples: Samples
    calibration: list[Feed] | None
    feeds: list[Feed]


def prepare_samples(path: Path, specs: list[InputSpec], *, sha256: str, name: str, split: bool,
                    original: ModelRef | None = None, opened: Any = None) -> Prepared:
    """Load real samples and, with ``split``, hold part out (None as calibration when only one sample).

    Streams of a recurrent model are recorded without their fed-back inputs; they are filled in by
    running the original (``opened``, else a session of ``original``) step by step on its own state,
    so every feed downstream is complete. Raises ``NoRecording`` when a recording directory holds
    nothing for this model."""
    samples = load_samples(path, specs, model_sha256=sha256, model_name=name)
    if samples.partial:
        samples = complete(samples, original, name, opened)
    calibration, feeds = samples.split() if split and len(samples.feeds) > 1 else (None, samples.feeds)
    return Prepared(samples, calibration, feeds)


def complete(samples: Samples, original: ModelRef | None, label: str, opened: Any = None) -> Samples:
    """``samples`` with the fed-back inputs of every stream computed by the original (open loop)."""
    if opened is None and original is None:
        raise ShrinkrayError("the recording holds streams of a recurrent model, and the original model is needed to "
                             "compute their fed-back inputs", path=label)
    sess = opened if opened is not None else session(original, label)  # type: ignore[arg-type]
    names = [o.name for o in sess.get_outputs()]
    try:
        return expand_streams(samples, lambda feed: dict(zip(names, sess.run(None, feed), strict=True)))
    except Exception as exc:
        raise ShrinkrayError(f"the original model fails on the recorded streams: {one_line(exc)}", path=label,
                             hint=f"check the arrays in {samples.source}") from exc


def recorded_feeds(path: Path, model: ModelRef, label: str) -> list[Feed]:
    """Every feed of the recording at ``path`` complete (streams filled in by ``model``)."""
    rec = read_recording(path)
    samples = Samples([dict(s) for s in rec.samples], str(path), True, (), rec.units, rec.feedback, rec.streams)
    return complete(samples, model, label).feeds if samples.partial else samples.feeds


def _missing_note(exc: NoRecording) -> str:
    return (f"{exc.path} holds no recording of this model: verified on generated inputs instead, a smoke check "
            f"(record it: run the code that uses it under `hatch-shrinkray record --output {exc.path} -- COMMAND`)")


def reference_outputs(original: ModelRef, label: str, options: VerifyOptions, *, split: bool = False,
                      sha256: str | None = None, name: str | None = None,
                      prepared: Prepared | None = None) -> Reference:
    """Inputs and the original's outputs; the original session is released before returning
    so two big models are never resident at once. ``split``: hold out part of real samples for the
    verification and return the rest as calibration data; ``prepared``: samples already loaded."""
    sess = session(original, label)
    try:
        specs = specs_of(sess)
        names = [o.name for o in sess.get_outputs()]
    except Exception as exc:  # e.g. UnicodeDecodeError for a name that is not UTF-8
        raise ShrinkrayError(f"onnxruntime cannot read its inputs and outputs: {one_line(exc)}", path=label,
                             hint="re-export the model") from exc
    notes: tuple[str, ...] = ()
    if options.inputs is not None and prepared is None:
        try:
            prepared = prepare_samples(Path(options.inputs), specs, sha256=sha256 or model_sha256(original),
                                       name=name or label, split=split, opened=sess)
        except NoRecording as exc:  # data-free: generated inputs, and a warning that says so
            notes = (_missing_note(exc),)
    if prepared is not None:
        samples, calibration, feeds = prepared.samples, prepared.calibration, prepared.feeds
        try:
            outputs = run_all(sess, feeds)
        except Exception as exc:
            raise ShrinkrayError(f"the original model fails on the sample inputs: {one_line(exc)}",
                                 path=label, hint=f"check the arrays in {samples.source}") from exc
        return _checked(Reference(samples, feeds, outputs, names, calibration, {}), label)
    tried: list[str] = []
    candidates: list[int | None] = [None]
    if symbolic(specs, options):
        candidates += [d for d in RETRY_DIMS if d != options.default_dim]
    for dim in candidates:
        feeds = generate(specs, options, dim)
        try:
            outputs = run_all(sess, feeds)
        except Exception as exc:
            tried.append(one_line(exc))
            continue
        samples = Samples(feeds, describe_generated(specs, options, dim), False, notes)
        return _checked(Reference(samples, feeds, outputs, names, None, {}), label)
    raise ShrinkrayError("the original model does not run on generated inputs (" + tried[0] + ")",
                         path=label, hint=f"{RECORD_HINT}, or set `dims` for the symbolic dimensions")


def _checked(ref: Reference, label: str) -> Reference:
    """``ref`` with the outputs that cannot show a difference noted; refused when none can."""
    why = {n: w for i, n in enumerate(ref.names) if (w := unchecked([o[i] for o in ref.outputs]))}
    if why and len(why) == len(ref.names):
        listed = "; ".join(f"{n} is {w}" for n, w in why.items())
        raise ShrinkrayError(f"on {ref.samples.source} the original's outputs check nothing ({listed})",
                             path=label, hint="verify on inputs that make the model compute something: "
                             + RECORD_HINT)
    return Reference(ref.samples, ref.feeds, ref.outputs, ref.names, ref.calibration, why)


def verify_against(reference: Reference, shrunk: ModelRef, label: str, options: VerifyOptions,
                   checker: str = "full") -> VerifyResult:
    sess = session(shrunk, label)
    try:
        got = run_all(sess, reference.feeds)
    except Exception as exc:
        raise ShrinkrayError(f"the shrunk model fails to run: {one_line(exc)}", path=label,
                             hint="please report this as a bug; use method fp16 meanwhile") from exc
    comparisons = tuple(
        dataclasses.replace(compare(n, [o[i] for o in reference.outputs], [o[i] for o in got], options),
                            unchecked=reference.unchecked.get(n, ""))
        for i, n in enumerate(reference.names))
    calibrated = len(reference.calibration) if reference.calibration is not None else 0
    return VerifyResult(comparisons, len(reference.feeds), reference.samples.source, checker,
                        reference.samples.real, calibrated, reference.samples.notes)


def verify(original: ModelRef | ModelProto, shrunk: ModelRef | ModelProto,
           options: VerifyOptions | None = None) -> VerifyResult:
    """Compare two models' outputs (paths, serialized bytes or ModelProtos); also runs onnx.checker
    on ``shrunk``. Raises ShrinkrayError when either model cannot be loaded or run."""

    if isinstance(original, ModelProto):
        original = original.SerializeToString()
    if isinstance(shrunk, ModelProto):
        shrunk = shrunk.SerializeToString()
    options = options or VerifyOptions()
    label = "<shrunk>" if isinstance(shrunk, bytes) else str(shrunk)
    checker = "full"
    try:
        _check(shrunk, full=True)
    except Exception as exc:
        # As when shrinking: a model that only passes the basic check (sparse initializers fail
        # the full one) is held to the check its original passes.
        checker = checker_level(original)
        if checker == "full":
            raise ShrinkrayError(f"onnx.checker rejects it: {one_line(exc)}", path=label) from exc
        try:
            _check(shrunk, full=False)
        except Exception as basic_exc:
            raise ShrinkrayError(f"onnx.checker rejects it: {one_line(basic_exc)}", path=label) from basic_exc
    ref = reference_outputs(original, "<original>" if isinstance(original, bytes) else str(original), options)
    return verify_against(ref, shrunk, label, options, checker)


def checker_level(original: ModelProto | ModelRef) -> str:
    """The onnx.checker level a shrunk model is held to: ``full`` when ``original`` passes the full
    check, else ``basic (...)`` with the reason (sparse initializers, for one, fail it)."""
    try:
        _check(original, full=True)
    except Exception as exc:
        return f"basic (the original fails the full check: {one_line(exc)})"
    return "full"


def _check(model: ModelProto | ModelRef, *, full: bool) -> None:
    import onnx

    if isinstance(model, bytes):
        model = onnx.load_from_string(model)
    onnx.checker.check_model(model if isinstance(model, ModelProto) else str(model), full_check=full)
