"""``auto``'s search: the assignment of one candidate per weight that is smallest in the target's
bytes within the budget (knapsack, then the uniform and greedy clean-ups, the load cap and the int8
floor), and the writing of it into the model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray import progress
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.fitting.budget import BROKEN, Baseline, Deviation, Limits, deviation
from hatch_shrinkray.fitting.calibrate import Key
from hatch_shrinkray.fitting.candidates import NBITS, Candidate, rung_levels, rung_words
from hatch_shrinkray.fitting.choices import Planned
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.fitting.search import Found, Option, refine, search, try_uniform, within_load
from hatch_shrinkray.fitting.small import Small, write_small
from hatch_shrinkray.methods import runtimes
from hatch_shrinkray.methods.auto_weights import LOG, Analysis, Weight, judges_for, load_of, rtn_of, target_bytes
from hatch_shrinkray.numerics.threads import workers
from hatch_shrinkray.onnxgraph.graph import Names
from hatch_shrinkray.onnxgraph.rewrite import ROWS_NOTE, encode_weights, record
from hatch_shrinkray.options import LOAD_BUDGET, WEB_LOAD_BUDGET, ShrinkOptions
from hatch_shrinkray.pool import thread_pool
from hatch_shrinkray.result import TensorRecord

MAX_REFINE = 8
"""Full-model runs for the greedy clean-up after the bisection (largest savings first)."""

INT8_BITS = 8


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

PLAIN_WINS = "nothing smaller than round-to-nearest int8 kept its answers on the fitting samples"
"""What the summary says where round-to-nearest int8 is the smallest choice that keeps the answers."""


def _table(weights: list[Weight], limits: Limits, target: str) -> list[list[Option]]:
    """Per weight, per candidate: its bytes as ``target`` counts them, its deviation in units of the
    budget, and its load cost."""
    def row(w: Weight) -> list[Option]:
        return [Option(target_bytes(w, c, target), limits.load(d), load_of(w, c))
                for c, d in zip(w.candidates, w.deviations, strict=True)]

    with progress.task("auto: sizes of the candidates", total=len(weights)) as sizing, \
            thread_pool(workers()) as pool:  # zlib and brotli let go of the lock
        table = []
        for options_of_w in pool.map(row, weights):
            table.append(options_of_w)
            sizing.advance()
    return table


def load_budget(options: ShrinkOptions) -> float:
    """``budget-load`` as set, else the default for the declared runtimes."""
    if options.budget_load is not None:
        return options.budget_load
    return WEB_LOAD_BUDGET if runtimes.parse(options.runtimes).web else LOAD_BUDGET


def int8_choice(weights: list[Weight]) -> tuple[int, ...]:
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
    rtn = [target_bytes(w, rtn_of(w), target) for w in weights]
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


def _why(w: Weight, chosen: Candidate) -> str:
    parts = [f"{c.kind} {d.rel_l2:.1e}/{d.risk:.1e}{'' if m else '~'}"
             for c, d, m in zip(w.candidates, w.deviations, w.measured, strict=True) if c.kind != "fp32"]
    text = f"{w.fixed}: int8 as method int8 would" if w.fixed else "alone (rel-L2/decision risk): " + ", ".join(parts)
    if chosen.note:
        text += f"; {chosen.note}"
    return text


def write_chosen(model: ModelProto, options: ShrinkOptions, chosen: dict[Key, tuple[Weight, Candidate]],
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


def choose(analysis: Analysis, options: ShrinkOptions) -> tuple[dict[Key, tuple[Weight, Candidate]], str]:
    """The budget's assignment (each weight's candidate) and a line saying how it was found."""
    weights, probe, base = analysis.weights, analysis.probe, analysis.base
    runs = probe.runs
    judges = judges_for(probe, options, base)
    baseline = Baseline(base, judges)
    quick = analysis.quick[1] if analysis.quick is not None and analysis.quick[0] == tuple(judges) else \
        Baseline([base[k] for k in analysis.subset], judges)
    plain = {site_key(w.site): w.plain for w in weights if w.plain is not None}
    int8 = int8_choice(weights)
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
        int8_load = sum(load_of(w, w.candidates[c]) for w, c in zip(weights, int8, strict=True)
                        if w.candidates[c].kind == "int8")
        found = within_load(table, found, load_budget(options) * int8_load, screened, limits.within)
    found, plain_wins = _no_larger_than_int8(table, weights, found, (int8, fitted_dev), plain=plain_dev,
                                             limits=limits, target=options.target)
    LOG.info("auto: search done (%d runs): %s", probe.runs - runs, found.deviation.text())
    if not limits.within(found.deviation):
        raise ShrinkrayError(
            f"auto: even the original weights miss the budget on the probe session ({found.deviation.text()}; "
            f"budget {limits.text()})",
            hint="loosen budget-rel-l2 / budget-cosine / budget-agreement, or leave them unset")
    if plain_wins:
        chosen = {site_key(w.site): (w, rtn_of(w)) for w in weights}
        return chosen, f"{PLAIN_WINS}: round-to-nearest int8 ({probe.runs} runs in all)"
    chosen = {site_key(w.site): (w, w.candidates[c]) for w, c in zip(weights, found.choice, strict=True)}
    summary = (f"budget {limits.text()} met: {found.deviation.text()} ({found.evaluations} assignments "
               f"checked, {probe.runs} runs in all); {rungs_used(c for w, c in chosen.values() if not w.small)}"
               f"{scales_used(c for w, c in chosen.values() if not w.small)}")
    return chosen, summary
