"""``auto``: the smallest download whose answers stay as good as round-to-nearest int8's.

Per weight it chooses among int8 with fewer levels (7, 15, 31, 63 or 127 codes per channel, decoded
exactly like int8: same nodes, same load cost), int8 with coarser steps on the channels whose output
error costs least per bit saved (``candidates.step_candidates``: also int8 codes and one scale per
channel), int8, a 16-bit encoding (int16 or fp16), the
original float32 and, where the declared runtimes run MatMulNBits, 4-bit blocks; each lossy rung
with output-aware rounding fitted on the recording (``candidates``). Sizes are the ``target``'s
(the wheel's deflated member by default, ``numerics.entropy``), since int8 codes are already at
their entropy limit there and only fewer codes in use make the download smaller. A few
tensors of a model are often far more sensitive than the rest (a weight with an outlying value, a
text recogniser's CTC head); the rest tolerate far fewer levels. A classifier head
can also take two level counts, many for the classes that compete on the fitting samples and few
for the rest (``heads``, ``_splits``).

The budget, unless set, is round-to-nearest int8 itself on the fitting samples (``budget.Limits``):
as many answers kept, and its error (twice it where the outputs carry answers). Packed 4/6/10/12-bit
codes are not on the ladder: they compress worse than int8 codes with as few levels and load
slower than int8 (their decode chains fold more bytes), so ``auto`` loads like int8.

Every int8 candidate stores its per-channel scales as fp16 where fp16 holds them
(``numerics.scales``), which the int8 floor (method ``int8``, round-to-nearest) never does. The
scales are rounded before the codes are rounded or fitted to them, so the sensitivity runs, the
search and the guard all see exactly the values that ship: the rung is part of the judged plan,
not a variant judged with and without it as the small tensors in fp16 are (``small``). It moves a
channel's grid by at most 2^-12 of its step, far less than any choice the search weighs, and a
plan with float32 scales to fall back on would cost a second build of every candidate.

Steps: inputs -> one probe session with the weights as inputs (``probe``) -> activation moments
for output-aware rounding (``calib``) -> candidates -> one-tensor-at-a-time sensitivity and the
knapsack search in target bytes (``search``) -> write the chosen encodings; the engine then keeps
the plan only if the do-no-harm guard finds it no worse than int8 on held-out units.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray import progress
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.fitting.budget import BROKEN, ZERO, Baseline, Deviation, Limits, deviation
from hatch_shrinkray.fitting.calib import Layout
from hatch_shrinkray.fitting.calibrate import Key, calibrate, needs_real_inputs
from hatch_shrinkray.fitting.candidates import (
    INT8_LEVELS,
    NBITS,
    Candidate,
    float32_scales,
    fp32,
    int4_block,
    int_candidate,
    levels_of,
    rung_levels,
    rung_words,
    sixteen_bit,
    split,
    step_candidates,
)
from hatch_shrinkray.fitting.choices import Planned
from hatch_shrinkray.fitting.guard import Outcome, Score, Scorer, Unfitted, Verdict, decide
from hatch_shrinkray.fitting.heads import classes_axis, competing
from hatch_shrinkray.fitting.probe import Probe, ProbeModel, site_key, weights_as_inputs
from hatch_shrinkray.fitting.search import Found, Option, refine, search, try_uniform, within_load
from hatch_shrinkray.fitting.small import Small, small_tensors, small_weight, with_values, write_small
from hatch_shrinkray.fitting.windows import on_windows
from hatch_shrinkray.methods import resident, runtimes
from hatch_shrinkray.methods.base import NEAREST_INT8, Fitted, Needs
from hatch_shrinkray.methods.int8 import Int8, fit_int8
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.numerics.threads import workers
from hatch_shrinkray.onnxgraph.axes import choose_axis, lowest_error_axis
from hatch_shrinkray.onnxgraph.encoding import Calibration, EncodeContext
from hatch_shrinkray.onnxgraph.graph import Names, Site, opset_version
from hatch_shrinkray.onnxgraph.rewrite import ROWS_NOTE, encode_weights, record, rows_decodable
from hatch_shrinkray.options import LOAD_BUDGET, WEB_LOAD_BUDGET, Remedy, ShrinkOptions
from hatch_shrinkray.pool import thread_pool
from hatch_shrinkray.result import Fit, FitNote, FitReason, TensorRecord
from hatch_shrinkray.samples import Feed, as_calibration, joined
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
MAX_REFINE = 8
"""Full-model runs for the greedy clean-up after the bisection (largest savings first)."""

LEVELS = (7, 15, 31, 63, 127)
"""The rungs below int8: codes per channel in an int8 container (``int_candidate(levels=...)``).
Seven is the floor: below it output-aware rounding keeps almost no answer identical."""
INT8_BITS = 8
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


class Auto:
    name = "auto"
    size_neutral = False

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        """Its plan with round-to-nearest codes, then what method int8 ships (fitted codes where its guard
        keeps them), then round-to-nearest int8."""
        if options.rounding == "nearest":
            return (NEAREST_INT8,)
        return Remedy(rounding="nearest"), Remedy(method="int8"), NEAREST_INT8

    def floored(self, options: ShrinkOptions) -> bool:
        return False  # its guard judges the plan against round-to-nearest int8 on held-out units

    def needs(self, options: ShrinkOptions) -> Needs:
        """Real samples, half of their units held out to judge the plan on, and the original's
        outputs there before the encoding (verification compares with the same)."""
        return Needs(split="holdout", required=True, reference_first=True,
                     fallback="auto fell back to int8 round-to-nearest", fit_subject="auto")

    def fit(self, model: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, original: Scorer | None) -> Fitted:
        """The guarded plan; without evidence enough to fit anything, int8 as round-to-nearest
        writes it."""
        if calibration is None:
            return Fitted(Int8().plain(model, options), None)
        int8 = replace(options, method="int8")
        whole = joined(calibration, held) if held is not None and len(held) else calibration
        return guarded_auto(model, options, calibration, held, fallback=lambda m: fit_int8(m, int8, whole),
                            original=original)

    def analyse(self, model: ModelProto, options: ShrinkOptions, samples: Calibration | Sequence[Feed] | None, *,
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
                          _judges(cal.probe, options, cal.base))
        with progress.task("auto: candidate encodings", total=len(cal.sites)) as made, \
                thread_pool(workers()) as pool:  # weights are independent; numpy lets go of the lock
            for w in pool.map(lambda s: self._weight(s, options, opset, cal.lays[site_key(s)],
                                                     cal.moments.get(site_key(s)), head=heads.get(site_key(s))),
                              cal.sites):
                weights.append(w)
                made.advance()
        LOG.info("auto: %d weights, %d feeds, candidates ready after %.1f s", len(weights), len(calibration),
                 time.perf_counter() - start)
        probe, base = on_windows(model, cal.probe, cal.base) or (cal.probe, cal.base)
        subset = calibration.seq.spread(SENSITIVITY_FEEDS)
        judges = _judges(probe, options, base)
        quick = _sensitivity(weights, probe, base, subset, judges)
        LOG.info("auto: sensitivity measured after %.1f s (%d runs)", time.perf_counter() - start, probe.runs)
        return Analysis(weights, probe, base, subset, (tuple(judges), quick))

    def finish(self, model: ModelProto, analysis: Analysis, options: ShrinkOptions) -> list[TensorRecord]:
        """Search the budget's assignment and write it into ``model`` (the analysed model or a copy)."""
        chosen, summary = self.choose(analysis, options)
        return _write(model, options, chosen, summary)

    def choose(self, analysis: Analysis, options: ShrinkOptions) -> tuple[dict[Key, tuple[Weight, Candidate]], str]:
        """The budget's assignment (each weight's candidate) and a line saying how it was found."""
        weights, probe, base = analysis.weights, analysis.probe, analysis.base
        runs = probe.runs
        judges = _judges(probe, options, base)
        baseline = Baseline(base, judges)
        quick = analysis.quick[1] if analysis.quick is not None and analysis.quick[0] == tuple(judges) else \
            Baseline([base[k] for k in analysis.subset], judges)
        plain = {site_key(w.site): w.plain for w in weights if w.plain is not None}
        int8 = _int8_choice(weights)
        fitted = {site_key(w.site): w.candidates[c].decoded for w, c in zip(weights, int8, strict=True)
                  if w.plain is not None}
        fitted_out = probe.run(fitted)
        # Without activations to fit on (weights inside subgraphs), int8's candidate is round-to-nearest itself.
        same = all(np.array_equal(fitted[k], plain[k]) for k in plain)
        plain_out = fitted_out if same else probe.run(plain)
        fitted_dev, plain_dev = deviation(baseline, fitted_out), deviation(baseline, plain_out)
        limits = Limits.of(options, plain_dev, fitted_dev)
        quick_plain = deviation(quick, [plain_out[i] for i in analysis.subset])
        quick_limits = Limits.of(options, quick_plain,
                                 deviation(quick, [fitted_out[i] for i in analysis.subset])).screening(quick_plain)

        runner = _Screened(analysis, baseline, quick, quick_limits)
        if all(w.plain is not None or w.candidates[c].kind == "fp32" for w, c in zip(weights, int8, strict=True)):
            runner.full[int8] = fitted_dev  # the search often starts there: that run was just made
        table = _table(weights, limits, options.target)
        with progress.task("auto: searching the assignment"):
            screened = runner.screened
            screen = runner.passes if runner.screening else None
            found = search(table, screened, limits.within, screen)
            found = try_uniform(table, found, _uniform(weights), screened, limits.within)
            found = refine(table, found, screened, limits.within, MAX_REFINE, screen=screen)
            int8_load = sum(_load(w, w.candidates[c]) for w, c in zip(weights, int8, strict=True)
                            if w.candidates[c].kind == "int8")
            cap = load_budget(options) * int8_load
            found = within_load(table, found, cap, screened, limits.within)
        found, plain_wins = _no_larger_than_int8(table, weights, found, (int8, fitted_dev), plain=plain_dev,
                                                 limits=limits, target=options.target)
        LOG.info("auto: search done (%d runs): %s", probe.runs - runs, found.deviation.text())
        if not limits.within(found.deviation):
            raise ShrinkrayError(
                f"auto: even the original weights miss the budget on the probe session ({found.deviation.text()}; "
                f"budget {limits.text()})",
                hint="loosen budget-rel-l2 / budget-cosine / budget-agreement, or leave them unset")
        if plain_wins:
            chosen = {site_key(w.site): (w, _rtn(w)) for w in weights}
            return chosen, f"{PLAIN_WINS}: round-to-nearest int8 ({probe.runs} runs in all)"
        chosen = {site_key(w.site): (w, w.candidates[c]) for w, c in zip(weights, found.choice, strict=True)}
        summary = (f"budget {limits.text()} met: {found.deviation.text()} ({found.evaluations} assignments "
                   f"checked, {probe.runs} runs in all); {rungs_used(c for w, c in chosen.values() if not w.small)}"
                   f"{scales_used(c for w, c in chosen.values() if not w.small)}")
        return chosen, summary

    def write_choice(self, model: ModelProto, analysis: Analysis, options: ShrinkOptions,
                     kind: str) -> list[TensorRecord]:
        """Every weight at its candidate of ``kind`` where it has one (else its original): the
        benchmark's uniform baselines, e.g. all ``int8`` with output-aware rounding."""
        chosen = {}
        for w in analysis.weights:
            c = next((c for c in w.candidates if c.kind == kind), w.candidates[-1])
            chosen[site_key(w.site)] = (w, c)
        return _write(model, options, chosen, f"uniform {kind}")

    @staticmethod
    def _weight(site: Site, options: ShrinkOptions, opset: int, lay: Layout | None,
                calibration: tuple[npt.NDArray[np.float64], int] | None, *,
                head: npt.NDArray[np.bool_] | None = None) -> Weight:
        moments, rows_seen = calibration if calibration is not None else (None, 0)
        w: npt.NDArray[np.float32] = site.array()  # type: ignore[assignment]  # float32 site
        axis, how = choose_axis(site.consumers, site.shape)
        if axis is None:
            axis, how = lowest_error_axis(w, how)
        ctx = EncodeContext(options, opset, tuple(n for n, _ in site.consumers), axis, how)
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


