"""``check --search``: the smallest model the package's own tests accept, written as a plan.

Per model, starting from the configured method: the tensors are ordered by their single-tensor
sensitivity on the feeds the command itself gave the model (``sensitive``); the top ``k`` are kept
float32 for k = 0, 1, 2, 4, ... until a run passes, then k is bisected down to the fewest that
pass; then each kept tensor, largest first, is bisected down the ladder of cheaper encodings
(int10, int12, fp16 above int8). A run *passes* when no test regresses against the run with the
original models and the shadow decisions (the original model runs beside the candidate on every
call) flip at most ``max_flip_rate`` of the time. Every run is one run of the command; ``max_runs``
bounds them. The result goes into the plan file, keyed by the model's sha256, with what accepted it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hatch_shrinkray import progress
from hatch_shrinkray.capture.observe import ModelSeen, Observed
from hatch_shrinkray.checking import check
from hatch_shrinkray.checking.models import Configured, Prepared, only, prepare
from hatch_shrinkray.checking.sensitive import ranked
from hatch_shrinkray.checking.verdict import Verdict, judge, tally
from hatch_shrinkray.engine import shrink
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.evidence import MIN_UNITS, unit_kind
from hatch_shrinkray.files import temporary_directory
from hatch_shrinkray.fitting.guard import Scorer, decide
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.onnxgraph.graph import find_sites
from hatch_shrinkray.onnxgraph.modelio import load_model
from hatch_shrinkray.recording.format import SHA_DIGITS
from hatch_shrinkray.result import human
from hatch_shrinkray.shipping.display import Display
from hatch_shrinkray.shipping.manifest import file_sha256
from hatch_shrinkray.shipping.plan import PlanEntry
from hatch_shrinkray.verification.inputs import Samples, load_samples, specs_of_model
from hatch_shrinkray.verification.runner import run_all, session

Key = tuple[str, str]


@dataclass(frozen=True)
class Trial:
    tensors: dict[Key, str]
    verdict: Verdict
    seen: ModelSeen
    prepared: Prepared
    shrunk_sha256: str
    passed: bool

    @property
    def flips(self) -> tuple[int, int]:
        stats = self.seen.stats
        return (0, 0) if stats is None else (stats.flips, stats.positions)


@dataclass(frozen=True)
class Found:
    prepared: Prepared
    """The model as configured (before the search)."""
    best: Trial | None
    """The smallest passing trial, or None when nothing passed within the runs."""
    runs: int
    ranked: tuple[str, ...]
    """The tensors in the order they were escalated, for the report."""
    guard: str = ""
    """The do-no-harm verdict on ``best`` against round-to-nearest int8 (empty: no plan to judge)."""
    accepted: bool = True
    """Whether ``best`` may be written as the plan (the guard did not refuse it)."""


@dataclass(frozen=True)
class Searched:
    found: tuple[Found, ...]
    original: Observed
    joint: Verdict | None
    """With several models: all plans at once (each model was searched with the others original)."""


def run_search(configured: Configured, settings: check.Settings, app: Display, max_runs: int) -> Searched:
    with temporary_directory("search") as name:
        tmp = Path(name)
        every = prepare(configured, tmp / "models", app)
        prepared = check.targets_of(every)
        for p in every:
            if p.ships_original:
                app.display_info(f"check --search: {p.relpath}: {p.verification}; not searched")
        targets = tuple(p.target() for p in prepared)
        app.display_info(f"check --search: run with the original models (recording their feeds): "
                         f"{check.shown(settings.command)}")
        original = check.run_command(settings, prepared, "the run with the original models",
                                     "original", targets, record=tmp / "recorded")
        check.require_success(original, settings)
        check.require_evidence(original, prepared, settings)
        found = []
        for index, p in enumerate(prepared):
            if not original.models.get(p.sha256, ModelSeen()).sessions:
                app.display_warning(f"check --search: {p.relpath}: the command never loaded it; nothing to search")
                continue
            if not any((tmp / "recorded").glob(f"*-{p.sha256[:SHA_DIGITS]}.npz")):
                app.display_warning(f"check --search: {p.relpath}: the command loaded it but never ran it; "
                                    "nothing to search (and no plan: nothing was checked)")
                continue
            search = TensorSearch(configured, settings, app, original=original, prepared=p, workdir=tmp / f"s{index}",
                             max_runs=max_runs)
            result = search.run(tmp / "recorded")
            if result.best is not None and result.best.prepared.shrunk is not None:
                result = _guarded(result, tmp / "recorded", tmp / f"plain{index}", app, settings.project)
            found.append(result)
        joint = None
        if sum(f.best is not None for f in found) > 1:
            joint = _joint(configured, settings, app, original=original, found=found, workdir=tmp / "joint")
        return Searched(tuple(found), original, joint)


class TensorSearch:
    """The search for one model. The order of the tensors, the doubling, the bisections and the
    bound on the runs live here; how a candidate is shrunk and judged (``_candidate``, ``_judge``)
    is ``check --search``'s own, and ``check --fix``'s per-tensor rung replaces those two."""

    prefix = "check --search"
    top = "float32"
    """What the most sensitive tensors are kept as, before each is moved down ``ladder``."""

    def __init__(self, configured: Configured, settings: check.Settings, app: Display, *, original: Observed,
                 prepared: Prepared, workdir: Path, max_runs: int) -> None:
        self.configured = configured
        self.settings = settings
        self.app = app
        self.original = original
        self.prepared = prepared
        self.workdir = workdir
        self.max_runs = max_runs
        self.runs = 0
        self.best: Trial | None = None
        self.ladder = facts(prepared.options.method).wider
        self.step = progress.Step(progress.Task("", None, 0.0), None)

    def run(self, recorded: Path) -> Found:
        label = f"{self.prefix}: {self.prepared.relpath}, runs (at most {self.max_runs})"
        with progress.task(label, total=self.max_runs) as self.step:
            return self._run(recorded)

    def _run(self, recorded: Path) -> Found:
        self.step.show("ranking the tensors")
        order = [(s.scope, s.name) for s in ranked(replace(self.prepared, options=replace(
            self.prepared.options, plan=())), recorded)]
        names = tuple(n for _, n in order)
        if not order:
            self.app.display_warning(f"{self.prefix}: {self.prepared.relpath}: no tensor to escalate")
        k = self._fewest(order)
        if k is None:
            return Found(self.prepared, None, self.runs, names)
        chosen = dict.fromkeys(order[:k], self.top)
        sizes = dict(zip(order, self._sizes(order), strict=True))
        for key in sorted(chosen, key=lambda key: (-sizes[key], key)):
            self._cheapen(chosen, key)
        return Found(self.prepared, self.best, self.runs, names)

    def _sizes(self, order: Sequence[Key]) -> list[int]:
        size = {(s.scope.path, s.name): s.size for s in find_sites(load_model(self.prepared.source).model)}
        return [size.get(key, 0) for key in order]

    def _fewest(self, order: Sequence[Key]) -> int | None:
        """The fewest top tensors kept ``top`` with which the run passes (None: none within the runs)."""
        steps = [0] + [min(2**i, len(order)) for i in range(len(order).bit_length() + 1) if 2**i <= 2 * len(order)]
        lo, hi = -1, -1
        for k in dict.fromkeys(steps):
            trial = self._try(dict.fromkeys(order[:k], self.top))
            if trial is None:
                return None
            if trial.passed:
                hi = k
                break
            lo = k
        if hi < 0:
            self._every_tensor_fails()
            return None
        return self._bisect(lo, hi, lambda k: dict.fromkeys(order[:k], self.top))

    def _every_tensor_fails(self) -> None:
        self.app.display_warning(
            f"{self.prefix}: {self.prepared.relpath}: the tests fail even with every searched tensor kept "
            f"{self.top}: what fails is not this model's weights (a flaky test, or another model)")

    def _cheapen(self, chosen: dict[Key, str], key: Key) -> None:
        """Bisect ``key`` down the ladder (the rung below the method fails, float32 passes)."""
        chosen[key] = self.ladder[self._bisect(-1, len(self.ladder) - 1, lambda i: {**chosen, key: self.ladder[i]})]

    def _bisect(self, lo: int, hi: int, plan: Callable[[int], dict[Key, str]]) -> int:
        """The smallest index in (lo, hi] whose plan passes, given that ``lo`` fails and ``hi`` passes
        (``hi`` itself when the runs are spent)."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            trial = self._try(plan(mid))
            if trial is None:
                break
            if trial.passed:
                hi = mid
            else:
                lo = mid
        return hi

    def _try(self, tensors: dict[Key, str]) -> Trial | None:
        if self.runs >= self.max_runs:
            return None
        self.runs += 1
        p = self._candidate(tuple(sorted((s, t, e) for (s, t), e in tensors.items())))
        if p.shrunk is None:
            # Every tensor kept as it is: the original model, which the original run already judged.
            # It passes without a run, and it is never the answer (there is nothing to ship smaller).
            self.runs -= 1
            seen = self.original.models.get(self.prepared.sha256, ModelSeen())
            return Trial(dict(tensors), judge(self.original, self.original), seen, p, self.prepared.sha256, True)
        trial = self._judge(p, tensors)
        if trial.passed and (self.best is None or p.shrunk_size <= self.best.prepared.shrunk_size):
            self.best = trial
        return trial

    def _candidate(self, plan: tuple[tuple[str, str, str], ...]) -> Prepared:
        """The model shrunk with ``plan`` (through the cache)."""
        (p,) = prepare(only(self.configured, self.prepared), self.workdir / str(self.runs), self.app,
                       plans={self.prepared.sha256: plan})
        return p

    def _judge(self, p: Prepared, tensors: dict[Key, str]) -> Trial:
        """One run of the command with ``p`` swapped in and the original beside it: no test regressed
        and at most ``max_flip_rate`` of its decisions flipped."""
        assert p.shrunk is not None
        observed = check.run_command(self.settings, (self.prepared,), f"search run {self.runs}",
                                     "shrunk", (p.target(),), shadow=True)
        self.step.at(self.runs, "")
        verdict = judge(self.original, observed)
        seen = observed.models.get(p.sha256, ModelSeen())
        trial = Trial(dict(tensors), verdict, seen, p, file_sha256(p.shrunk), False)
        flips, positions = trial.flips
        errors = seen.stats.errors if seen.stats is not None else 0
        ok = verdict.passed and not errors and flips <= self.settings.max_flip_rate * positions
        self.app.display_info(
            f"check --search: {p.relpath} run {self.runs}: {kept_words(tensors, p)}: {human(p.shrunk_size)}; tests "
            f"{tally(observed)}, {len(verdict.regressions)} regressed; {flips} of {positions} shadow decisions "
            f"flipped -> {'passes' if ok else 'fails'}")
        return replace(trial, passed=ok)


