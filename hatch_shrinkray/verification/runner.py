"""Does the shrunk model still compute what the original computes? Both models run in onnxruntime
on the same inputs with default session options (what users get); ``compare`` judges the outputs.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray import progress
from hatch_shrinkray.errors import OptionError, ShrinkrayError, one_line
from hatch_shrinkray.hints import Blank, in_project, record_hint, set_it, setting
from hatch_shrinkray.numerics.threads import NO_SPINNING
from hatch_shrinkray.onnxgraph.indices import table_rows
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.recording.matching import NoRecording
from hatch_shrinkray.result import VerifyResult
from hatch_shrinkray.samples import Calibration, Sequencing, completed, run_in_order
from hatch_shrinkray.verification import inputs
from hatch_shrinkray.verification.compare import unchecked
from hatch_shrinkray.verification.judges import THRESHOLD
from hatch_shrinkray.verification.judging import Judged, evidence_of, expectations, judge_outputs

ModelRef = str | os.PathLike[str] | bytes
Outputs = list[list[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Reference:
    """The original's side of a verification: the inputs and its outputs on them."""

    samples: inputs.Samples
    feeds: list[inputs.Feed]
    """What the verification runs on (as stored: a stream's later steps lack their fed-back inputs)."""
    seq: Sequencing
    """Units and streams of ``feeds``."""
    outputs: Outputs
    """The original's outputs per feed, streams in closed loop on its own state."""
    names: list[str]
    calibration: Calibration | None
    """What a data-fitted method fitted on; None when nothing was fitted."""
    cross: bool
    """The fit used these same feeds, cross-fitted (every unit judged by a fit that did not see it)."""
    unchecked: dict[str, str]
    judged: list[Judged]

    def complete(self) -> list[inputs.Feed]:
        """``feeds`` with every fed-back input filled in from the original's outputs (open loop)."""
        return completed(self.feeds, self.seq, self.outputs, self.names)


def session(model: ModelRef, label: str) -> Any:
    """A CPU session with onnxruntime's default options, what users get: every graph optimization
    (``ORT_ENABLE_ALL``; see ``runtime``)."""
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


def runtime(sess: Any) -> str:
    """Where ``sess`` runs, as a verification states it: the onnxruntime release, the provider and
    the graph optimization level (the level is part of what an answer means: a runtime that folds
    or fuses computes another graph than one that does neither)."""
    import onnxruntime as ort

    level = str(sess.get_session_options().graph_optimization_level).rpartition(".")[2]
    return f"onnxruntime {ort.__version__} ({sess.get_providers()[0].removesuffix('ExecutionProvider')}, {level})"


def run_all(sess: Any, feeds: list[inputs.Feed], seq: Sequencing | None = None, step: str = "") -> Outputs:
    """The session's outputs per feed; a recurrent model's streams in closed loop. ``step`` names
    the run in progress reports (samples done / total, and the stream it is in)."""
    names = [o.name for o in sess.get_outputs()]
    seq = seq or Sequencing.plain(len(feeds))
    streams = list(itertools.accumulate(len(s) for s in seq.streams)) if seq.recurrent else []
    with progress.task(step or "running the model on the samples", total=len(feeds)) as done:
        def run(feed: inputs.Feed) -> list[Any]:
            outputs = list(sess.run(None, feed))
            stream = bisect.bisect_right(streams, done.task.done)
            done.advance(1, f"stream {stream + 1} of {len(streams)}" if stream < len(streams) else "")
            return outputs

        return run_in_order(run, feeds, seq, names)


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
    """Real samples loaded before the original's session exists, and which of them a data-fitted
    method fits on and the verification judges on."""

    samples: inputs.Samples
    fit: tuple[int, ...] | None
    """Feed indices a data-fitted method fits on (None: it fits nothing)."""
    held: tuple[int, ...]
    """Feed indices the verification runs on."""
    cross: bool = False
    """``fit`` and ``held`` are the same feeds: the fitted choice is cross-fitted over folds of units."""

    @property
    def seq(self) -> Sequencing:
        return self.samples.sequencing()

    @property
    def calibration(self) -> Calibration | None:
        if self.fit is None:
            return None
        return Calibration([self.samples.feeds[i] for i in self.fit], self.seq.subset(self.fit), self.fit)

    @property
    def held_out(self) -> Calibration | None:
        """The verified feeds when they are apart from the fitted ones (for ``auto``'s guard)."""
        if self.fit is None or self.cross:
            return None
        return Calibration([self.samples.feeds[i] for i in self.held], self.seq.subset(self.held), self.held)

    @property
    def units(self) -> int:
        return self.seq.unit_count()