class _Screened:
    """How the search evaluates an assignment (each weight's candidate index): on every feed, but
    only once it keeps the budget on the single-tensor runs' feeds (``passes``)."""

    def __init__(self, analysis: Analysis, baseline: Baseline, quick: Baseline, quick_limits: Limits) -> None:
        self.weights, self.probe, self.subset = analysis.weights, analysis.probe, analysis.subset
        self.base = analysis.base
        self.baseline, self.quick, self.quick_limits = baseline, quick, quick_limits
        self.screening = len(analysis.subset) < len(self.base)
        in_subset = set(analysis.subset)
        self.rest = [i for i in range(len(self.base)) if i not in in_subset]
        self.verdicts: dict[tuple[int, ...], bool] = {}
        self.latest: dict[tuple[int, ...], list[Any]] = {}
        self.full: dict[tuple[int, ...], Deviation] = {}
        """The deviation on every feed of each assignment run there: the search, the uniform seeds
        and the clean-up meet some of the same points, whose runs would give the same outputs."""

    def replaced(self, choice: tuple[int, ...]) -> dict[Key, npt.NDArray[Any]]:
        return {site_key(w.site): w.candidates[c].decoded for w, c in zip(self.weights, choice, strict=True)}

    def evaluate(self, choice: tuple[int, ...]) -> Deviation:
        if choice not in self.full:
            self.full[choice] = deviation(self.baseline, self.probe.run(self.replaced(choice)))
        return self.full[choice]

    def passes(self, choice: tuple[int, ...]) -> bool:
        """Whether ``choice`` keeps the budget on the single-tensor runs' feeds; each choice runs
        there once, and the outputs of the latest are kept for the full run that often follows."""
        if choice not in self.verdicts:
            part = self.probe.run(self.replaced(choice), subset=self.subset)
            self.verdicts[choice] = self.quick_limits.within(deviation(self.quick, part))
            self.latest.clear()
            self.latest[choice] = part
        return self.verdicts[choice]

    def screened(self, choice: tuple[int, ...]) -> Deviation:
        """An assignment runs on every feed only once it keeps the budget on the single-tensor
        runs' feeds: about half of the bisection's points and most clean-up moves do not, and
        that check costs a fraction of a full run. (A point the subset rejects is treated as
        over the budget: at worst a few bytes more, never a looser budget.)"""
        if not self.screening:
            return self.evaluate(choice)
        if not self.passes(choice):
            return BROKEN
        if choice in self.full:
            return self.full[choice]
        part = self.latest.get(choice)
        if part is None:  # screened earlier; its outputs on the subset are gone
            return self.evaluate(choice)
        outputs: list[Any] = [None] * len(self.base)  # the subset's outputs are not run again
        for i, o in zip(self.subset, part, strict=True):
            outputs[i] = o
        for i, o in zip(self.rest, self.probe.run(self.replaced(choice), subset=self.rest), strict=True):
            outputs[i] = o
        self.full[choice] = deviation(self.baseline, outputs)
        return self.full[choice]


