"""``shrink``: load -> refuse re-quantization -> dedup -> encode -> check -> write -> verify -> rename.

The destination only appears once the shrunk model passed onnx.checker and the output comparison,
so nothing that failed verification ever lands where a build would pick it up; a result that is not
smaller, or that generated inputs cannot verify, is never written (the original is), and a source
rewritten while it was being shrunk is refused (verification would have compared against another
file).
"""

from __future__ import annotations

import gc
import glob
import hashlib
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto

from hatch_shrinkray import progress, sizes
from hatch_shrinkray.errors import (
    AlreadyQuantizedError,
    PlanError,
    ShrinkrayError,
    VerificationError,
    one_line,
    quoted,
)
from hatch_shrinkray.evidence import MIN_UNITS, unit_kind
from hatch_shrinkray.files import temporary_directory
from hatch_shrinkray.fitting.calibrate import needs_real_inputs
from hatch_shrinkray.fitting.choices import encode_chosen
from hatch_shrinkray.fitting.guard import Scorer, Unfitted, Verdict
from hatch_shrinkray.fitting.sensitivity import keep_hint, rank
from hatch_shrinkray.hints import check_hint, in_project, key, record_hint, setting
from hatch_shrinkray.numerics.threads import one_blas_thread
from hatch_shrinkray.onnxgraph.graph import FLOAT_TYPES, find_sites, quantization_signs, scopes
from hatch_shrinkray.onnxgraph.hazards import refuse_miscompiled
from hatch_shrinkray.onnxgraph.modelio import Loaded, Staged, changed_file, fits_one_file, load_model
from hatch_shrinkray.option_table import option_errors
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.pool import Background
from hatch_shrinkray.recording.matching import NoRecording
from hatch_shrinkray.registry import METHODS, NEAREST_INT8, Dedup, Needs, check_runtimes, ladder
from hatch_shrinkray.result import Fit, FitNote, FitReason, TensorRecord, VerifyResult, human
from hatch_shrinkray.samples import Calibration
from hatch_shrinkray.shrink_result import Failed, KeptFloat, ShrinkResult, kept_reason
from hatch_shrinkray.signals import deferred
from hatch_shrinkray.verdict import kind
from hatch_shrinkray.verification import memory
from hatch_shrinkray.verification.inputs import GeneratedUnusable, specs_of_model
from hatch_shrinkray.verification.runner import (
    Prepared,
    Reference,
    checker_level,
    prepare_samples,
    reference_outputs,
    verify_against,
)
from hatch_shrinkray.verification.silence import silent_outputs

HINT_MAX_BYTES = 1 << 30
"""Above this the failure hint does not measure tensors (it would hold the model twice in memory)."""


def shrink(source: str | os.PathLike[str] | ModelProto, destination: str | os.PathLike[str] | None = None,
           options: ShrinkOptions | None = None, *, keep_failed: bool = False, exact_web: bool = False) -> ShrinkResult:
    """Shrink ``source`` with ``options.method``, verify, and write ``destination`` atomically.

    Raises ShrinkrayError (or its subclasses AlreadyQuantizedError / VerificationError) for every
    user-facing problem. With ``destination=None`` nothing is written (the result still carries
    sizes and verification). A shrunk model that would not be smaller than the original is not
    written: the original is, and ``kept_original`` says why. Nor is one that generated inputs cannot
    verify (it fails on them, the original's outputs carry no signal there, or the original does not
    run on them): the original is written, with ``unverified`` set, unless ``options.strict``, which
    raises instead.

    A choice that fails its limits on real inputs, or that is ``floored`` and changes more whole
    answers than round-to-nearest int8 on them, falls back along its ladder (``registry.ladder``:
    round-to-nearest, fp16, the original) to the first that holds; the result says which failed and
    why (``fell_back``). ``options.strict`` raises instead; with ``keep_failed`` too, the failing model
    is written with the failed figures in its result: for ``check``, which lets the package's own
    tests judge it and never ships it.

    "Smaller" is in the bytes ``options.target`` counts (``sizes``); the result carries the raw,
    wheel and web sizes of both models, web measured (brotli 11) with ``exact_web``, else estimated;
    target ``web`` measures the shrunk model's only where the two estimates are close enough for
    their error to decide which ships (``sizes.clearly_apart``), and then the original's only where
    its estimate still cannot settle the never-larger rule (``sizes.clearly_below``).
    """
    options = options or ShrinkOptions()
    problems = option_errors(options)
    if problems:
        raise ShrinkrayError("invalid options: " + "; ".join(problems))
    name = "the model" if isinstance(source, ModelProto) else Path(source).name
    failed: list[Failed] = []
    with progress.task(f"{name}: {options.method}") as stage:
        for remedy in (None, *ladder(options)):
            choice = options if remedy is None else remedy.apply(options)
            label = options.label() if remedy is None else remedy.describe(options)
            if remedy is not None and remedy.original:
                return _original_result(source, destination, options, failed, exact_web=exact_web)
            if failed:
                stage.show(f"falling back to {label}")
            try:
                result = _shrink(source, destination, choice, keep_failed=keep_failed, exact_web=exact_web,
                                 stage=stage)
            except LimitsFailed as exc:
                if options.strict or not exc.recorded:
                    raise
                failed.append(Failed(label, exc.why))
                continue
            return replace(result, label=label, fell_back=tuple(failed))
    raise AssertionError("the ladder ends with the original")  # pragma: no cover


