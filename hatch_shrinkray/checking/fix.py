"""``check --fix``: per model, the cheapest choice with which every test that passes with the original
models passes again, for the build to ship (``shipping.plan``).

After ``check``'s own two runs, each step is one run of the command with some models swapped for a
shrunk version and the others original:

1. the run with every model shrunk again: a test that regressed in one of the two runs and not in
   the other is flaky, reported and never blamed; the rest are the regressions to restore;
2. the models the command loaded are narrowed down by bisection (half of the suspects shrunk, the
   rest original) to the one the regression follows;
3. that model climbs its ladder, cheapest first: the configured choice (the fitted codes, ``auto``'s
   plan) -> round-to-nearest codes -> int8 instead of ``auto``'s plan (as method int8 ships it, then
   round-to-nearest) -> int8 with a per-tensor plan
   (``fixplan``: its most sensitive tensors wider, found in a bounded number of runs) -> fp16 -> the
   original. Each rung runs with every other model as chosen so far, so the rung that restores the
   tests is also the final run; where it fails while the rung alone passes, another model is to
   blame too, and the bisection starts again among the rest.

A rung that gives the same bytes as a cheaper one (or as any run already made), or fails the
tolerance verification the build runs too, is skipped without a run; every rung is shrunk through
the cache, so the build that follows ships it without shrinking again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hatch_shrinkray.capture.observe import ModelSeen, Observed
from hatch_shrinkray.checking.check import Settings, portable_command, run_command, two_runs
from hatch_shrinkray.checking.fixplan import PLAN_RUNS, PlanSearch, plan_rung
from hatch_shrinkray.checking.models import Configured, Prepared, only, prepare
from hatch_shrinkray.checking.verdict import BAD, EXIT_STATUS, Verdict, judge, tally
from hatch_shrinkray.files import file_sha256, temporary_directory
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.options import Remedy
from hatch_shrinkray.registry import FP16, NEAREST_INT8, ladder
from hatch_shrinkray.shipping.display import Display
from hatch_shrinkray.shipping.plan import PlanEntry


@dataclass(frozen=True)
class Rung:
    remedy: Remedy | None
    """None: the configured choice."""
    prepared: Prepared | None
    """The model shrunk this way; None for the original (nothing swapped)."""
    sha256: str = ""
    """The shrunk model's sha256 (what the plan file records the tests accepted)."""
    tensors: tuple[tuple[str, str, str], ...] = ()
    """The per-tensor rung's plan (``(scope, tensor, encoding)``, sorted); empty for the other rungs."""

    def describe(self, configured: Prepared) -> str:
        return (configured_words(configured, rung=True) if self.remedy is None
                else self.remedy.describe(configured.options, self.tensors))


@dataclass(frozen=True)
class Choice:
    prepared: Prepared
    """The model as configured."""
    rung: Rung
    regressed: tuple[str, ...] = ()
    """The tests it was blamed for (empty: not blamed)."""
    tried: tuple[str, ...] = ()
    """The rungs that did not restore them, cheapest first."""

    @property
    def reason(self) -> str:
        """Why this choice, for the report, the plan file and the build's line."""
        if not self.regressed:
            return "nothing regressed with it"
        named = ["the command's exit status" if t == EXIT_STATUS else t for t in self.regressed]
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        why = f"{shown} regressed with {configured_words(self.prepared)}"
        return why + (f"; {', '.join(self.tried)} did not restore it" if self.tried else "")


def configured_words(p: Prepared, *, rung: bool = False) -> str:
    """The configured choice as the reason names it (``rung``: as the ladder's first rung)."""
    method = facts(p.options.method)
    nearest = method.fits_rounding and p.options.rounding == "nearest"
    said = f"{p.options.method}{' round-to-nearest' if nearest else ''} as configured"
    if rung:
        return said
    return "the fitted codes" if p.fitted else method.plan or said


@dataclass(frozen=True)
class Fixed:
    prepared: tuple[Prepared, ...]
    first: Verdict
    """``check``'s own two runs."""
    final: Verdict
    """The run with every choice applied (``first`` when nothing regressed)."""
    choices: tuple[Choice, ...]
    """Per model the command loaded, in the configuration's order."""
    flaky: tuple[str, ...] = ()
    runs: int = 0
    """Runs of the command beyond ``check``'s own two."""

    @property
    def still_failing(self) -> list[str]:
        return [r.test for r in self.final.regressions if r.test not in self.flaky]

    @property
    def passed(self) -> bool:
        return not self.still_failing

    @property
    def failing_with_originals(self) -> list[str]:
        return [t for t, o in self.first.original.tests.items() if o.outcome in BAD]