def _table(weights: list[Weight], limits: Limits, target: str) -> list[list[Option]]:
    """Per weight, per candidate: its bytes as ``target`` counts them, its deviation in units of the
    budget, and its load cost."""
    def row(w: Weight) -> list[Option]:
        return [Option(_bytes(w, c, target), limits.load(d), _load(w, c))
                for c, d in zip(w.candidates, w.deviations, strict=True)]

    with progress.task("auto: sizes of the candidates", total=len(weights)) as sizing, \
            thread_pool(workers()) as pool:  # zlib and brotli let go of the lock
        table = []
        for options_of_w in pool.map(row, weights):
            table.append(options_of_w)
            sizing.advance()
    return table


SMALLER = 0.99
"""A plan at least 1% under round-to-nearest int8's target bytes may spend error for them: two int8
roundings of one weight differ by a fraction of a percent in estimated compressed bytes, which is
not a saving to trade answers' margins for."""
PLAIN_WINS = "nothing smaller than round-to-nearest int8 kept its answers on the fitting samples"
SMALL_FLOAT = "its small weights float32 here (the plan with them encoded lost)"


Fallback = Callable[[ModelProto], Fitted]
"""What ships instead where the guard's choice would fail verification: the caller's ``int8``."""


def guarded_auto(model: ModelProto, options: ShrinkOptions, calibration: Calibration,
                 held: Calibration | None, *, fallback: Fallback | None = None,
                 original: Scorer | None = None) -> Fitted:
    """``auto`` fitted on ``calibration``, its plan kept only if on the ``held`` units it does no
    worse than round-to-nearest int8 (``guard``); otherwise ``model`` gets round-to-nearest int8.
    The plan is judged first with the small weights of layers as it encodes them and the other small
    tensors in fp16 (``small``); where that loses, or is over verification's limits there, the same
    plan's other weights are judged with every small tensor in fp16, then without them. That plan has
    less error than the one that lost (its small weights are back at float32) and costs no second
    search (as long as the first; at the same budget, its plan spends the same error elsewhere).
    Where what the guard chose is over verification's limits on the ``held`` units (the build
    would fail), ``fallback`` writes ``model`` instead (``int8`` with output-aware rounding).
    ``original``: the original's outputs on the ``held`` units, judged (else they are run here)."""
    auto = Auto()
    analysis = auto.analyse(model, options, calibration, small_weights=held is not None and len(held) > 0)
    if analysis is None:
        return Fitted(encode_weights(model, Int8Encoder(), options), None)
    judged = _HeldOut(model, analysis, options, held, original) if held is not None and len(held) else None
    chosen, summary = auto.choose(analysis, options)
    small = small_tensors(model, options, {k: c.decode for k, (w, c) in chosen.items()
                                           if w.small and c.decode is not None})
    losses: list[str] = []
    if small.planned and judged is not None:
        large = {k: (w, c) for k, (w, c) in chosen.items() if not w.small}
        with_small = judged.judge(large, small)
        over = over_limits(with_small, options)
        if with_small.kept and not over:
            return Fitted(_write(model, options, large, f"{summary}; {small.words()}", small),
                          replace(with_small, also=small.words()))
        losses.append(f"with {small.name}, not kept: {over or with_small.fitted.text()}")
    if all(w.small for w in analysis.weights):  # as without the small weights: no weight to choose for
        return Fitted(encode_weights(model, Int8Encoder(), options), None)
    chosen = {k: (w, c) for k, (w, c) in chosen.items() if not w.small}
    if small.planned:
        chosen, summary = _without_small(chosen, summary, options.target)
    if small.fp16 is not None:
        small = small.fp16
    del analysis
    if small and judged is not None:
        with_small = judged.judge(chosen, small)
        over = over_limits(with_small, options)
        if with_small.kept and not over:
            return Fitted(_write(model, options, chosen, f"{summary}; {small.words()}", small),
                          replace(with_small, also="; ".join([*losses, small.words()])))
        losses.append(f"with {small.name}, not kept: {over or with_small.fitted.text()}")
    lost = "; ".join(losses)
    outcome: Verdict | None = None
    if all(c is _rtn(w) for w, c in chosen.values()):
        outcome = Unfitted(f"auto shipped int8 round-to-nearest: {PLAIN_WINS}" + (f"; {lost}" if lost else ""),
                           FitNote(Fit.NOT_FITTED, "auto", FitReason.NOTHING_SMALLER))
    elif judged is not None:
        judgement = judged.judge(chosen)
        outcome = replace(judgement, also="; ".join(filter(None, (lost, judgement.also))))
    del judged
    over = over_limits(outcome, options)
    if over and fallback is not None:
        fallen = fallback(model)
        why = f"; {fallen.outcome.text()}" if fallen.outcome is not None else ""
        return Fitted(fallen.records, Unfitted(f"{over}: {INT8_INSTEAD} ships instead{why}",
                                               FitNote(Fit.NOT_KEPT, "auto's plan", FitReason.OVER_LIMITS,
                                                       instead=_rounding(fallen))))
    if outcome is not None and not outcome.kept:
        if fallback is None:
            return Fitted(encode_weights(model, Int8Encoder(), options), outcome)
        return _instead(outcome, fallback(model))
    return Fitted(_write(model, options, chosen, summary), outcome)