def _original_result(source: str | os.PathLike[str] | ModelProto, destination: str | os.PathLike[str] | None,
                     options: ShrinkOptions, failed: list[Failed], *, exact_web: bool) -> ShrinkResult:
    """The original written in the shrunk model's place: every choice on the ladder failed its limits on
    the recording (``kept_original`` names them)."""
    start = time.perf_counter()
    loaded = load_model(source)
    output = _write(loaded.model, None if destination is None else Path(destination), loaded.label,
                    checker_level(loaded.model))
    try:
        extra = output.commit()
    finally:
        output.discard()
    files = output.files() if destination is None else [Path(destination), *extra]
    measured = sizes.measure(files, exact_web=exact_web)
    tried = ", ".join(f.label for f in failed)
    return ShrinkResult(
        source=loaded.label, destination=None if destination is None else str(destination), method=options.method,
        original_size=loaded.size, shrunk_size=loaded.size, tensors=(), seconds=time.perf_counter() - start,
        verification=None, options=options.describe(), external_data=tuple(p.name for p in extra),
        kept_original=f"{tried} failed the limits on the recording ({failed[0].label}: {failed[0].why})",
        source_sha256=dict(loaded.sha256), original_sizes=measured, shrunk_sizes=measured, fell_back=tuple(failed),
        label="the original")


def _shrink(source: str | os.PathLike[str] | ModelProto, destination: str | os.PathLike[str] | None,
            options: ShrinkOptions, *, keep_failed: bool, exact_web: bool, stage: progress.Step) -> ShrinkResult:
    stage.show("loading")
    shrunk_web = exact_web or options.target == "web"
    if shrunk_web and sizes.brotli_problem():
        raise ShrinkrayError(f"target web counts brotli quality 11 bytes, and {sizes.brotli_problem()}",
                             hint=sizes.BROTLI_HINT)
    start = time.perf_counter()
    loaded = load_model(source)
    checker = _check_source(loaded, options)
    job = _Job(source, loaded, _reference_source(loaded, source), None if destination is None else Path(destination),
               options, checker, exact_web, stage)
    small, weight_bytes = _census(loaded.model, options)
    overridable = _overridable(loaded.model, options)
    needs = METHODS[options.method].needs(options)
    stage.show("reading the samples")
    prepared, unfitted = _calibration(loaded, job.original_ref, options, needs)
    # The original's sizes, meanwhile: compressing it (seconds for a small model, far longer at
    # brotli 11, which target web alone leaves to `_settled`) runs in the gaps the encoding leaves.
    original_files = _files(loaded, job.original_ref)
    original_sizes_job = Background(lambda: sizes.measure(original_files, exact_web=exact_web))
    stage.show("encoding")
    calibration = prepared.calibration if prepared is not None else None
    with one_blas_thread():
        held = prepared.held_out if prepared is not None else None
        early = _early_reference(loaded, job.original_ref, options, prepared, held, needs=needs)
        original = Scorer(early.judged, early.seq) if early is not None else None
        records, outcome = _encode(loaded.model, options, calibration, held, loaded.label, original=original)
    fitting: Verdict | None = outcome if outcome is not None else unfitted
    done = _write_and_verify(job, records, original_sizes_job, overridable, prepared=prepared, fitting=fitting,
                             keep_failed=keep_failed, early=early)
    return ShrinkResult(
        source=loaded.label, destination=None if job.dest is None else str(job.dest), method=options.method,
        original_size=loaded.size, shrunk_size=done.output.size, tensors=tuple(done.records),
        seconds=time.perf_counter() - start, verification=done.verification, options=options.describe(),
        external_data=tuple(p.name for p in done.extra), kept_original=done.kept_original,
        unverified=done.unverified, kept_float=_kept_float(small, records, options.min_elements),
        not_weights=max(0, loaded.size - weight_bytes), source_sha256=dict(loaded.sha256),
        original_sizes=done.original_sizes, shrunk_sizes=done.shrunk_sizes)