def kept_words(tensors: dict[Key, str], p: Prepared) -> str:
    """The tensors a candidate sets, for its line (``encoder.0.weight fp16, ...``)."""
    return ", ".join(f"{t} {e}" for (_, t), e in sorted(tensors.items())) or f"{p.options.method} as configured"


def _guarded(found: Found, recorded: Path, workdir: Path, app: Display, project: Path) -> Found:
    """The plan kept only if, on the project's recording (else on the command's own feeds, which the
    search fitted it to: said so), it does no worse than round-to-nearest int8, on enough units."""
    p = found.prepared
    assert found.best is not None and found.best.prepared.shrunk is not None
    configured = p.options.verify.inputs if p.options.verify is not None else None
    source, held = recorded, "the searched run's own feeds (the plan was fitted to them)"
    if configured is not None and configured.exists():
        source, held = configured, f"the recording {check.portable_path(configured, project)}"
    try:
        samples = load_samples(source, specs_of_model(load_model(p.source).model), model_sha256=p.sha256,
                               model_name=p.relpath)
    except ShrinkrayError as exc:
        return replace(found, guard=f"not judged against round-to-nearest: {exc}", accepted=False)
    seq = samples.sequencing()
    if not samples.real or seq.unit_count() < MIN_UNITS:
        return replace(found, accepted=False, guard=(
            f"the plan is not written: {held} hold {seq.unit_count()} independent {unit_kind(seq.units)}, fewer "
            f"than the {MIN_UNITS} it takes to tell it from chance (record more of the program's real use and set "
            "`inputs`)"))
    workdir.mkdir(parents=True, exist_ok=True)
    plain_path = workdir / p.source.name
    shrink(p.source, plain_path, replace(p.options, method="int8", plan=(), encodings=(), verify=None))
    names, base = outputs_on(p.source, samples, p.relpath)
    _, planned = outputs_on(found.best.prepared.shrunk, samples, p.relpath)
    _, plain = outputs_on(plain_path, samples, p.relpath)
    score = Scorer.of(names, base, seq, p.options.verify, samples.feeds)
    outcome = decide("the plan", score(planned), score(plain), seq.unit_count(), held)
    app.display_info(f"check --search: {p.relpath}: {outcome.text()}")
    return replace(found, guard=outcome.text(), accepted=outcome.kept)