INT8_INSTEAD = "int8 as method int8 writes it (its output-aware rounding where its guard keeps that)"


def _rounding(fallen: Fitted) -> Fit:
    """What int8's output-aware rounding became where int8 ships instead of the plan."""
    if fallen.outcome is None:
        return Fit.NOT_FITTED
    return Fit.KEPT if fallen.outcome.kept else Fit.NOT_KEPT


def _instead(outcome: Verdict, fallen: Fitted) -> Fitted:
    """Int8 as method ``int8`` writes it with the same recording ships where ``auto``'s plan does not
    (``outcome``): ``auto`` never ships less than ``int8`` would, and its words say which rounding that
    is (the fitted codes, or round-to-nearest ones)."""
    then = f"; int8: {fallen.outcome.text()}" if fallen.outcome is not None else ""
    instead = _rounding(fallen)
    if isinstance(outcome, Outcome):
        return Fitted(fallen.records, replace(outcome, instead=instead, also="; ".join(
            filter(None, (outcome.also, then.removeprefix("; "))))))
    note = outcome.brief()
    return Fitted(fallen.records, Unfitted(f"{outcome.text().replace('int8 round-to-nearest', 'int8')}{then}",
                                           replace(note, instead=instead) if note is not None else None))


def _without_small(chosen: dict[Key, tuple[Weight, Candidate]], summary: str,
                   target: str) -> tuple[dict[Key, tuple[Weight, Candidate]], str]:
    """The plan's other weights as it chose them, where that is smaller in ``target`` than every one
    of them at round-to-nearest int8; else round-to-nearest int8 (the plan may have paid for them with
    what its small weights saved, and ``auto`` never ships more than int8's bytes for its weights)."""
    if sum(_bytes(w, c, target) for w, c in chosen.values()) < sum(
            _bytes(w, _rtn(w), target) for w, _ in chosen.values()):
        return chosen, f"{summary}; {SMALL_FLOAT}"
    return ({k: (w, _rtn(w)) for k, (w, _) in chosen.items()},
            f"{summary}; {SMALL_FLOAT}, no smaller than round-to-nearest int8, which it is here")