@dataclass
class _Job:
    """One shrink: its source, where it goes, and what every step after the encoding reads."""

    source: str | os.PathLike[str] | ModelProto
    loaded: Loaded
    original_ref: str | bytes
    dest: Path | None
    options: ShrinkOptions
    checker: str
    exact_web: bool
    """``--sizes``: brotli 11 measures both models' web bytes, whatever the estimates say."""
    stage: progress.Step


@dataclass
class _Done:
    """What was written (the shrunk model, or the original in its place) and what was found out."""

    output: Output
    records: list[TensorRecord]
    original_sizes: sizes.Sizes
    shrunk_sizes: sizes.Sizes
    kept_original: str | None
    unverified: bool
    verification: VerifyResult | None
    extra: tuple[Path, ...]


def _check_source(loaded: Loaded, options: ShrinkOptions) -> str:
    """Refuse what cannot be shrunk as asked, before any work; the checker level the output gets."""
    signs = quantization_signs(loaded.model)
    if signs:
        raise AlreadyQuantizedError(f"already quantized: {signs}", path=loaded.label,
                                    hint="shrinking it again would compound the error; ship it as is")
    check_runtimes(loaded.model, options.method, options.decode, options.runtimes, loaded.label)
    _check_plan(loaded, options)
    return _check_input(loaded)


def _write_and_verify(job: _Job, records: list[TensorRecord], original_sizes_job: Background[sizes.Sizes],
                      overridable: str, *, prepared: Prepared | None, fitting: Verdict | None, keep_failed: bool,
                      early: Reference | None) -> _Done:
    """Stage the encoded model (``job.loaded.model``), measure and verify it, and commit it or the
    original in its place; nothing staged survives a failure."""
    loaded, options, stage = job.loaded, job.options, job.stage
    output: Output | None = None
    kept_original: str | None = None
    unverified = False
    verification: VerifyResult | None = None
    try:
        stage.show("writing and measuring")
        output = _write(loaded.model, job.dest, loaded.label, job.checker)
        shrunk_sizes, original_sizes = _sized(job, output.files(), original_sizes_job.result())
        encoded = any(r.encoding != "kept" for r in records)
        neutral = METHODS[options.method].size_neutral
        if encoded and not _smaller(shrunk_sizes, original_sizes, options.target, neutral):
            kept_original = _not_smaller(options, shrunk_sizes, original_sizes)
            output, records, shrunk_sizes = _original_instead(job, output, records)
        elif not encoded and overridable:  # nothing to verify: say why the weights stayed
            kept_original = overridable
        # The working copy can be big; onnxruntime reads the staged file from here on. Scopes point
        # at their parents and children, so the weight sites built while encoding hold it in
        # reference cycles: without a collection now it stayed resident through verification (with
        # every tensor it replaced: protobuf keeps them in the message's arena), twice the model's
        # size beside the original's session.
        feed = memory.feed_for(loaded.model, options.verify, prepared.samples.feeds if prepared else (),
                               sha256=next(iter(loaded.sha256.values()), ""), name=loaded.label) \
            if options.target == "memory" and kept_original is None else None
        loaded.model = ModelProto()
        gc.collect()
        if options.verify is not None and kept_original is None:
            stage.show("verifying")
            try:
                verification = _verify(loaded, job.original_ref, output, options, prepared=prepared,
                                       checker=job.checker, fitting=fitting, keep_failed=keep_failed,
                                       reference=early)
                if feed is not None:  # target memory: both footprints, measured in fresh processes
                    verification = memory.attach(verification, job.original_ref, output.ref, feed, records=records)
            except Unverifiable as exc:
                _refuse_if_changed(loaded, exc)
                kept_original, unverified = exc.reason, True
                output, records, shrunk_sizes = _original_instead(job, output, records)
            except ShrinkrayError as exc:
                _refuse_if_changed(loaded, exc)  # a file swapped mid-run explains any failure; say so
                raise
        _refuse_if_changed(loaded)
        extra = output.commit()
    finally:
        if output is not None:
            output.discard()
    return _Done(output, records, original_sizes, shrunk_sizes, kept_original, unverified, verification, extra)