def run_fix(configured: Configured, settings: Settings, app: Display, plan_runs: int = 0) -> Fixed:
    """``plan_runs``: runs of the command the per-tensor rung may take per model (0: the rung is not
    tried, and the report says how to try it): it is the one rung whose cost grows with the model."""
    with temporary_directory("fix") as name:
        tmp = Path(name)
        prepared, original, shrunk = two_runs(configured, settings, app, tmp)
        first = judge(original, shrunk)
        fixer = _Fixer(configured, settings, app, prepared, original, tmp / "rungs", tmp / "recorded", plan_runs)
        return Fixed(tuple(prepared), first, first, fixer.choices()) if first.passed else fixer.fix(first)


@dataclass
class _Fixer:
    configured: Configured
    settings: Settings
    app: Display
    prepared: list[Prepared]
    original: Observed
    workdir: Path
    recorded: Path
    """The feeds the run with the original models gave each model (what the per-tensor rung ranks on)."""
    plan_runs: int = 0
    """Runs the per-tensor rung may take per model (0: not tried)."""
    runs: int = 0
    flaky: set[str] = field(default_factory=set)
    chosen: dict[str, Rung] = field(default_factory=dict)
    blamed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tried: dict[str, list[str]] = field(default_factory=dict)
    regressed: set[str] = field(default_factory=set)
    """The tests that regressed with every model shrunk, in both of the first runs."""
    made: dict[frozenset[tuple[str, str]], tuple[int, Verdict]] = field(default_factory=dict)
    """Every run made (its number, its verdict), by the bytes it swapped in: a run with the same bytes
    again is not made."""

    def __post_init__(self) -> None:
        self.suspects = [p for p in self.prepared if p.shrunk is not None
                         and self.original.models.get(p.sha256, ModelSeen()).sessions]
        self.chosen = {p.sha256: Rung(None, p, file_sha256(p.shrunk) if p.shrunk else "") for p in self.suspects}
        self.made[frozenset()] = (0, judge(self.original, self.original))  # every model original: check's run 1

    def choices(self) -> tuple[Choice, ...]:
        return tuple(Choice(p, self.chosen[p.sha256], self.blamed.get(p.sha256, ()),
                            tuple(self.tried.get(p.sha256, ()))) for p in self.suspects)

    def fix(self, first: Verdict) -> Fixed:
        again = self._trial(self._swapped(), "every model shrunk again, for flaky tests")
        before, after = {r.test for r in first.regressions}, {r.test for r in again.regressions}
        self.flaky = before ^ after
        tests = sorted(before & after)
        self.regressed = set(tests)
        group = list(self.suspects)
        while tests and group:
            culprit, tests = self._bisect(group, tests)
            self.blamed[culprit.sha256] = tuple(tests)
            if self._climb(culprit):
                break
            tests = self._failing(self._final())
            group = self._unblamed()
        final = self._final() if tests or self.blamed else again
        return Fixed(tuple(self.prepared), first, final, self.choices(), tuple(sorted(self.flaky)), self.runs)

    def _bisect(self, group: list[Prepared], tests: list[str]) -> tuple[Prepared, list[str]]:
        """The model of ``group`` the regression follows: half of them shrunk (with the models already
        blamed as chosen, the rest original), the half that fails kept."""
        while len(group) > 1:
            half = group[:(len(group) + 1) // 2]
            label = f"bisecting: {', '.join(p.relpath for p in half)} shrunk, the other suspects original"
            failing = self._failing(self._trial(self._swapped(only=half), label))
            if failing:
                group, tests = half, failing
            else:
                group = group[len(half):]
        return group[0], tests

    def _climb(self, culprit: Prepared) -> bool:
        """Up ``culprit``'s ladder until a rung restores the tests; True when that run had every other
        model as chosen (it is the final run).

        Each rung runs with the other models as chosen. Where such a run passes every test the model
        was blamed for and fails only tests that already regressed with every model shrunk, the rung
        is taken: those tests are another model's, and the run is the one with every choice applied
        that the bisection for them starts from. Where it fails with a test the model was not blamed
        for, or even its original does not restore the tests, another model breaks them too: the
        ladder is climbed again with the models not yet blamed original, and the bisection then looks
        among those."""
        ladder = _Lazy(self._rungs(culprit))
        tried = self.tried.setdefault(culprit.sha256, [])
        for rung in ladder:
            self.chosen[culprit.sha256] = rung
            failing = self._failing(self._trial(self._swapped(), f"{culprit.relpath}: {rung.describe(culprit)}"))
            if not failing:
                return True
            if not self._unblamed():
                tried.append(rung.describe(culprit))
                continue
            mine = set(self.blamed[culprit.sha256])
            if not mine & set(failing) and set(failing) <= self.regressed:
                return False
            if set(failing) - mine or (rung.remedy is not None and rung.remedy.original):
                break
            tried.append(rung.describe(culprit))
        else:
            return False
        tried.clear()
        for rung in ladder:
            self.chosen[culprit.sha256] = rung
            label = f"{culprit.relpath}: {rung.describe(culprit)}, the models not blamed original"
            if not self._failing(self._trial(self._swapped(only=()), label)):
                return False
            tried.append(rung.describe(culprit))
        return False

    def _unblamed(self) -> list[Prepared]:
        return [p for p in self.suspects if p.sha256 not in self.blamed]

    def _rungs(self, p: Prepared) -> Iterator[Rung]:
        """``p``'s ladder above the configured choice, each rung shrunk (through the cache); a rung
        that gives bytes a cheaper one gave is skipped. The per-tensor rung comes before fp16, and
        only where it ends smaller than fp16."""
        seen = {self.chosen[p.sha256].sha256}
        for index, remedy in enumerate(ladder(p.options)):
            if remedy.original:
                yield Rung(remedy, None)
                return
            rung = self._shrunk_rung(p, remedy, index, seen)
            if remedy == FP16 and facts(p.options.method).plan_rung:
                ceiling = rung.prepared.shrunk_size if rung is not None and rung.prepared is not None else \
                    p.original_size
                yield from self._planned(p, seen, ceiling)
            if rung is not None:
                seen.add(rung.sha256)
                yield rung

    def _shrunk_rung(self, p: Prepared, remedy: Remedy, index: int, seen: set[str]) -> Rung | None:
        """``p`` shrunk with ``remedy``, or None where that rung is not run (said why)."""
        (q,) = prepare(only(self.configured, p), self.workdir / f"{self.suspects.index(p)}-{index}", self.app,
                       chosen={p.sha256: remedy.apply(p.options)})
        digest = file_sha256(q.shrunk) if q.shrunk is not None else p.sha256
        if digest == p.sha256:
            return None  # nothing to shrink that way: the original, which is the last rung
        if digest in seen:
            self.app.display_info(f"check --fix: {p.relpath}: {remedy.describe(p.options)} gives the bytes of a "
                                  "cheaper choice; not run")
            return None
        if not q.passed:  # the build would refuse to ship it
            self.app.display_info(f"check --fix: {p.relpath}: {remedy.describe(p.options)} {q.verification}, "
                                  "which the build runs too; not run")
            return None
        return Rung(remedy, q, digest)

    def _planned(self, p: Prepared, seen: set[str], ceiling: int) -> Iterator[Rung]:
        """The per-tensor rung (``fixplan``), when its smallest passing plan is below ``ceiling``."""
        if self.plan_runs < 1:
            self.app.display_info(f"check --fix: {p.relpath}: a per-tensor plan between int8 and fp16 not tried "
                                  f"(add --max-runs {PLAN_RUNS} to let it take up to {PLAN_RUNS} more runs)")
            return
        floor = NEAREST_INT8  # only what differs from the configured choice, as a remedy names it
        base = Remedy(method=floor.method if p.options.method != floor.method else None,
                      rounding=floor.rounding if p.options.rounding != floor.rounding else None)
        search = PlanSearch(self.configured, self.settings, self.app, original=self.original, prepared=p,
                            base=base.apply(p.options), workdir=self.workdir / f"{self.suspects.index(p)}-plan",
                            run=lambda q, label: self._candidate_run(p, q, label), recorded=self.recorded,
                            max_runs=self.plan_runs)
        best, why = plan_rung(search, self.recorded, ceiling)
        if best is None or best.shrunk_sha256 in seen:
            self.tried.setdefault(p.sha256, []).append(why or "a per-tensor plan (the bytes of a cheaper choice)")
            return
        seen.add(best.shrunk_sha256)
        yield Rung(base, best.prepared, best.shrunk_sha256, best.prepared.options.plan)

    def _candidate_run(self, p: Prepared, candidate: Prepared, label: str) -> tuple[Verdict, bool, bool]:
        swapped = {**self._swapped(), p.sha256: candidate}
        before = self.runs
        verdict = self._trial(swapped, label)
        return verdict, not self._failing(verdict), self.runs > before

    def _swapped(self, only: Sequence[Prepared] | None = None) -> dict[str, Prepared]:
        """Per model to swap, its shrunk version as chosen so far: every model, or (``only``) the
        models already blamed and just these of the others (the rest original)."""
        keep = None if only is None else {p.sha256 for p in only} | set(self.blamed)
        return {p.sha256: rung.prepared for p in self.suspects
                if (keep is None or p.sha256 in keep) and (rung := self.chosen[p.sha256]).prepared is not None}

    def _final(self) -> Verdict:
        """The run with every choice applied (no run when one was made with those bytes)."""
        return self._trial(self._swapped(), "every choice applied")

    def _failing(self, verdict: Verdict) -> list[str]:
        return [r.test for r in verdict.regressions if r.test not in self.flaky]

    def _trial(self, swapped: Mapping[str, Prepared], label: str) -> Verdict:
        key = self._key(swapped)
        if key in self.made:  # e.g. every model original: the run check already made
            number, verdict = self.made[key]
            if number:
                self.app.display_info(f"check --fix: {label}: the bytes of run {number}; not run again")
            return verdict
        self.runs += 1
        targets = tuple(p.target() for p in swapped.values())
        observed = run_command(self.settings, self.prepared, f"check --fix run {self.runs}", "shrunk", targets)
        verdict = judge(self.original, observed)
        failing = self._failing(verdict)
        outcome = f"{len(failing)} regressed ({', '.join(failing[:3])})" if failing else "nothing regressed"
        self.app.display_info(f"check --fix: run {self.runs}, {label}: {tally(observed)}; {outcome}")
        self.made[key] = (self.runs, verdict)
        return verdict

    @staticmethod
    def _key(swapped: Mapping[str, Prepared]) -> frozenset[tuple[str, str]]:
        """The bytes a run swaps in, per model (hashed again each time: a path may be reused)."""
        return frozenset((sha, file_sha256(p.shrunk)) for sha, p in swapped.items() if p.shrunk is not None)


class _Lazy:
    """The items of an iterator, produced once and replayed: a ladder climbed twice shrinks each
    rung once."""

    def __init__(self, items: Iterator[Rung]) -> None:
        self._items = items
        self._done: list[Rung] = []

    def __iter__(self) -> Iterator[Rung]:
        index = 0
        while True:
            if index == len(self._done):
                item = next(self._items, None)
                if item is None:
                    return
                self._done.append(item)
            yield self._done[index]
            index += 1


def fix_entries(fixed: Fixed, command: Sequence[str], project: Path) -> dict[str, PlanEntry]:
    """What goes into the plan file: per model whose configured choice regressed, its remedy and why."""
    out = {}
    final = fixed.final.shrunk
    seen = tally(final) if final.tests else f"exit {final.exit_code}"
    verdict = f"{seen} with every choice applied; nothing regressed"
    for c in fixed.choices:
        if c.rung.remedy is None:
            continue
        p, q = c.prepared, c.rung.prepared
        checked: dict[str, object] = {"command": portable_command(command, project), "regressed": list(c.regressed),
                                      "reason": c.reason, "tried": list(c.tried), "verdict": verdict,
                                      "runs": fixed.runs}
        if q is not None:
            checked.update(shrunk_sha256=c.rung.sha256, original_size=q.original_size, shrunk_size=q.shrunk_size)
        out[p.sha256] = PlanEntry(p.relpath, p.options.method, c.rung.tensors, checked, c.rung.remedy)
    return out