def over_limits(outcome: Verdict | None, options: ShrinkOptions) -> str:
    """What the guard chose and the verification limits it breaks on the held-out units, in words
    (empty: none, or no comparison was made): the verification after ``auto`` runs there, so
    shipping it would fail the build where ``int8`` may pass (a plan can be over the default
    relative-L2 limit on the held-out units even where it beats round-to-nearest int8 there)."""
    if not isinstance(outcome, Outcome):
        return ""
    ships = outcome.fitted if outcome.kept else outcome.plain
    over = ships.over(options.verify)
    if not over:
        return ""
    what = "auto's plan" if outcome.kept else "round-to-nearest int8"
    return f"{what} is over verification's limits on the held-out half ({over})"


class _HeldOut:
    """The held-out units where the guard judges a plan: one probe session, the original's outputs
    there judged once, and round-to-nearest int8's score, shared by the plan with the small tensors
    in fp16 and the plan without them (int8 keeps the small tensors float32, as method int8 writes
    them). The probe and the scores are made on first use: a plan that is round-to-nearest int8
    itself, without small tensors to store, is never judged."""

    def __init__(self, model: ModelProto, analysis: Analysis, options: ShrinkOptions, held: Calibration,
                 original: Scorer | None) -> None:
        self.model, self.options, self.held, self.original = model, options, held, original
        small = {site_key(w.site) for w in analysis.weights if w.small}
        self.originals = {k: v for k, v in analysis.probe.originals.items() if k not in small}  # theirs: ``small``
        self.plain = {site_key(w.site): w.plain for w in analysis.weights if w.plain is not None}  # made in _weight
        self.fitted_int8 = {site_key(w.site): w.candidates[c].decoded for w, c in
                            zip(analysis.weights, _int8_choice(analysis.weights), strict=True)
                            if w.plain is not None and w.candidates[c].kind == "int8"}
        """Method int8's codes fitted on the same half (output-aware rounding): what ships instead
        where the plan keeps fewer held-out answers than they do."""

    @cached_property
    def probe(self) -> Probe:
        return self._probe(weights_as_inputs(self.model, set(self.originals)))

    @cached_property
    def score(self) -> Scorer:
        probe = self.probe
        return self.original or Scorer.of(probe.names[: probe.n_outputs], probe.run(), probe.seq,
                                          self.options.verify, probe.feeds)

    @cached_property
    def rtn(self) -> Score:
        return self.score(self.probe.run(self.plain))

    @cached_property
    def int8(self) -> Score:
        return self.score(self.probe.run({**self.plain, **self.fitted_int8}))

    def _probe(self, fed: ProbeModel) -> Probe:
        return Probe(fed, list(self.held.feeds), self.originals, self.held.seq)

    def judge(self, chosen: dict[Key, tuple[Weight, Candidate]], small: Small | None = None) -> Outcome:
        """The plan (with ``small``'s tensors in fp16, where given) against round-to-nearest int8,
        each against the original."""
        rtn = self.rtn
        probe = self.probe
        if small:
            # Its own probe, the small tensors in it as the folded Cast gives them: fed as inputs
            # instead, they would keep onnxruntime from the fusions the shipped model gets.
            fed = weights_as_inputs(self.model, set(self.originals))
            with_values(fed.model, small.values)
            probe = self._probe(fed)
        fitted = self.score(probe.run({k: c.decoded for k, (_, c) in chosen.items()}))
        target = self.options.target
        as_float32, as_fp16 = (small.sizes[target] if target in small.sizes else (small.sizes["disk"][0],) * 2) \
            if small else (0, 0)  # memory: the small tensors' fp16 is float32 once folded
        smaller = sum(_bytes(w, c, target) for w, c in chosen.values()) + as_fp16 < SMALLER * (sum(
            _bytes(w, _rtn(w), target) for w, _ in chosen.values()) + as_float32)
        units = self.held.seq.unit_count()
        # A plan may spend error for bytes where the held-out decisions can tell a tie from chance. One
        # no smaller than round-to-nearest int8 has nothing to spend it on, and on fewer than MIN_UNITS
        # held-out units a tie on decisions says little: then the tie goes to the smaller error, as for
        # int8's own rounding. (With few held-out units, a slightly smaller plan at a larger error can
        # tie on the held-out decisions and still change more unseen answers than int8.) Nor does a tie
        # at nothing flipped on either side, however many units: ``decide`` gives that to the error.
        by_error = not smaller or units < MIN_UNITS
        given = any(b is not None for b in (self.options.budget_rel_l2, self.options.budget_cosine,
                                            self.options.budget_agreement))
        outcome = decide("auto's plan", fitted, rtn, units, "the held-out half", by_error=by_error, budget_given=given)
        if not outcome.kept or not self.fitted_int8 or fitted.key(False) <= self.int8.key(False):
            return outcome
        int8 = self.int8  # fitted on the same half: a plan that keeps less than int8's rounding is no gain
        return replace(outcome, kept=False, also=f"int8 with output-aware rounding does better there ({int8.changed} "
                       f"{int8.describes} changed, {int8.flips} decisions flipped)")