def _sized(job: _Job, files: bytes | list[Path], original: sizes.Sizes) -> tuple[sizes.Sizes, sizes.Sizes]:
    """The shrunk model's sizes and the original's. Under target web (without ``--sizes``) the shrunk
    model's web bytes stay the LZMA estimate where both estimates are so far apart that no error of
    theirs could make the shrunk model the larger (``clearly_apart``): brotli 11, slow on weight data, would
    only print a figure that decides nothing (minutes on a large model); every report marks it."""
    if job.options.target != "web" or job.exact_web:  # nothing to settle: both estimated, or both measured
        return sizes.measure(files, exact_web=job.exact_web), original
    estimate = sizes.measure(files)
    if sizes.clearly_apart(estimate.web, original.web):
        return estimate, original
    shrunk = replace(estimate, web=sizes.web_bytes(files), web_estimated=False)
    return shrunk, _settled(original, shrunk, _files(job.loaded, job.original_ref))


def _settled(original: sizes.Sizes, shrunk: sizes.Sizes, files: bytes | list[Path]) -> sizes.Sizes:
    """The original's sizes with its web bytes measured where the shrunk model's are and the
    estimate could decide the never-larger rule (the shrunk model is not clearly below it); an
    estimate that cannot change the outcome stays one, and says so (``web_estimated``)."""
    if not original.web_estimated or shrunk.web_estimated or sizes.clearly_below(shrunk.web, original.web):
        return original
    return replace(original, web=sizes.web_bytes(files), web_estimated=False)


def _original_instead(job: _Job, staged: Output,
                      shrunk: list[TensorRecord]) -> tuple[Output, list[TensorRecord], sizes.Sizes]:
    """The original, staged in place of the shrunk model (it ships after all), with the records
    and sizes that say so."""
    staged.discard()
    again = _write(load_model(job.source).model, job.dest, job.loaded.label, job.checker)
    return again, _all_kept(shrunk), sizes.measure(again.files(), exact_web=job.exact_web)


def _reference(loaded: Loaded, original_ref: str | bytes, options: ShrinkOptions,
               prepared: Prepared | None) -> Reference:
    assert options.verify is not None
    try:
        return reference_outputs(original_ref, loaded.label, options.verify, prepared=prepared,
                                 rows=loaded.tables)
    except ShrinkrayError as exc:  # e.g. generated inputs too large for this model: name the model
        exc.path = exc.path or loaded.label
        raise


def _early_reference(loaded: Loaded, original_ref: str | bytes, options: ShrinkOptions,
                     prepared: Prepared | None, held: Calibration | None, *, needs: Needs) -> Reference | None:
    """The verification reference made before the encoding, for a method whose guard judges its
    fit on the same held-out feeds (``Needs.reference_first``): the original runs there once, not
    twice (running it on every feed is a large share of a build). Otherwise it is made after, with
    the working copy freed (``_verify``)."""
    ready = needs.reference_first and options.verify is not None and prepared is not None and bool(held)
    return _reference(loaded, original_ref, options, prepared) if ready else None


