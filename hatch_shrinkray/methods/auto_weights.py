"""``auto``'s analysis: per weight, the candidate encodings on its ladder and what each alone costs
the model's answers (one-tensor-at-a-time sensitivity on a probe session), independent of the budget."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray import progress
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.fitting.budget import BROKEN, ZERO, Baseline, Deviation, deviation
from hatch_shrinkray.fitting.calib import Layout
from hatch_shrinkray.fitting.calibrate import calibrate, needs_real_inputs
from hatch_shrinkray.fitting.candidates import (
    INT8_LEVELS,
    NBITS,
    Candidate,
    float32_scales,
    fp32,
    int4_block,
    int_candidate,
    levels_of,
    sixteen_bit,
    split,
    step_candidates,
)
from hatch_shrinkray.fitting.heads import classes_axis, competing
from hatch_shrinkray.fitting.probe import Probe, site_key
from hatch_shrinkray.fitting.small import small_weight
from hatch_shrinkray.fitting.windows import on_windows
from hatch_shrinkray.methods import resident, runtimes
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.numerics.threads import workers
from hatch_shrinkray.onnxgraph.encoding import Calibration, EncodeContext
from hatch_shrinkray.onnxgraph.graph import Site, opset_version
from hatch_shrinkray.onnxgraph.rewrite import encode_context, rows_decodable
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.pool import thread_pool
from hatch_shrinkray.samples import Feed, as_calibration
from hatch_shrinkray.verification.judges import calls_of, detect, per_character

LOG = logging.getLogger("hatch_shrinkray.auto")
MAX_EVALS = 400
"""Single-tensor sensitivity runs (largest weights first); weights not reached get int8 as method
int8 would: the analysis is bounded by (MAX_EVALS + 2) runs on 8 feeds."""
LOW_RUNGS_SHARE = 0.5
"""Every weight's int8 is measured alone; its rungs below int8 (``MEASURED_LEVELS``) only for the largest
weights that make up this share of the weights' bytes, where the size is won. The other rungs are
estimated from the nearest measured one, scaled by the ratio of their calibrated output errors
(``_proxy``): a weight's output deviation grows with its layer's output error. The search then
checks its choices with real runs of the assembled model, so an estimate can cost bytes, never
the budget. (Measuring every rung of every weight would take most of auto's time.)"""

SENSITIVITY_FEEDS = 4
"""Single-tensor runs use this many feeds, evenly spread over the inputs (samples are often
grouped: all clean lines, then all degraded ones): energies need less data than the budget check."""
LEVELS = (7, 15, 31, 63, 127)
"""The rungs below int8: codes per channel in an int8 container (``int_candidate(levels=...)``).
Seven is the floor: below it output-aware rounding keeps almost no answer identical."""
SPLIT_HOT = (127, INT8_LEVELS)
SPLIT_COLD = (7, 15)
"""A classifier head's split candidates (``heads``): these levels for the classes that compete on
the fitting samples, times these for the rest. Each is measured alone: the calibrated output
error weighs every class alike, so it cannot stand in for the answers that only competing
classes move."""
MEASURED_LEVELS = (31,)
"""The rungs below int8 measured alone for the largest weights; the others are scaled from the
nearest measured one (``_proxy``)."""



@dataclass
class Weight:
    site: Site
    ctx: EncodeContext
    lay: Layout | None
    candidates: list[Candidate]
    deviations: list[Deviation]
    """Per candidate, the model's deviation with this weight alone encoded (``ZERO`` for fp32)."""
    measured: list[bool]
    rtn: Candidate | None = None
    """Round-to-nearest int8 of the weight (the budget's reference, and what ships when nothing on
    the ladder is smaller while keeping int8's answers)."""

    @property
    def plain(self) -> npt.NDArray[Any] | None:
        return None if self.rtn is None else self.rtn.decoded
    fixed: str = ""
    """Why the weight's sensitivity is unknown and it gets int8 regardless (empty: measured)."""
    small: bool = False
    """Below ``min-elements`` (``small.small_weight``): method int8 keeps it float32, so float32 is its
    round-to-nearest and its floor, and what the plan chooses for it ships through the small rung."""


@dataclass
class Analysis:
    weights: list[Weight]
    probe: Probe
    base: list[list[npt.NDArray[Any]]]
    subset: list[int]
    """The feeds of the single-tensor runs (``SENSITIVITY_FEEDS`` of ``base``, evenly spread)."""
    quick: tuple[tuple[str, ...], Baseline] | None = None
    """The original's outputs on ``subset`` prepared for these judges by the sensitivity runs (the
    search's screen compares with the same, so they are prepared once)."""


def _splits(w: npt.NDArray[np.float32], cands: list[Candidate], head: npt.NDArray[np.bool_], *, axis: int,
            moments: npt.NDArray[np.float64] | None, lay: Layout | None) -> list[Candidate]:
    """A classifier head's candidates with ``SPLIT_HOT`` levels for its competing classes and
    ``SPLIT_COLD`` for the others (``heads``), built from the weight's level candidates."""
    by_levels = {levels_of(c.kind): c for c in cands}
    out = []
    for hot in SPLIT_HOT:
        for cold in SPLIT_COLD:
            if hot in by_levels and cold in by_levels:
                with contextlib.suppress(NotEncodable):
                    out.append(split(w, by_levels[hot], by_levels[cold], head, axis=axis, moments=moments, lay=lay))
    return out


def target_bytes(w: Weight, c: Candidate, target: str) -> int:
    """``c``'s bytes as ``target`` counts them (``memory``: ``resident.cost``)."""
    return resident.cost(w.site, c) if target == resident.MEMORY else c.target_bytes(target)


def rtn_of(w: Weight) -> Candidate:
    """The weight's round-to-nearest int8, or its float32 where int8 cannot encode it."""
    return w.rtn if w.rtn is not None else w.candidates[-1]


def judges_for(probe: Probe, options: ShrinkOptions, base: list[list[npt.NDArray[Any]]]) -> list[str]:
    """Per model output, the judge the ``judges`` option names for it (``auto`` if none: detected),
    named where the probe's calls tell more than the output's values do (``tags`` for one row per
    character, ``segments`` for a streaming detector's frames, ``sequence`` for raw CTC logits fed
    images or audio), as verification detects it."""
    v = options.verify
    names = probe.names[: probe.n_outputs]
    named = [v.judge_of(n) if v is not None else "auto" for n in names]
    calls = calls_of(base, probe.feeds, recurrent=probe.seq.recurrent)
    fed_back = {o for _, o in probe.seq.feedback}
    out = []
    for i, j in enumerate(named):
        per_call = [b[i] for b in base]
        if j == "auto" and names[i] not in fed_back:
            told = detect(per_call, recurrent=probe.seq.recurrent, characters=per_character(per_call, probe.feeds),
                          calls=calls).name
            out.append(told if told != detect(per_call, recurrent=probe.seq.recurrent).name else j)
            continue
        out.append(j)
    return out


def load_of(w: Weight, c: Candidate) -> int:
    """Load cost of candidate ``c``: nothing for MatMulNBits, float32 or a table decoded per gathered row."""
    return 0 if c.decode is None or rows_decodable(w.site, c.decode) else c.decode.folded_bytes


def _int4_ok(site: Site) -> bool:
    return (site.scope.parent is None and site.location == "initializer" and len(site.shape) == 2
            and bool(site.consumers) and all(n.op_type == "MatMul" and i == 1 for n, i in site.consumers))


def _sensitivity(weights: list[Weight], probe: Probe, base: list[list[npt.NDArray[Any]]], subset: list[int],
                 judges: list[str]) -> Baseline:
    """Measure each weight alone, largest weights first, within ``MAX_EVALS`` runs: its int8, and its
    lower rungs while the weights so far hold less than ``LOW_RUNGS_SHARE`` of the bytes; the
    prepared original outputs on ``subset`` it compared with."""
    order = sorted(range(len(weights)), key=lambda i: (-weights[i].site.size, i))
    budget = MAX_EVALS
    baseline = Baseline([base[k] for k in subset], judges)
    total = sum(w.site.size for w in weights if not w.small)
    covered = 0
    with progress.task("auto: sensitivity, one weight at a time", total=len(order)) as measured:
        for i in order:
            budget -= _measure(weights[i], probe, baseline, subset, budget,
                               low_rungs=covered < LOW_RUNGS_SHARE * total)
            covered += weights[i].site.size
            measured.advance()
    return baseline


def _measure(w: Weight, probe: Probe, baseline: Baseline, subset: list[int], budget: int, *,
             low_rungs: bool) -> int:
    """One weight alone: its int8, and (``low_rungs``) its measured rungs below int8, within
    ``budget`` runs; the runs it took."""
    key = site_key(w.site)
    if budget <= 0:
        _fixed_int8(w, "not measured (single-tensor run budget spent on larger weights)")
        return 0
    lossy = [j for j, c in enumerate(w.candidates) if c.kind != "fp32"]
    reference = [j for j in lossy if w.candidates[j].kind == "int8"] or lossy[:1]
    low = [j for j in lossy if levels_of(w.candidates[j].kind) in MEASURED_LEVELS or w.candidates[j].bits < 8
           ] if low_rungs else []
    runs = [*reference, *low, *(j for j in lossy if w.candidates[j].split)][:budget]
    for j in runs:
        w.deviations[j] = deviation(baseline, probe.run({key: w.candidates[j].decoded}, subset=subset))
        w.measured[j] = True
    _proxy(w)
    if _unexercised(w):
        _fixed_int8(w, "not exercised by the verification inputs (no output changed)")
    return len(runs)


def _fixed_int8(w: Weight, why: str) -> None:
    """Sensitivity unknown: the weight gets its int8 candidate, as method int8 would (zero cost
    to the search), and the record says why."""
    keep = [j for j, c in enumerate(w.candidates) if c.kind == "int8" and not w.small] or [len(w.candidates) - 1]
    w.candidates = [w.candidates[j] for j in keep]
    w.deviations = [ZERO for _ in keep]
    w.measured = [False for _ in keep]
    w.fixed = why


def _proxy(w: Weight) -> None:
    """Unmeasured levels: the deviation of the measured level whose calibrated output error is
    nearest (in ratio), scaled by the ratio of the two errors."""
    measured = [j for j, c in enumerate(w.candidates) if w.measured[j] and c.weight_error > 0 and not c.split]
    for j, c in enumerate(w.candidates):
        if c.kind == "fp32" or w.measured[j]:
            continue
        if not measured:
            w.deviations[j] = BROKEN
            continue
        error = max(c.weight_error, 1e-300)
        ref = min(measured, key=lambda m: (abs(math.log(error / w.candidates[m].weight_error)), m))
        w.deviations[j] = w.deviations[ref].scaled(c.weight_error / w.candidates[ref].weight_error)


def _unexercised(w: Weight) -> bool:
    """No lossy candidate changed any output bit: the verification inputs never reach this weight
    (an unused ``If`` branch), so its sensitivity is unknown."""
    lossy = [d for d, c in zip(w.deviations, w.candidates, strict=True) if c.kind != "fp32"]
    return bool(lossy) and all(d.energy == 0.0 and d.risk == 0.0 for d in lossy)




def analyse(model: ModelProto, options: ShrinkOptions, samples: Calibration | Sequence[Feed] | None, *,
            small_weights: bool = False) -> Analysis | None:
    """Candidates and their measured sensitivities; independent of the budget, so a budget
    sweep (the benchmark's curves) can reuse one analysis. ``small_weights``: the layers' weights
    below ``min-elements`` take part too (``small.small_weight``; only the small rung writes them).
    None: no float32 weight to choose for."""
    if not samples:
        raise needs_real_inputs("auto")
    calibration = as_calibration(samples)
    start = time.perf_counter()
    also = (lambda s: small_weight(s, options)) if small_weights else None
    cal = calibrate(model, options, calibration, weights_as_feeds=True, also=also)
    if cal is None:
        return None
    opset = opset_version(model)
    weights = []
    heads = competing(model.graph, cal.sites, cal.probe.names[: cal.probe.n_outputs], cal.base,
                      judges_for(cal.probe, options, cal.base))
    with progress.task("auto: candidate encodings", total=len(cal.sites)) as made, \
            thread_pool(workers()) as pool:  # weights are independent; numpy lets go of the lock
        for w in pool.map(lambda s: weight_of(s, options, opset, cal.lays[site_key(s)],
                                                 cal.moments.get(site_key(s)), head=heads.get(site_key(s))),
                          cal.sites):
            weights.append(w)
            made.advance()
    LOG.info("auto: %d weights, %d feeds, candidates ready after %.1f s", len(weights), len(calibration),
             time.perf_counter() - start)
    probe, base = on_windows(model, cal.probe, cal.base) or (cal.probe, cal.base)
    subset = calibration.seq.spread(SENSITIVITY_FEEDS)
    judges = judges_for(probe, options, base)
    quick = _sensitivity(weights, probe, base, subset, judges)
    LOG.info("auto: sensitivity measured after %.1f s (%d runs)", time.perf_counter() - start, probe.runs)
    return Analysis(weights, probe, base, subset, (tuple(judges), quick))


def weight_of(site: Site, options: ShrinkOptions, opset: int, lay: Layout | None,
            calibration: tuple[npt.NDArray[np.float64], int] | None, *,
            head: npt.NDArray[np.bool_] | None = None) -> Weight:
    moments, rows_seen = calibration if calibration is not None else (None, 0)
    w: npt.NDArray[np.float32] = site.array()  # type: ignore[assignment]  # float32 site
    ctx = encode_context(site, w, options, opset)
    cands: list[Candidate] = []
    targets = runtimes.parse(options.runtimes)
    small = site.size < options.min_elements  # written by the small rung, which has no MatMulNBits
    if not small and _int4_ok(site) and runtimes.matmul_nbits_ok(targets) and options.target != resident.MEMORY:
        decoded, nbytes = int4_block(w, options.block_size)
        from hatch_shrinkray.fitting.candidates import error_energy

        cands.append(Candidate(NBITS, f"int4 block {options.block_size} (MatMulNBits)", nbytes, decoded,
                               None, error_energy(w, decoded, moments, lay)))
    fit = options.rounding != "nearest"
    for levels in LEVELS:
        with contextlib.suppress(NotEncodable):
            cands.append(int_candidate(w, ctx, moments, lay, rows_seen=rows_seen, levels=levels, fit=fit,
                                       half_scales=True))
    if fit:  # the steps are chosen by output error on the recording: a data-fitted choice
        cands.extend(step_candidates(w, ctx, moments, lay, rows_seen=rows_seen, half_scales=True))
    with contextlib.suppress(NotEncodable):
        cands.append(int_candidate(w, ctx, moments, lay, rows_seen=rows_seen, levels=INT8_LEVELS, fit=fit,
                                   half_scales=True))
    if head is not None and ctx.axis is not None and ctx.axis == classes_axis(site):
        cands.extend(_splits(w, cands, head, axis=ctx.axis, moments=moments, lay=lay))
    cands.extend(resident.candidates(site, w, ctx, options, moments=moments, lay=lay))  # target memory
    sixteen = sixteen_bit(w, ctx, moments, lay)
    if sixteen is not None:
        cands.append(sixteen)
    cands = [c for c in cands if c.stored_bytes < w.nbytes]
    if small:
        cands = [float32_scales(c) for c in cands]
    cands.append(fp32(w))
    plain = None
    if not small:  # method int8 keeps a small weight float32: it has no round-to-nearest int8 to compare
        with contextlib.suppress(NotEncodable):
            dec = Int8Encoder().encode(w, ctx)
            plain = Candidate("int8", dec.label, dec.stored_bytes, dec.decoded, dec, 0.0, "round-to-nearest")
    return Weight(site, ctx, lay, cands, [ZERO] * len(cands), [False] * len(cands), plain, small=small)