def prepare_samples(path: Path, specs: list[inputs.InputSpec], *, sha256: str, name: str,
                    split: str = "none") -> Prepared:
    """Load real samples and decide which a fit uses and which the verification judges (``split``):
    no fit; fitted on all of them, cross-fitted; or fitted on one half of the units, verified on the other."""
    samples = inputs.load_samples(path, specs, model_sha256=sha256, model_name=name)
    every = tuple(range(len(samples.feeds)))
    if split == "cross":
        return Prepared(samples, every, every, cross=True)
    if split == "holdout":
        fit, held = samples.sequencing().folds(2)
        return Prepared(samples, tuple(fit), tuple(held))
    return Prepared(samples, None, every)


def reference_outputs(original: ModelRef, label: str, options: VerifyOptions, *,
                      sha256: str | None = None, name: str | None = None,
                      prepared: Prepared | None = None, threshold: float = THRESHOLD,
                      rows: Mapping[str, int] | None = None) -> Reference:
    """Inputs and the original's outputs; the original session is released before returning
    so two big models are never resident at once. ``prepared``: samples already loaded (and split);
    ``rows``: the rows of the table each integer input indexes (``onnxgraph.indices``), which
    generated values stay inside."""
    sess = session(original, label)
    try:
        specs = [dataclasses.replace(s, rows=(rows or {}).get(s.name)) for s in inputs.specs_of(sess)]
        names = [o.name for o in sess.get_outputs()]
    except Exception as exc:  # e.g. UnicodeDecodeError for a name that is not UTF-8
        raise ShrinkrayError(f"onnxruntime cannot read its inputs and outputs: {one_line(exc)}", path=label,
                             hint="re-export the model") from exc
    notes: tuple[str, ...] = ()
    if options.inputs is not None and prepared is None:
        try:
            prepared = prepare_samples(Path(options.inputs), specs, sha256=sha256 or model_sha256(original),
                                       name=name or label)
        except NoRecording as exc:  # data-free: generated inputs, and a warning that says so
            notes = (f"{in_project(exc.path)} holds no recording of it: verified on generated inputs instead, "
                     "a smoke check",)
    if prepared is not None:
        samples = prepared.samples
        feeds = [samples.feeds[i] for i in prepared.held]
        seq = prepared.seq.subset(prepared.held)
        try:
            outputs = run_all(sess, feeds, seq, "verifying: the original model")
        except Exception as exc:
            raise ShrinkrayError(f"the original model fails on the sample inputs: {one_line(exc)}",
                                 path=label, hint=f"check the arrays in {samples.source}") from exc
        return _checked(Reference(samples, feeds, seq, outputs, names, prepared.calibration, prepared.cross, {}, []),
                        label, options, threshold)
    tried: list[tuple[inputs.Sizing, str]] = []
    shapes_tried: list[dict[str, tuple[int, ...]]] = []
    for sizing in [inputs.Sizing(), *inputs.retries(specs, options)]:
        shapes, sizes = inputs.generated_shapes(specs, options, sizing)
        if shapes in shapes_tried:
            continue
        shapes_tried.append(shapes)
        try:
            feeds = inputs.generate(specs, options, sizing)
        except OptionError as exc:
            if sizing == inputs.Sizing():  # the options' own sizes: the user's to change
                raise
            tried.append((sizing, exc.message))  # a retry too large to generate
            continue
        try:
            outputs = run_all(sess, feeds, step="verifying: the original model")
        except Exception as exc:
            bounds = OUT_OF_BOUNDS.search(str(exc))  # onnxruntime's words come late in its message
            tried.append((sizing, bounds.group(0) if bounds else one_line(exc, 200)))
            continue
        source = inputs.describe_generated(specs, options, sizing)
        if tried:  # say which sizes it took, and why not the default ones
            notes = (*notes, f"the original does not run on generated inputs of the default sizes ({tried[0][1]}); "
                             f"verified on {source.removeprefix('generated ')}")
        samples = inputs.Samples(feeds, source, False, notes, symbols=tuple(sizes.items()))
        return _checked(Reference(samples, feeds, samples.sequencing(), outputs, names, None, False, {}, []), label,
                        options, threshold)
    raise _cannot_run(tried, label)


OUT_OF_BOUNDS = re.compile(r"indices element out of data bounds, idx=(-?\d+) must be within the inclusive "
                           r"range \[(-?\d+),\s*(-?\d+)\]")
"""onnxruntime's words when a generated integer indexes past a table (``Gather``)."""