def _verify(loaded: Loaded, original_ref: str | bytes, output: Output, options: ShrinkOptions,
            *, prepared: Prepared | None, checker: str, fitting: Verdict | None,
            keep_failed: bool, reference: Reference | None = None) -> VerifyResult:
    """Run both models on the samples; a failure raises VerificationError with the hint that fits,
    and a model generated inputs cannot verify raises Unverifiable (unless ``strict``), with
    ``keep_failed`` too: ``check`` then judges what a build ships, the original."""
    assert options.verify is not None
    keep = not options.strict
    # Only now, with the working copy freed: the original's session and the model in memory
    # together peak at several times the model's size.
    try:
        reference = reference or _reference(loaded, original_ref, options, prepared)
    except GeneratedUnusable as exc:
        if keep:
            raise Unverifiable(exc.reason, path=loaded.label) from exc
        raise
    if not reference.samples.real:
        quiet = silent_outputs(reference.names, reference.outputs)
        if quiet and keep:
            raise Unverifiable(f"its outputs carry no signal on generated inputs ({quiet})", path=loaded.label)
        if quiet and options.strict:
            raise ShrinkrayError(f"on {reference.samples.source} the original's outputs carry no signal ({quiet}): "
                                 "nothing can tell the shrunk model from it", path=loaded.label,
                                 hint="verify on inputs that make the model compute something: " + record_hint())
    verification = verify_against(reference, output.ref, loaded.label, options.verify, checker)
    if fitting is not None:
        verification = replace(verification, fitting=fitting.text(), fit=fitting.brief())
    if not verification.passed and not verification.real and keep:
        failed = next(o for o in verification.outputs if not o.ok)
        raise Unverifiable(f"{options.label()} fails on {verification.basis()}: {failed.name} "
                           f"{failed.failures[0]}", path=loaded.label)
    kept = keep_failed and options.strict  # ``check`` under ``strict``: its tests judge what the build refuses
    v = options.verify
    if not verification.passed and not kept:
        hint = _failure_hint(original_ref, options, reference)
        if not verification.real:
            hint = f"this ran on generated inputs, which prove little either way: {record_hint()}\nor {hint}"
        strict = f"; {setting('strict', True)}: no fallback" if verification.real else ""
        raise LimitsFailed(
            f"failed: {options.label()} broke its limits on {verification.basis()}{strict}",
            path=loaded.label, table=verification.table(
                {"max rel L2": v.rel_l2_limit, "min cosine": v.cosine_limit, "min agreement": v.agreement_limit}),
            hint=hint, why=verification.breach(), recorded=verification.real)
    if verification.passed and verification.real and not kept and METHODS[options.method].floored(options):
        if _budgeted(options):
            below, floor = _beyond_budget(options, verification), "budget"
        else:
            below, floor = _below_floor(original_ref, loaded.label, options, reference, verification,
                                        checker=checker), "round-to-nearest"
        if below:
            raise LimitsFailed(f"failed: {options.label()} kept fewer answers than {FLOORS[floor]} on "
                               f"{verification.basis()} ({below}); {setting('strict', True)}: no fallback",
                               path=loaded.label, why=below, recorded=True,
                               hint=f"use round-to-nearest int8 ({setting('method', 'int8')}), or let your tests "
                                    f"judge: `{check_hint(fix=True)}`")
        verification = replace(verification, floor=floor)
    return verification


FLOORS = {"round-to-nearest": "int8 round-to-nearest", "budget": "your budget"}
"""What a narrower choice was held to, for the failure's words."""


def _budgeted(options: ShrinkOptions) -> bool:
    """Whether the user set an accuracy budget: below round-to-nearest int8's floor, then, is theirs to allow
    (decision 3)."""
    return any(b is not None for b in (options.budget_rel_l2, options.budget_cosine, options.budget_agreement))


def _beyond_budget(options: ShrinkOptions, verification: VerifyResult) -> str:
    """How a narrower choice went past the accuracy budget the user set, in a few words (empty: within it):
    the share of whole answers kept (``budget-agreement``), the worst relative L2 and cosine."""
    ev = verification.evidence
    if options.budget_agreement is not None and ev is not None and ev.units and \
            1 - ev.changed_units / ev.units < options.budget_agreement:
        return (f"{ev.changed_units} of {ev.units} {kind(ev.unit_kind)} changed, past budget-agreement "
                f"{options.budget_agreement:g}")
    if options.budget_rel_l2 is not None and verification.worst_rel_l2 > options.budget_rel_l2:
        return f"rel L2 {verification.worst_rel_l2:.3g} > budget-rel-l2 {options.budget_rel_l2:g}"
    if options.budget_cosine is not None and verification.worst_cosine < options.budget_cosine:
        return f"cosine {verification.worst_cosine:.6f} < budget-cosine {options.budget_cosine:g}"
    return ""


class LimitsFailed(VerificationError):
    """A choice failed its limits, or kept fewer whole answers than round-to-nearest int8 (decisions
    7-8); ``recorded``: on real inputs, where the model falls back along its ladder (``strict`` fails)."""

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None, table: str = "",
                 why: str = "", recorded: bool = True) -> None:
        super().__init__(message, path=path, hint=hint, table=table, why=why)
        self.recorded = recorded