def _bytes(w: Weight, c: Candidate, target: str) -> int:
    """``c``'s bytes as ``target`` counts them (``memory``: ``resident.cost``)."""
    return resident.cost(w.site, c) if target == resident.MEMORY else c.target_bytes(target)


def _rtn(w: Weight) -> Candidate:
    """The weight's round-to-nearest int8, or its float32 where int8 cannot encode it."""
    return w.rtn if w.rtn is not None else w.candidates[-1]


def _judges(probe: Probe, options: ShrinkOptions, base: list[list[npt.NDArray[Any]]]) -> list[str]:
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


def load_budget(options: ShrinkOptions) -> float:
    """``budget-load`` as set, else the default for the declared runtimes."""
    if options.budget_load is not None:
        return options.budget_load
    return WEB_LOAD_BUDGET if runtimes.parse(options.runtimes).web else LOAD_BUDGET


def _load(w: Weight, c: Candidate) -> int:
    """Load cost of candidate ``c``: nothing for MatMulNBits, float32 or a table decoded per gathered row."""
    if c.decode is None or rows_decodable(w.site, c.decode):
        return 0
    return c.decode.folded_bytes


def _int8_choice(weights: list[Weight]) -> tuple[int, ...]:
    """Every weight at its int8 candidate (output-aware rounding), or float32 where it has none (or is
    small: method int8 keeps it float32)."""
    return tuple(next((j for j, c in enumerate(w.candidates) if c.kind == "int8" and not w.small),
                      len(w.candidates) - 1) for w in weights)