def _cannot_run(tried: list[tuple[inputs.Sizing, str]], label: str) -> inputs.GeneratedUnusable:
    """The original ran on none of the generated sizes: the first error, and every size tried. An
    index past a table names onnxruntime's words and the ``int-range`` that keeps inside it."""
    sizes = ", ".join(sizing.text() for sizing, _ in tried)
    retried = f"; sizes of the symbolic dimensions tried: {sizes}" if len(tried) > 1 else ""
    brief = ", ".join(sizing.text().replace(" (audio length)", "") for sizing, _ in tried)
    message = f"the original model does not run on generated inputs ({tried[0][1]}){retried}"
    bounds = next((m for _, error in tried if (m := OUT_OF_BOUNDS.search(error))), None)
    if bounds is not None:
        index, rows = int(bounds.group(1)), int(bounds.group(3)) + 1
        fix = setting("int-range", [0, rows])
        reason = f"generated index {index} is past a table of {rows} rows; {fix} keeps inside it"
        return inputs.GeneratedUnusable(message, kind="cannot-run", reason=reason, path=label,
                                        hint=f"{set_it('int-range', [0, rows])}, or {record_hint()}")
    dims = set_it("dims", {"NAME": Blank("N")})
    return inputs.GeneratedUnusable(message, kind="cannot-run",
                                    reason=f"it does not run on generated inputs (sizes tried: {brief})", path=label,
                                    hint=f"{record_hint()}, or {dims} for the symbolic dimensions")


def _checked(ref: Reference, label: str, options: VerifyOptions, threshold: float) -> Reference:
    """``ref`` with each output's judge and the outputs that cannot show a difference noted;
    refused when none can."""
    why = {n: w for i, n in enumerate(ref.names) if (w := unchecked([o[i] for o in ref.outputs]))}
    if why and len(why) == len(ref.names):
        listed = "; ".join(f"{n} is {w}" for n, w in why.items())
        message = f"on {ref.samples.source} the original's outputs check nothing ({listed})"
        hint = "verify on inputs that make the model compute something: " + record_hint()
        if not ref.samples.real:
            raise inputs.GeneratedUnusable(message, kind="silent",
                                           reason=f"its outputs check nothing on generated inputs ({listed})",
                                           path=label, hint=hint)
        raise ShrinkrayError(message, path=label, hint=hint)
    judged = expectations(ref.names, ref.outputs, ref.seq, options, threshold, feeds=ref.feeds)
    return dataclasses.replace(ref, unchecked=why, judged=judged)


def verify_against(reference: Reference, shrunk: ModelRef, label: str, options: VerifyOptions,
                   checker: str = "full") -> VerifyResult:
    sess = session(shrunk, label)
    try:
        got = run_all(sess, reference.feeds, reference.seq, "verifying: the shrunk model")
    except Exception as exc:
        raise ShrinkrayError(f"the shrunk model fails to run: {one_line(exc)}", path=label,
                             hint="please report this as a bug; use method fp16 meanwhile") from exc
    comparisons = judge_outputs(reference.judged, got, reference.seq, options, reference.unchecked)
    fitted = len(reference.calibration) if reference.calibration is not None and not reference.cross else 0
    return VerifyResult(comparisons, len(reference.feeds), reference.samples.source, checker,
                        reference.samples.real, fitted, reference.samples.notes,
                        evidence=evidence_of(comparisons, reference.seq, reference.samples.real),
                        streams=len(reference.seq.streams) if reference.seq.recurrent else 0,
                        symbols=reference.samples.symbols, runtime=runtime(sess))


def verify(original: ModelRef | ModelProto, shrunk: ModelRef | ModelProto,
           options: VerifyOptions | None = None) -> VerifyResult:
    """Compare two models' outputs (paths, serialized bytes or ModelProtos); also runs onnx.checker
    on ``shrunk``. Raises ShrinkrayError when either model cannot be loaded or run."""

    rows = _tables(original) if (options is None or options.inputs is None) else {}
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
    ref = reference_outputs(original, "<original>" if isinstance(original, bytes) else str(original), options,
                            rows=rows)
    return verify_against(ref, shrunk, label, options, checker)


def _tables(model: ModelRef | ModelProto) -> dict[str, int]:
    """``table_rows`` of a model however given (none where it cannot be read: the session says why)."""
    import onnx

    try:
        proto = model if isinstance(model, ModelProto) else onnx.load_from_string(model) \
            if isinstance(model, bytes) else onnx.load(str(model), load_external_data=False)
    except Exception:  # the session reports an unreadable model in its own words
        return {}
    return table_rows(proto)


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