def _below_floor(original_ref: str | bytes, label: str, options: ShrinkOptions, reference: Reference,
                 verification: VerifyResult, *, checker: str) -> str:
    """How a data-free choice narrower than int8 changed more whole answers (tests, texts, streams)
    than round-to-nearest int8 on the same units (decision 3), in a few words; empty when it did not.
    Round-to-nearest int8 is encoded and run only where the choice changed some answer."""
    ev = verification.evidence
    if ev is None or not ev.changed_units:
        return ""
    assert options.verify is not None
    floor = replace(NEAREST_INT8.apply(options), levels=None, scheme="symmetric", decode="float",
                    target=sizes.DEFAULT_TARGET)  # as every size target writes it: int8 float in memory
    model = load_model(original_ref if isinstance(original_ref, str) else onnx.load_from_string(original_ref)).model
    _encode(model, floor, None, None, label)
    with temporary_directory("floor") as tmp:
        output = _write(model, Path(tmp) / "floor.onnx", label, checker)
        del model
        try:
            int8 = verify_against(reference, output.ref, label, options.verify, checker).evidence
        finally:
            output.discard()
    if int8 is None or ev.changed_units <= int8.changed_units:
        return ""
    return f"{ev.changed_units} of {ev.units} {kind(ev.unit_kind)} changed, int8 round-to-nearest {int8.changed_units}"


class Unverifiable(ShrinkrayError):
    """Generated inputs cannot verify the shrunk model: it fails on them, the original's outputs
    carry no signal there, or the original does not run on them. Noise is not the model's input,
    so none of these proves anything about the shrunk model, and stopping the build for it made
    most first builds without a recording fail. The original ships instead, and the build says how
    to record inputs that can verify it; ``strict`` fails instead."""

    @property
    def reason(self) -> str:
        return self.message


def _all_kept(records: list[TensorRecord]) -> list[TensorRecord]:
    """The records when the original ships after all."""
    return [replace(r, encoding="kept", stored_bytes=r.original_bytes, note=f"original kept; {r.encoding}")
            if r.encoding != "kept" else r for r in records]


def _check_plan(loaded: Loaded, options: ShrinkOptions) -> None:
    """A plan is found for one model's bytes and names its tensors exactly; one naming a tensor the
    model does not have was edited or made for another model, and would be applied in part."""
    if not options.plan:
        return
    sites = {(s.scope.path, s.name) for s in find_sites(loaded.model)}
    missing = [(scope, name) for scope, name, _ in options.plan if (scope, name) not in sites]
    if missing:
        scope, name = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise PlanError(f"the plan names tensor {quoted(name)} in {quoted(scope)}{more}, which the model does not "
                        "have", path=loaded.label,
                        hint=f"the plan was edited or made for another model; find one again with `{check_hint()}`, "
                             "or delete its entry")


def _refuse_if_changed(loaded: Loaded, cause: BaseException | None = None) -> None:
    """Refuse to write anything when the source (or a data file) changed since it was read: what
    was shrunk, verified and compared would then not be the file named."""
    changed = changed_file(loaded)
    if changed is not None:
        what = "" if changed == loaded.label else f" (its data file {quoted(Path(changed).name)})"
        raise ShrinkrayError(f"changed while it was being shrunk{what}; nothing was written", path=loaded.label,
                             hint="wait until the model is completely written, then run again") from cause


TARGET_WORDS = {"wheel": "the wheel", "web": "the web download", "disk": "on disk", "memory": "the wheel"}


def _smaller(shrunk: sizes.Sizes, original: sizes.Sizes, target: str, size_neutral: bool) -> bool:
    """The never-larger rule: smaller in the bytes the target counts, and (but for a method that is
    ``size_neutral``) no larger on disk: a download a few bytes smaller does not pay for a model that takes
    twice the space once installed. Judging float-levels raw only shipped the original at every
    level though its wheel member is smaller."""
    return shrunk.of(target) < original.of(target) and (size_neutral or shrunk.raw <= original.raw)


def _not_smaller(options: ShrinkOptions, shrunk: sizes.Sizes, original: sizes.Sizes) -> str:
    """Why the original ships, in the sizes that decided it."""
    def change(kind: str) -> str:
        before, after = original.of(kind), shrunk.of(kind)
        about = "~" if kind == "web" and original.web_estimated else ""
        return f"{about}{human(before)} -> {human(after)}, {about}{100 * after / max(1, before):.1f}%"

    target = options.target
    if shrunk.of(target) < original.of(target):
        why = f"on disk: {change('disk')}, though {TARGET_WORDS[target]} would be {change(target)}"
    else:
        why = f"{TARGET_WORDS[target]}: {change(target)}"
        if target == "disk" and METHODS[options.method].size_neutral:
            why += f"; {options.method} keeps the raw size and pays off compressed: target wheel or web"
    return f"{options.method} would not make it smaller ({why})"