def outputs_on(model: Path, samples: Samples, label: str) -> tuple[list[str], list[list[Any]]]:
    sess = session(str(model), label)
    return [o.name for o in sess.get_outputs()], run_all(sess, samples.feeds, samples.sequencing())


def _joint(configured: Configured, settings: check.Settings, app: Display, *, original: Observed,
           found: Sequence[Found], workdir: Path) -> Verdict:
    plans = {f.prepared.sha256: tuple(sorted((s, t, e) for (s, t), e in f.best.tensors.items()))
             for f in found if f.best is not None}
    prepared = [p for p in prepare(configured, workdir, app, plans=plans) if p.sha256 in plans and p.shrunk]
    targets = tuple(p.target() for p in prepared)
    app.display_info("check --search: every plan at once")
    observed = check.run_command(settings, prepared, "the run with every plan at once", "shrunk", targets)
    return judge(original, observed)


def plan_entries(searched: Searched, command: Sequence[str], max_flip_rate: float,
                 project: Path) -> dict[str, PlanEntry]:
    """What goes into the plan file: per model that passed, its tensors and what accepted them."""
    out = {}
    for f in searched.found:
        if f.best is None or not f.accepted:
            continue
        flips, positions = f.best.flips
        p = f.best.prepared
        verdict = (f"{tally(f.best.verdict.shrunk)} as with the original models; {flips} of {positions} shadow "
                   f"decisions flipped")
        checked = {"command": check.portable_command(command, project), "verdict": verdict, "guard": f.guard,
                   "shadow_flips": flips, "shadow_decisions": positions, "max_flip_rate": max_flip_rate, "runs": f.runs,
                   "original_size": p.original_size, "shrunk_size": p.shrunk_size,
                   "shrunk_sha256": f.best.shrunk_sha256}
        tensors = tuple(sorted((s, t, e) for (s, t), e in f.best.tensors.items()))
        out[p.sha256] = PlanEntry(p.relpath, p.options.method, tensors, checked)
    return out
