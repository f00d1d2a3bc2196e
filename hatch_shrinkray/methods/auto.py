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

from collections.abc import Callable
from dataclasses import replace
from functools import cached_property

from onnx import ModelProto

from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.fitting.calibrate import Key
from hatch_shrinkray.fitting.candidates import Candidate
from hatch_shrinkray.fitting.guard import Outcome, Score, Scorer, Unfitted, Verdict, decide
from hatch_shrinkray.fitting.probe import Probe, ProbeModel, site_key, weights_as_inputs
from hatch_shrinkray.fitting.small import Small, small_tensors, with_values
from hatch_shrinkray.methods.auto_search import PLAIN_WINS, choose, int8_choice, write_chosen
from hatch_shrinkray.methods.auto_weights import Analysis, Weight, analyse, rtn_of, target_bytes
from hatch_shrinkray.methods.base import NEAREST_INT8, Fitted, Needs
from hatch_shrinkray.methods.int8 import Int8, fit_int8
from hatch_shrinkray.onnxgraph.encoding import Calibration
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.options import Remedy, ShrinkOptions
from hatch_shrinkray.result import Fit, FitNote, FitReason
from hatch_shrinkray.samples import joined


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
        """Real samples, half of their units held out to judge the plan on (its search is too costly to
        cross-fit, once per fold), and the original's outputs there before the encoding (verification
        compares with the same)."""
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


SMALLER = 0.99
"""A plan at least 1% under round-to-nearest int8's target bytes may spend error for them: two int8
roundings of one weight differ by a fraction of a percent in estimated compressed bytes, which is
not a saving to trade answers' margins for."""
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
    analysis = analyse(model, options, calibration, small_weights=held is not None and len(held) > 0)
    if analysis is None:
        return Fitted(encode_weights(model, Int8Encoder(), options), None)
    judged = _HeldOut(model, analysis, options, held, original) if held is not None and len(held) else None
    chosen, summary = choose(analysis, options)
    small = small_tensors(model, options, {k: c.decode for k, (w, c) in chosen.items()
                                           if w.small and c.decode is not None})
    losses: list[str] = []
    if small.planned and judged is not None:
        large = {k: (w, c) for k, (w, c) in chosen.items() if not w.small}
        with_small = judged.judge(large, small)
        over = over_limits(with_small, options)
        if with_small.kept and not over:
            return Fitted(write_chosen(model, options, large, f"{summary}; {small.words()}", small),
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
            return Fitted(write_chosen(model, options, chosen, f"{summary}; {small.words()}", small),
                          replace(with_small, also="; ".join([*losses, small.words()])))
        losses.append(f"with {small.name}, not kept: {over or with_small.fitted.text()}")
    lost = "; ".join(losses)
    outcome: Verdict | None = None
    if all(c is rtn_of(w) for w, c in chosen.values()):
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
    return Fitted(write_chosen(model, options, chosen, summary), outcome)


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
    if sum(target_bytes(w, c, target) for w, c in chosen.values()) < sum(
            target_bytes(w, rtn_of(w), target) for w, _ in chosen.values()):
        return chosen, f"{summary}; {SMALL_FLOAT}"
    return ({k: (w, rtn_of(w)) for k, (w, _) in chosen.items()},
            f"{summary}; {SMALL_FLOAT}, no smaller than round-to-nearest int8, which it is here")


def over_limits(outcome: Verdict | None, options: ShrinkOptions) -> str:
    """What the guard chose and the verification limits it breaks on the held-out units, in words
    (empty: none, or no comparison was made): the verification after ``auto`` runs there, so
    shipping it would fail the build where ``int8`` may pass (a plan can be over the default
    relative-L2 limit on the held-out units even where it beats round-to-nearest int8 there)."""
    if not isinstance(outcome, Outcome):
        return ""
    over = (outcome.fitted if outcome.kept else outcome.plain).over(options.verify)
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
                            zip(analysis.weights, int8_choice(analysis.weights), strict=True)
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
        smaller = sum(target_bytes(w, c, target) for w, c in chosen.values()) + as_fp16 < SMALLER * (sum(
            target_bytes(w, rtn_of(w), target) for w, _ in chosen.values()) + as_float32)
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


