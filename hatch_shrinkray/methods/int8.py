"""Method ``int8``: every eligible weight in the per-channel codes of ``encodings.int8``.

Given real inputs: the same bytes and the same ``Cast -> Mul`` decode as
round-to-nearest int8, with each weight's codes and scales chosen by output-aware rounding (scale
search + GPTQ, ``numerics.gptq``) on the calibration samples, kept only where it does no harm.

At equal size it keeps more answers identical than round-to-nearest int8 on many samples;
fitted to a few correlated samples it can lose to round-to-nearest on
samples it never saw. So the fit is cross-fitted: the units (streams, test cases, calls) are dealt
into ``FOLDS`` folds, each fold is judged with roundings fitted on the other folds only, against
round-to-nearest on the same fold (``guard``); the rounding fitted on every sample ships only if
that comparison does not lose. Without real inputs, with ``scheme = "asymmetric"`` or ``decode =
"fast"``, and for weights whose activations the main graph does not expose (inside ``If``/``Loop``
bodies, or read by ops other than MatMul/Gemm/Conv) it is round-to-nearest, and each record says why.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.encodings.int8 import Int8Encoder, keep_fused
from hatch_shrinkray.fitting.calib import Layout
from hatch_shrinkray.fitting.calibrate import Calibrated, Key, calibrate
from hatch_shrinkray.fitting.candidates import FEW_ROWS, MIN_ROWS_PER_FEATURE, Candidate, int_candidate
from hatch_shrinkray.fitting.choices import Planned
from hatch_shrinkray.fitting.guard import Outcome, Scorer, Unfitted, Verdict, decide
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.methods.base import NEAREST_INT8, Fitted, Needs
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Calibration
from hatch_shrinkray.onnxgraph.graph import Site, opset_version
from hatch_shrinkray.onnxgraph.rewrite import encode_context, encode_weights
from hatch_shrinkray.options import LEVELS, Remedy, ShrinkOptions
from hatch_shrinkray.result import Fit, FitNote, FitReason, TensorRecord
from hatch_shrinkray.samples import Feed, as_calibration

NO_ACTIVATIONS = "round-to-nearest (its activations are not visible in the main graph)"
FOLDS = 2
"""Cross-fitting folds: each unit is judged once, by a fit on the other half of the units (every
GPTQ solve runs FOLDS + 1 times, so more folds cost more than they tell on the few units where
the guard matters)."""


class Int8:
    name = "int8"
    size_neutral = False

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        """Fitted codes fall back on round-to-nearest ones (the same bytes where nothing was fitted);
        fewer levels than plain int8 on plain int8."""
        if self.floored(options):
            return (NEAREST_INT8,)
        return (Remedy(rounding="nearest"),) if options.rounding != "nearest" else ()

    def floored(self, options: ShrinkOptions) -> bool:
        """Fewer levels than plain int8 trade answers for a smaller download; plain int8 is the floor."""
        return options.level_count() < LEVELS["int8"][2]

    def calibrates(self, options: ShrinkOptions) -> bool:
        return options.scheme == "symmetric" and options.decode == "float" and options.rounding != "nearest"

    def needs(self, options: ShrinkOptions) -> Needs:
        """Samples dealt into folds for output-aware rounding, unless configured otherwise."""
        declined = Unfitted('round-to-nearest (rounding "nearest"): the inputs only verify') \
            if options.rounding == "nearest" else None
        return Needs(split="cross" if self.calibrates(options) else None, declined=declined)

    def fit(self, model: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, original: Scorer | None) -> Fitted:
        return fit_int8(model, options, calibration)

    def plain(self, model: ModelProto, options: ShrinkOptions) -> list[TensorRecord]:
        records = encode_weights(model, Int8Encoder(), options)
        return keep_fused(model, records) if options.decode == "fast" else records


def fit_int8(model: ModelProto, options: ShrinkOptions, samples: Calibration | Sequence[Feed] | None, *,
             guard: bool = True) -> Fitted:
    """Encode ``model`` in place as ``int8``, with output-aware rounding fitted on ``calibration``
    where it does no harm (``guard``: cross-fitted against round-to-nearest first)."""
    method = Int8()
    if not samples or not method.calibrates(options):
        return Fitted(method.plain(model, options), None)
    calibration = as_calibration(samples)
    folds = FOLDS if guard and calibration.seq.unit_count() >= FOLDS else 1
    cal = calibrate(model, options, calibration, weights_as_feeds=folds > 1, folds=folds)
    if cal is None:
        return Fitted(method.plain(model, options), None)
    opset = opset_version(model)
    plan: dict[Key, Candidate] = {}
    notes: dict[Key, str] = {}
    for site in cal.sites:
        key = site_key(site)
        cand = _fit(site, options, opset, cal.lays[key], cal.moments.get(key))
        if cand is None:
            notes[key] = NO_ACTIVATIONS
        else:
            notes[key] = cand.note
            if cand.decode is not None and "gptq" in cand.decode.label:
                plan[key] = cand
    outcome: Verdict | None = _unfitted(notes) if not plan else None
    if folds > 1 and plan:
        outcome = crossfitted = _crossfit(cal, options, opset, plan)
        if not crossfitted.kept:
            notes = {k: "round-to-nearest (output-aware rounding did worse on held-out units)" if k in plan else n
                     for k, n in notes.items()}
            plan = {}
    del cal
    enc = Planned({k: c.decode for k, c in plan.items() if c.decode is not None}, Int8Encoder(),
                  fallback_float32=True)
    records = encode_weights(model, enc, options, select=enc.select)
    return Fitted([_noted(r, notes.get((r.scope, r.name))) for r in records], outcome)


def _unfitted(notes: dict[Key, str]) -> Unfitted | None:
    """Why nothing was fitted when no weight had calibration rows enough for its features (the
    first such note says how many) or no weight's activations were visible; None when that is not
    why (the fit did no better than round-to-nearest on the calibration samples: nothing to say)."""
    if notes and all(n == NO_ACTIVATIONS for n in notes.values()):
        return Unfitted("round-to-nearest: no weight's activations are visible in the main graph (weights inside "
                        "If/Loop bodies, or read by ops other than MatMul/Gemm/Conv)",
                        FitNote(Fit.NOT_FITTED, "rounding", FitReason.NO_ACTIVATIONS))
    few = [n for n in notes.values() if n.startswith(FEW_ROWS)]
    if not few:
        return None
    return Unfitted(f"round-to-nearest: {few[0][len('round-to-nearest ('):-1]} in the recording, for "
                    f"{len(few)} weight(s); output-aware rounding needs "
                    f"{MIN_ROWS_PER_FEATURE} rows per feature (record more calls)",
                    FitNote(Fit.NOT_FITTED, "rounding", FitReason.FEW_ROWS))


def _fit(site: Site, options: ShrinkOptions, opset: int, lay: Layout | None,
         moments: tuple[npt.NDArray[Any], int] | None) -> Candidate | None:
    """The weight's int8 with output-aware rounding on ``moments`` (None: it has none)."""
    if moments is None or lay is None:
        return None
    w = site.array()
    ctx = encode_context(site, w, options, opset)  # type: ignore[arg-type]  # float32 site
    with contextlib.suppress(NotEncodable):
        return int_candidate(w, ctx, moments[0], lay, rows_seen=moments[1],  # type: ignore[arg-type]
                             levels=options.level_count())
    return None