def _no_larger_than_int8(table: list[list[Option]], weights: list[Weight], found: Found,
                         int8: tuple[tuple[int, ...], Deviation], *, plain: Deviation, limits: Limits,
                         target: str) -> tuple[Found, bool]:
    """The smallest of ``found``, the ``int8`` assignment (output-aware rounding, with its deviation)
    and every weight at round-to-nearest int8, each only when within the limits (verification's
    included); True when round-to-nearest is the one. The search moves weights by estimated
    energies and can end above int8 where the fitting samples are few, or where output-aware
    rounding does worse than plain rounding (with a handful of fitting samples it can put every
    large weight at int16, about twice int8's bytes)."""
    def size(c: tuple[int, ...]) -> int:
        return sum(table[i][j].stored_bytes for i, j in enumerate(c))

    choice, fitted = int8
    if size(choice) < size(found.choice) and limits.within(fitted):
        found = Found(choice, fitted, found.lam, found.evaluations)
    rtn = [_bytes(w, _rtn(w), target) for w in weights]
    return found, limits.within(plain) and sum(rtn) < size(found.choice)


def _uniform(weights: list[Weight]) -> list[tuple[int, ...]]:
    """Per rung of the ladder (4 bits, then 7 ... 255 levels, then 16 bits): every weight at its
    first candidate on at least that rung (its last, float32, where none)."""
    rungs = sorted({_rung(c) for w in weights for c in w.candidates if not c.split})
    return [tuple(next((j for j, c in enumerate(w.candidates) if not c.split and _rung(c) >= r), len(w.candidates) - 1)
                  for w in weights) for r in rungs]