def _files(loaded: Loaded, original_ref: str | bytes) -> bytes | list[Path]:
    """What the original's sizes are measured on: its bytes, or its file and data files."""
    return original_ref if isinstance(original_ref, bytes) else [Path(original_ref), *loaded.data_files]


def _encode(work: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, label: str, *,
            original: Scorer | None = None) -> tuple[list[TensorRecord], Verdict | None]:
    """Run dedup, the chosen encodings (a plan) and the method on ``work`` in place, with the guard's
    verdict on what the method fitted (None: nothing was fitted); their errors name the model."""
    try:
        records = Dedup().apply(work, options) if options.dedup else []
        chosen, stored = encode_chosen(work, options)
        method_options = options
        if stored:  # what the chosen encodings stored is not the method's to encode again
            method_options = replace(
                options, exclude_tensors=(*options.exclude_tensors, *(glob.escape(n) for n in sorted(stored))))
        mine = {(c.scope, c.name) for c in chosen}
        applied = METHODS[options.method].fit(work, method_options, calibration, held, original)
        return records + [r for r in applied.records if r.name not in stored and (r.scope, r.name) not in mine] \
            + chosen, applied.outcome
    except ShrinkrayError as exc:
        if exc.path is None:
            exc.path = label
        raise


def _census(model: ModelProto, options: ShrinkOptions) -> tuple[KeptFloat | None, int]:
    """The float weights below ``min-elements`` (never recorded per tensor: there can be
    thousands) and the bytes of all float weights."""
    weights = [s for s in find_sites(model) if s.dtype in FLOAT_TYPES]
    small = [s for s in weights if s.size < options.min_elements]
    group = KeptFloat("below min-elements", len(small), sum(s.nbytes for s in small)) if small else None
    return group, sum(s.nbytes for s in weights)


def _overridable(model: ModelProto, options: ShrinkOptions) -> str:
    """Why the largest weights are not encoded when they are initializers listed as graph inputs too
    (an older export style: each is then a default a caller may override, part of the model's
    interface, which is never rewritten); '' when none reaches ``min-elements``."""
    big = 0
    for scope in scopes(model):
        inputs = {i.name for i in scope.graph.input}
        big += sum(init.name in inputs and init.data_type in FLOAT_TYPES
                   and int(np.prod(init.dims, dtype=np.int64)) >= options.min_elements
                   for init in scope.graph.initializer)
    if not big:
        return ""
    return (f"{big} of its weights with min-elements ({options.min_elements}) elements or more are also graph "
            "inputs (overridable defaults, an older export style), which are never rewritten; re-export it with them "
            "as initializers only (torch.onnx.export(..., keep_initializers_as_inputs=False))")


def _kept_float(small: KeptFloat | None, records: list[TensorRecord], min_elements: int) -> tuple[KeptFloat, ...]:
    """Float weights left as they were, by reason; those below ``min-elements`` that a method stored
    anyway (``auto``'s small tensors in fp16) are not among them."""
    below = [r for r in records if r.encoding != "kept" and math.prod(r.shape) < min_elements]
    if small is not None and below:
        count, nbytes = small.count - len(below), small.bytes - sum(r.original_bytes for r in below)
        small = KeptFloat(small.reason, count, nbytes) if count > 0 else None
    groups: dict[str, list[int]] = {}
    for r in records:
        if r.encoding == "kept":
            count_bytes = groups.setdefault(kept_reason(r.note), [0, 0])
            count_bytes[0] += 1
            count_bytes[1] += r.original_bytes
    return ((small,) if small else ()) + tuple(KeptFloat(reason, n, b) for reason, (n, b) in groups.items())


@dataclass
class Output:
    """The shrunk model where verification can read it: staged beside the destination, or
    serialized in memory when there is no destination."""

    ref: str | bytes
    size: int
    staged: Staged | None = None

    def commit(self) -> tuple[Path, ...]:
        return self.staged.commit() if self.staged is not None else ()

    def files(self) -> bytes | list[Path]:
        """The bytes, or the staged file and its data file (outputs over 2 GB)."""
        if isinstance(self.ref, bytes):
            return self.ref
        assert self.staged is not None
        return [Path(self.ref), *self.staged.data_files]

    def discard(self) -> None:
        if self.staged is not None:
            self.staged.discard()


