"""``check --fix``'s rung between int8 round-to-nearest and fp16: a per-tensor plan for the blamed
model, found by ``check --search``'s machinery on that model alone.

fp16 doubles a model's int8 size, and a model that needs a little more than int8 often needs it in
a few tensors only. So, from int8 round-to-nearest (which has just failed), the most sensitive
tensors on the command's own feeds are kept fp16 (top 1, 2, 4, ... until the tests pass, then
bisected to the fewest), and each of them, largest first, is moved down to int12 or int10 while the
tests still pass. Every step keeps the tensors at or below fp16, so every plan that passes is at
most fp16's size; the smallest one that passed, if smaller than the fp16 rung, is the rung.

A step is one run of the command with every other model as chosen so far (the test runs are what
this rung costs), and :data:`PLAN_RUNS` bounds them; a candidate with the bytes of a run already
made, that fails the tolerance verification the build runs too, or that keeps fewer answers than
round-to-nearest int8 on the recording (``Floor``), costs no run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hatch_shrinkray.capture.observe import ModelSeen, Observed
from hatch_shrinkray.checking.check import Settings
from hatch_shrinkray.checking.models import Configured, Prepared, only, prepare
from hatch_shrinkray.checking.search import Key, TensorSearch, Trial, kept_words, outputs_on
from hatch_shrinkray.checking.verdict import Verdict, judge
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.fitting.guard import Score, Scorer, decide
from hatch_shrinkray.onnxgraph.modelio import load_model
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import human
from hatch_shrinkray.shipping.display import Display
from hatch_shrinkray.verification.inputs import Samples, load_samples, specs_of_model

PLAN_RUNS = 12
"""The runs the per-tensor rung is offered (``check --fix --max-runs N`` sets them; without it the
rung is not tried, so that ``--fix`` costs a few runs of a whole test suite). Finding how many tensors to keep
takes about log2(tensors) + 1 runs (5 for 16 tensors), moving each kept tensor down takes one or
two: twelve let a model that needs four or five tensors above int8 reach its small plan, and cost a
fraction of what a ``check --search`` (16 by default, from float32) would. Beyond that the plan's
gain over fp16 rarely pays for more runs of a whole test suite: the fp16 rung costs one."""
LADDER = ("int10", "int12", "fp16")
"""Where each kept tensor may move, cheapest first, up to fp16 (the next rung)."""

Run = Callable[[Prepared, str], tuple[Verdict, bool, bool]]
"""One run with ``candidate`` swapped in and every other model as chosen, labelled: the verdict,
whether it passed (no test regressed but the flaky ones), and whether the command ran (False: a
run already made had these very bytes)."""


class PlanSearch(TensorSearch):
    prefix = "check --fix"
    top = "fp16"

    def __init__(self, configured: Configured, settings: Settings, app: Display, *, original: Observed,
                 prepared: Prepared, base: ShrinkOptions, workdir: Path, run: Run, recorded: Path,
                 max_runs: int = PLAN_RUNS) -> None:
        super().__init__(configured, settings, app, original=original, prepared=replace(prepared, options=base),
                         workdir=workdir, max_runs=max_runs)
        self.ladder = LADDER
        self._run_one = run
        self._candidates = 0
        self._recorded = recorded
        self._floor: Floor | None = None
        """The round-to-nearest floor, made at the first candidate with a tensor wider."""
        self._floorless = False
        """Nothing to judge the floor on (said once): the tests alone decide."""

    def _candidate(self, plan: tuple[tuple[str, str, str], ...]) -> Prepared:
        # A directory per candidate, not per run: a candidate that costs no run must not be overwritten
        # by the next one (it may be the smallest that passed).
        self._candidates += 1
        options = replace(self.prepared.options, plan=plan)
        (p,) = prepare(only(self.configured, self.prepared), self.workdir / str(self._candidates), self.app,
                       chosen={self.prepared.sha256: options})
        return p

    def _judge(self, p: Prepared, tensors: dict[Key, str]) -> Trial:
        assert p.shrunk is not None
        digest = file_sha256(p.shrunk)
        kept = kept_words(tensors, p) if tensors else "no tensor wider"  # the base: int8 round-to-nearest
        words = f"{self.prepared.relpath}: per-tensor plan, {kept} ({human(p.shrunk_size)})"
        nothing = judge(self.original, self.original)
        if not p.passed:  # the build would refuse to ship it
            self.runs -= 1
            self.app.display_info(f"check --fix: {words}: {p.verification}, which the build runs too; not run")
            return Trial(dict(tensors), nothing, ModelSeen(), p, digest, False)
        worse = self._worse(p) if tensors else ""
        if worse:  # the do-no-harm floor refuses it whatever the tests say
            self.runs -= 1
            self.app.display_info(f"check --fix: {words}: {worse}; not run")
            return Trial(dict(tensors), nothing, ModelSeen(), p, digest, False)
        verdict, passed, ran = self._run_one(p, words)
        if not ran:
            self.runs -= 1
        self.step.at(self.runs, "")
        return Trial(dict(tensors), verdict, ModelSeen(), p, digest, passed)

    def _worse(self, p: Prepared) -> str:
        if self._floor is None and not self._floorless:
            self._floor = Floor.of(self, self._recorded)
            self._floorless = self._floor is None
        assert p.shrunk is not None
        return "" if self._floor is None else self._floor.worse(p.shrunk)

    def _every_tensor_fails(self) -> None:
        self.app.display_info(f"check --fix: {self.prepared.relpath}: the tests fail even with every searched tensor "
                              "kept fp16: no per-tensor plan below fp16")


def plan_rung(search: PlanSearch, recorded: Path, ceiling: int) -> tuple[Trial | None, str]:
    """The smallest plan that passed within the runs (each no worse than round-to-nearest int8:
    ``Floor``), if it is smaller than ``ceiling`` (the next rung's size); else None and why, in the
    words of the reason's list of rungs that did not do."""
    best = search.run(recorded).best
    ran = f"{search.runs} run{'' if search.runs == 1 else 's'}"
    if best is None or best.prepared.shrunk is None:
        return None, f"a per-tensor plan (none passed in {ran})"
    if best.prepared.shrunk_size >= ceiling:
        return None, f"a per-tensor plan smaller than {human(ceiling)} (none in {ran})"
    return best, ""


@dataclass(frozen=True)
class Floor:
    """The do-no-harm floor for the blamed model's plans: round-to-nearest int8's answers on the
    project's recording (else on the command's own feeds, which ranked the tensors). The tests
    keep a plan and fp16 alike, so the recording decides, as for ``check --search``'s plans; and a
    wider tensor can undo an error that cancelled another and pass a test by chance while more
    unseen answers change. Judged before a candidate's run: one that does harm costs none."""

    relpath: str
    samples: Samples
    held: str
    score: Scorer
    plain: Score

    @classmethod
    def of(cls, search: PlanSearch, recorded: Path) -> Floor | None:
        p = search.prepared
        inputs = p.options.verify.inputs if p.options.verify is not None else None
        sources = [(inputs, "the recording")] if inputs is not None and inputs.exists() else []
        try:
            samples, held = _first_samples(p, [*sources, (recorded, "the command's own feeds")])
            (plain,) = prepare(only(search.configured, p), search.workdir / "plain", search.app,
                               chosen={p.sha256: replace(p.options, plan=())})
            assert plain.shrunk is not None
            names, base = outputs_on(p.source, samples, p.relpath)
            score = Scorer.of(names, base, samples.sequencing(), p.options.verify, samples.feeds)
            return cls(p.relpath, samples, held, score, score(outputs_on(plain.shrunk, samples, p.relpath)[1]))
        except ShrinkrayError as exc:  # nothing to judge on: the tests alone decide
            search.app.display_info(f"check --fix: {p.relpath}: per-tensor plans are not compared with "
                                    f"round-to-nearest int8: {exc}")
            return None

    def worse(self, candidate: Path) -> str:
        """Why ``candidate`` is below the floor (empty: it is not)."""
        units = self.samples.sequencing().unit_count()
        outcome = decide("the per-tensor plan", self.score(outputs_on(candidate, self.samples, self.relpath)[1]),
                         self.plain, units, self.held)
        if outcome.kept:
            return ""
        fitted, plain = outcome.fitted, outcome.plain
        tied = (fitted.changed, fitted.flips) == (plain.changed, plain.flips)
        error = f", and on a tie the error: squared rel-L2 {fitted.error:.3g} vs {plain.error:.3g}" if tied else ""
        return (f"worse than round-to-nearest int8 on {units} units of {self.held} ({fitted.changed} vs "
                f"{plain.changed} {plain.describes} changed, {fitted.flips} vs {plain.flips} decisions flipped"
                f"{error})")


def _first_samples(p: Prepared, sources: list[tuple[Path, str]]) -> tuple[Samples, str]:
    """The samples of ``p`` in the first of ``sources`` that holds them, with its name for people."""
    specs = specs_of_model(load_model(p.source).model)
    for source, held in sources[:-1]:
        try:
            return load_samples(source, specs, model_sha256=p.sha256, model_name=p.relpath), held
        except ShrinkrayError:
            continue  # e.g. the project's recording holds no call of this model
    source, held = sources[-1]
    return load_samples(source, specs, model_sha256=p.sha256, model_name=p.relpath), held