def _rung(c: Candidate) -> tuple[int, int]:
    return c.bits, rung_levels(c.kind) or 0


def rungs_used(chosen: Iterable[Candidate]) -> str:
    """Which rungs of the ladder a plan uses, in words, most weights first (``int8 with coarser
    steps (1 bit a value fewer) for 2 weights, int8 for 1``)."""
    counts: dict[str, int] = {}
    for c in chosen:
        words = rung_words(c.kind)
        counts[words] = counts.get(words, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{words} for {n} weight{'s' if n != 1 else ''}" if i == 0 else f"{words} for {n}"
             for i, (words, n) in enumerate(ranked)]
    return "rungs used: " + ", ".join(parts)


def scales_used(chosen: Iterable[Candidate]) -> str:
    """How many of a plan's int8 weights store their scales as fp16, in words (empty: none has
    int8 scales); the others keep float32 scales, which fp16 cannot hold exactly."""
    dtypes = [c.decode.stored["scale"].dtype for c in chosen
              if c.decode is not None and c.bits == INT8_BITS and "scale" in c.decode.stored]
    if not dtypes:
        return ""
    half = sum(d == np.float16 for d in dtypes)
    return f"; int8 scales in fp16 for {half} of {len(dtypes)} weight{'s' if len(dtypes) != 1 else ''}"


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
    splits = [j for j in lossy if w.candidates[j].split]
    runs = [*reference, *low, *splits][:budget]
    for j in runs:
        got = probe.run({key: w.candidates[j].decoded}, subset=subset)
        w.deviations[j] = deviation(baseline, got)
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


def _why(w: Weight, chosen: Candidate) -> str:
    parts = [f"{c.kind} {d.rel_l2:.1e}/{d.risk:.1e}{'' if m else '~'}"
             for c, d, m in zip(w.candidates, w.deviations, w.measured, strict=True) if c.kind != "fp32"]
    text = "alone (rel-L2/decision risk): " + ", ".join(parts)
    if w.fixed:
        text = f"{w.fixed}: int8 as method int8 would"
    if chosen.note:
        text += f"; {chosen.note}"
    return text


def _write(model: ModelProto, options: ShrinkOptions, chosen: dict[Key, tuple[Weight, Candidate]],
           summary: str, small: Small | None = None) -> list[TensorRecord]:
    plan = {k: c.decode for k, (_, c) in chosen.items() if c.decode is not None}
    enc = Planned(plan, Int8Encoder(), fallback_float32=False)
    records = encode_weights(model, enc, options, select=enc.select)
    out: list[TensorRecord] = []
    for r in records:
        key = (r.scope, r.name)
        if key not in chosen:
            out.append(r)
            continue
        w, c = chosen[key]
        why = _why(w, c)
        if c.kind == "fp32":
            out.append(replace(r, encoding="kept", note=f"most sensitive: kept float32; {why}"))
        elif c.kind == NBITS:
            continue
        else:
            out.append(replace(r, note=f"{ROWS_NOTE}; {why}" if ROWS_NOTE in r.note else why))
    int4 = [(w, c) for w, c in chosen.values() if c.kind == NBITS]
    if int4:
        _matmul_nbits(model, options, [w.site.name for w, _ in int4])
        for w, c in int4:
            out.append(record(w.site, c.label, _why(w, c), c.stored_bytes))
    if small:
        out.extend(write_small(model, options, small))
    if out:
        out[0] = replace(out[0], note=f"{out[0].note} [auto: {summary}]".strip())
    return out


def _matmul_nbits(model: ModelProto, options: ShrinkOptions, names: list[str]) -> None:
    """Quantize the MatMuls reading ``names`` with onnxruntime's quantizer (QOperator format: its QDQ
    format raises the opset without converting the other ops)."""
    from hatch_shrinkray.methods.int4 import quantize_matmuls

    wanted = set(names)
    fresh = Names(model)
    include: list[str] = []
    for node in model.graph.node:
        if node.op_type == "MatMul" and len(node.input) > 1 and node.input[1] in wanted:
            if not node.name:
                node.name = fresh.fresh(f"{node.input[1]}_MatMul")
            include.append(node.name)
    quantize_matmuls(model, include, options.block_size)