def _write(model: ModelProto, dest: Path | None, label: str, checker: str) -> Output:
    refuse_miscompiled(model, label)
    if dest is None:
        if not fits_one_file(model):
            raise ShrinkrayError("the shrunk model is over 2 GB and can only be written to a file",
                                 path=label, hint="pass a destination path")
        _check_output(model, label, checker)
        data = model.SerializeToString()
        return Output(data, len(data))
    output = Output("", 0)
    try:
        # The staging directory and the reference to it appear together, and a signal held back
        # meanwhile is delivered inside this try, whose handler removes the directory.
        with deferred():
            output.staged = Staged(dest)
        output.staged.write(model)
        # Protos over 2 GB cannot be serialized for the checker: check the staged files instead.
        _check_output(str(output.staged.path) if output.staged.data_files else model, label, checker)
    except BaseException:
        output.discard()
        raise
    output.ref, output.size = str(output.staged.path), output.staged.size
    return output


def _failure_hint(original: str | bytes, options: ShrinkOptions, reference: Reference) -> str:
    """Which tensors to keep, measured one at a time on the verification inputs; the generic advice
    where that cannot be measured (no eligible float32 weight, a model too big to probe again)."""
    generic = (f"exclude the sensitive tensors ({key('exclude-tensors')} / {key('exclude-ops')}) or use "
               f"{setting('method', 'fp16')}")
    if isinstance(original, str) and os.path.getsize(original) > HINT_MAX_BYTES:
        return generic
    try:
        model = load_model(original if isinstance(original, str) else onnx.load_from_string(original)).model
        if options.dedup:
            Dedup().apply(model, options)
        found = keep_hint(rank(model, options, [*(reference.calibration.feeds if reference.calibration and
                                                   not reference.seq.recurrent else []), *reference.complete()]),
                          method=options.label())
    except (ShrinkrayError, MemoryError):
        return generic
    return f"{found}\nor let your tests judge: `{check_hint(fix=True)}`" if found else generic


def _calibration(loaded: Loaded, original: str | bytes, options: ShrinkOptions,
                 needs: Needs) -> tuple[Prepared | None, Unfitted | None]:
    """For a method that fits data, the real samples (read with the input signature of the proto, so
    no onnxruntime session is open while the model is in memory) and which of them it may fit on;
    and what became of the fitting when there is too little independent evidence for it."""
    inputs = options.verify.inputs if options.verify is not None else None
    if needs.split is None or inputs is None:
        if needs.required:
            raise needs_real_inputs(options.method)
        return (None, needs.declined) if inputs is not None and needs.declined is not None else (None, None)
    sha256 = next(iter(loaded.sha256.values()), None) or hashlib.sha256(
        original if isinstance(original, bytes) else b"").hexdigest()
    try:
        prepared = prepare_samples(Path(inputs), specs_of_model(loaded.model), sha256=sha256, name=loaded.label,
                                   split=needs.split)
    except NoRecording as exc:  # verification notes it and falls back to generated inputs
        # A model the recorded program never ran (the first build after `record` often has one): a
        # method that cannot fit without it has nothing to fit, so it ships its fallback, and says so.
        if not needs.required:
            return None, None
        return None, Unfitted(f"{needs.fallback}: {in_project(exc.path)} holds no recording of it, and "
                              f"{options.method} fits its choices to one (record it: run the code that uses it "
                              f"under `hatch-shrinkray record --output {exc.path} -- COMMAND`)",
                              FitNote(Fit.NOT_FITTED, needs.fit_subject, FitReason.NO_RECORDING))
    if not prepared.samples.real:
        if needs.required:
            raise needs_real_inputs(options.method)
        return None, None
    units = prepared.units
    if units >= MIN_UNITS:
        return prepared, None
    every = tuple(range(len(prepared.samples.feeds)))
    kind = unit_kind(prepared.seq.units)
    return Prepared(prepared.samples, None, every), Unfitted(
        f"{needs.fallback}: {units} independent {kind}, fewer than the {MIN_UNITS} it takes to tell a fitted choice "
        "from chance", FitNote(Fit.NOT_FITTED, needs.fit_subject, FitReason.FEW_UNITS, units, kind))


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
    return checker_level(model)


def _check_output(model: ModelProto | str, label: str, checker: str) -> None:
    try:
        onnx.checker.check_model(model, full_check=checker == "full")
    except Exception as exc:
        raise ShrinkrayError(f"the shrunk model fails onnx.checker: {one_line(exc)}", path=label,
                             hint=f"please report this as a bug; use {key('exclude-tensors')} or "
                                  f"{setting('method', 'fp16')} meanwhile") from exc