def _plain(site: Site, options: ShrinkOptions, opset: int) -> npt.NDArray[Any]:
    """What round-to-nearest int8 decodes this weight to (as ``encode_weights`` would choose it)."""
    w = site.array()
    ctx = encode_context(site, w, options, opset)  # type: ignore[arg-type]  # float32 site
    try:
        return Int8Encoder().encode(w, ctx).decoded  # type: ignore[arg-type]
    except NotEncodable:
        return w


def _crossfit(cal: Calibrated, options: ShrinkOptions, opset: int, plan: dict[Key, Candidate]) -> Outcome:
    """Every fold judged with the roundings fitted on the other folds, against round-to-nearest."""
    probe = cal.probe
    sites = {site_key(s): s for s in cal.sites}
    plain = {key: _plain(sites[key], options, opset) for key in probe.originals}
    got_plain = probe.run(plain)
    got_fitted: list[list[npt.NDArray[Any]]] = [[] for _ in probe.feeds]
    for fold, members in enumerate(cal.folds):
        moments = cal.moments_without(fold)
        replaced = dict(plain)
        for key in plan:
            cand = _fit(sites[key], options, opset, cal.lays[key], moments.get(key))
            if cand is not None:
                replaced[key] = cand.decoded
        for i, outs in zip(members, probe.run(replaced, subset=members), strict=True):
            got_fitted[i] = outs
    names = probe.names[: probe.n_outputs]
    score = Scorer.of(names, cal.base, probe.seq, options.verify, probe.feeds)
    fitted, rtn = score(got_fitted), score(got_plain)
    return decide("output-aware rounding", fitted, rtn, probe.seq.unit_count(), f"{len(cal.folds)} cross-fitted folds")


def _noted(record: TensorRecord, note: str | None) -> TensorRecord:
    return record if note is None or record.encoding == "kept" else dataclasses.replace(
        record, note=f"{record.note}; {note}" if record.note else note)


__all__ = ["Int8", "fit_int8"]
