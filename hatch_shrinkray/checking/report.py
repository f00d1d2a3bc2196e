"""What ``check`` says: for people (plain text, like the build's lines) and as JSON for CI."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any

from hatch_shrinkray.capture.observe import ModelSeen, Observed
from hatch_shrinkray.capture.shadow import OutputStats
from hatch_shrinkray.checking.check import Checked, Shadowed, never_loaded
from hatch_shrinkray.checking.fix import Fixed
from hatch_shrinkray.checking.models import Prepared
from hatch_shrinkray.checking.search import Found, Searched
from hatch_shrinkray.checking.verdict import BAD, Verdict, tally
from hatch_shrinkray.codec import encode
from hatch_shrinkray.hints import check_hint
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.result import human, render_table
from hatch_shrinkray.verdict import clipped, fits, sizes

TEXT_LINES = 15


def _model_line(p: Prepared, original: Observed, other: Observed | None) -> str:
    planned = f" + plan ({len(p.options.plan)} tensors)" if p.options.plan else ""
    loads = f"sessions: {original.models.get(p.sha256, ModelSeen()).sessions} original"
    if other is not None:
        seen = other.models.get(p.sha256, ModelSeen())
        loads += f", {seen.swapped or seen.shadowed} shrunk"
    nearest = " round-to-nearest" if p.options.rounding == "nearest" and facts(p.options.method).fits_rounding else ""
    return clipped(f"  {p.relpath}: {p.options.method}{nearest}{planned}, {sizes(p.original_size, p.shrunk_size)}; "
                   f"{p.verification}; {loads}")


def _run_line(label: str, run: Observed) -> str:
    return f"  {label}: exit {run.exit_code}, {tally(run)} ({run.seconds:.1f} s)"


WHY = "       why: "
"""The reason of a ``chose:`` line, on a line of its own under it where the whole would not fit the budget."""


def _head(prepared: Sequence[Prepared], v: Verdict) -> list[str]:
    """The models, the command's two runs, and the configured models it never loaded."""
    lines = ["models:", *(_model_line(p, v.original, v.shrunk) for p in prepared if p.shrunk),
             "runs:", _run_line("original models", v.original), _run_line("shrunk models", v.shrunk)]
    return lines + _not_checked(prepared) + _unloaded(prepared, v.original)


def _not_checked(prepared: Sequence[Prepared]) -> list[str]:
    """The models a build ships as their originals: nothing to swap, nothing judged there."""
    lines = []
    for planned, why in ((True, "as check --fix chose"), (False, "generated inputs could not verify them")):
        kept = [p.relpath for p in prepared if p.ships_original and p.planned == planned]
        if kept:
            lines.append(clipped(f"not checked: a build ships the original bytes of {', '.join(kept)} ({why}): "
                                 "not counted as tested"))
    return lines


def _unloaded(prepared: Sequence[Prepared], run: Observed) -> list[str]:
    unloaded = never_loaded(prepared, run)
    return [clipped(f"not loaded: the command never created a session of {', '.join(unloaded)}: it judged nothing "
                    "there (a build ships them on the build's own verification alone)")] if unloaded else []


def render_check(checked: Checked) -> str:
    v = checked.verdict
    lines = [*_head(checked.prepared, v), *_regressions(v), *(f"hint: {p}: {h}" for p, h in checked.hints.items())]
    if not v.passed:
        lines.append(f"fix: {check_hint(shlex.join(checked.command), fix=True)}")
        lines.append("     (finds per model the cheapest choice that passes these tests again, for the build to ship)")
    return "\n".join(lines)


def render_fix(fixed: Fixed, written: str | None) -> str:
    first = fixed.first
    # check's own verdict is where --fix started, not its verdict (the last line): said so
    lines = [*_head(fixed.prepared, first), *_regressions(first, flaky=fixed.flaky, heading="before --fix")]
    lines += [f"  FLAKY {test}: passed once and failed once with the same shrunk models; not blamed on a model"
              for test in fixed.flaky]
    if not first.passed:
        lines.append(f"check --fix: {fixed.runs} run(s) of the command beyond check's own two")
    for c in fixed.choices:
        p, rung = c.prepared, c.rung
        if rung.remedy is None:
            lines.append(clipped(f"chose: {p.relpath}: {rung.describe(p)} ({c.reason})"))
            continue
        size = (f", {sizes(p.original_size, rung.prepared.shrunk_size)}" if rung.prepared is not None
                else f" ({human(p.original_size)})")
        chose = f"chose: {p.relpath}: {rung.describe(p)}{size}"
        whole = f"{chose}: {c.reason}"
        lines += [whole] if fits(whole, 0) else [clipped(chose), clipped(f"{WHY}{c.reason}")]
    if written:
        lines.append(written)
    final = fixed.final
    if first.passed:
        lines.append("verdict: nothing to fix: nothing regressed with the shrunk models")
    elif fixed.passed:
        flaky = f"; flaky, not counted: {', '.join(fixed.flaky)}" if fixed.flaky else ""
        lines.append(f"verdict: nothing regressed with every choice applied (final run: {tally(final.shrunk)}, "
                     f"exit {final.shrunk.exit_code}){flaky}")
    else:
        still = fixed.still_failing
        lines.append(clipped(f"verdict: FAILS, exit 1: {len(still)} still regress with every choice applied: "
                             f"{', '.join(still[:5])}"))
    return "\n".join(lines)


def fix_json(fixed: Fixed) -> dict[str, Any]:
    return {"passed": fixed.passed, "runs_beyond_check": fixed.runs, "flaky": list(fixed.flaky),
            "failing_with_originals": fixed.failing_with_originals,
            "never_loaded": never_loaded(fixed.prepared, fixed.first.original),
            "regressions": [r.test for r in fixed.first.regressions],
            "still_failing": fixed.still_failing,
            "models": [{"model": c.prepared.relpath, "choice": c.rung.describe(c.prepared),
                        "remedy": encode(c.rung.remedy),
                        "regressed": list(c.regressed), "tried": list(c.tried), "reason": c.reason}
                       for c in fixed.choices],
            "final": _run_json(fixed.final.shrunk)}


def _regressions(v: Verdict, *, flaky: Sequence[str] = (), heading: str = "verdict") -> list[str]:
    failing = [t for t, o in v.original.tests.items() if o.outcome in BAD]
    aside = ([clipped(f"  ({len(failing)} test(s) fail with the original models too, never blamed on a model: "
                      f"{', '.join(failing[:5])}{' ...' if len(failing) > 5 else ''})")] if failing else [])
    if v.passed:
        seen = f"{len(v.original.tests)} tests" if v.original.tests else "the exit status"
        return [f"{heading}: nothing regressed with the shrunk models ({seen} as with the originals)", *aside]
    real = [r for r in v.regressions if r.test not in flaky]
    lines = [f"{heading}: {len(real)} regressed with the shrunk models" + (":" if real else ", flaky tests aside:")]
    for r in real:
        lines.append(clipped(f"  REGRESSED {r.test}: {r.before} with the originals, {r.after} with the shrunk models"))
        text = [t for t in r.text.splitlines() if t.strip()][-TEXT_LINES:]
        lines += [clipped(f"      {t}") for t in text]
    if v.fixed:
        lines.append(f"  ({len(v.fixed)} test(s) failed with the originals and pass with the shrunk models)")
    return lines + aside


def check_json(checked: Checked) -> dict[str, Any]:
    v = checked.verdict
    return {"passed": v.passed, "models": [_model_json(p) for p in checked.prepared],
            "runs": {"original": _run_json(v.original), "shrunk": _run_json(v.shrunk)},
            "regressions": [{"test": r.test, "before": r.before, "after": r.after, "text": r.text}
                            for r in v.regressions],
            "fixed": list(v.fixed), "hints": checked.hints}


def _model_json(p: Prepared) -> dict[str, Any]:
    return {"model": p.relpath, "sha256": p.sha256, "method": p.options.method,
            "plan": [list(t) for t in p.options.plan], "original_size": p.original_size,
            "shrunk_size": p.shrunk_size, "verification": p.verification, "verification_passed": p.passed}


def _run_json(run: Observed) -> dict[str, Any]:
    return {"exit_code": run.exit_code, "seconds": round(run.seconds, 3), "pytest_sessions": run.pytest_sessions,
            "tests": {k: o.outcome for k, o in run.tests.items()},
            "models": {sha: {"sessions": s.sessions, "swapped": s.swapped, "shadowed": s.shadowed}
                       for sha, s in run.models.items()}}


def shadow_failures(shadowed: Shadowed, max_flip_rate: float) -> list[str]:
    """Why ``check --shadow`` fails, a reason per model (empty: it passes)."""
    out = []
    for p in shadowed.prepared:
        seen = shadowed.run.models.get(p.sha256)
        stats = None if seen is None else seen.stats
        if stats is None:
            continue
        changed, judged, what = stats.gated()
        if stats.errors:
            out.append(f"{p.relpath}: the shrunk model failed on {stats.errors} call(s)")
        elif changed > max_flip_rate * judged:
            out.append(f"{p.relpath}: {changed} of {judged} {what} changed, more than --max-flip-rate "
                       f"{max_flip_rate:g} allows")
    return out


def render_shadow(shadowed: Shadowed, max_flip_rate: float = 0.0) -> str:
    run = shadowed.run
    rows = [["model", "output", "calls", "worst rel-L2", "mean rel-L2", "worst cos", "mean cos", "decisions",
             "flipped", "answers changed"]]
    notes = []
    for p in shadowed.prepared:
        seen = run.models.get(p.sha256)
        if p.shrunk is None or seen is None:
            continue
        if seen.stats is None or not seen.stats.calls:
            notes.append(f"{p.relpath}: {seen.sessions} session(s), no run() call to compare")
            continue
        for name, o in sorted(seen.stats.outputs.items()):
            rows.append([p.relpath, name, str(o.calls), _f(o.worst_rel_l2), _f(o.mean_rel_l2),
                         f"{o.worst_cosine:.6f}", f"{o.mean_cosine:.6f}", _decisions(o), _flips(o),
                         f"{o.changed_answers} of {o.answers} {o.describes} ({o.judge})" if o.answers else "-"])
        if seen.stats.errors:
            notes.append(f"{p.relpath}: the shrunk model failed on {seen.stats.errors} call(s): "
                         f"{seen.stats.first_error}")
        notes += [f"{p.relpath}: no shadow session: {e}" for e in seen.shadow_errors]
    compared = [(p, seen.stats) for p in shadowed.prepared if p.shrunk is not None
                and (seen := run.models.get(p.sha256)) is not None and seen.stats is not None and seen.stats.calls]
    evidence = [f"{p.relpath}: {stats.evidence().text()}" for p, stats in compared]
    streams = any(stats.streams for _, stats in compared)
    unjudged = [p.relpath for p, stats in compared if not stats.positions and not stats.answers]
    lines = [render_table(rows), *notes, *_not_checked(shadowed.prepared), *_unloaded(shadowed.prepared, run),
             *evidence,
             f"the command exited {run.exit_code} with the original models' answers ({run.seconds:.1f} s); every "
             "call of the models above also ran the shrunk model on the same feeds"
             + (" (a recurrent model's streams in closed loop, on the shrunk model's own state)" if streams else "")]
    failures = shadow_failures(shadowed, max_flip_rate)
    if failures:
        gate = (f"--max-flip-rate {max_flip_rate:g}, the default: no answer may change" if max_flip_rate == 0
                else f"--max-flip-rate {max_flip_rate:g}")
        lines.append(f"verdict: FAILS the answer gate ({gate}), exit 1: " + "; ".join(failures)
                     + "; allow a share with --max-flip-rate RATE, or let `check --search` find a plan that passes")
    elif run.exit_code:
        lines.append(f"verdict: the command itself failed (exit {run.exit_code}) with the original models")
    elif compared and len(unjudged) == len(compared):
        lines.append("verdict: nothing gated: no output had decisions to compare (numbers only, in the table); "
                     "name how your package reads an output with `judges`, or let its tests judge: "
                     "hatch-shrinkray check -- COMMAND")
    else:
        held = [f"{p.relpath}: {stats.flips} of {stats.positions} decisions flipped, no answer changed"
                for p, stats in compared if stats.flips and not stats.gated()[0]]
        lines.append(f"verdict: ok (at most --max-flip-rate {max_flip_rate:g} of the answers changed)"
                     + (f"; {'; '.join(held)}" if held else "")
                     + (f"; not gated, no decisions to compare: {', '.join(unjudged)}" if unjudged else ""))
    return "\n".join(lines)


def _decisions(o: OutputStats) -> str:
    return f"{o.positions} ({o.kind})" if o.kind else "-"


def _flips(o: OutputStats) -> str:
    if not o.kind:
        return "-"
    share = f" ({100 * o.flips / o.positions:.3f}%)" if o.positions else ""
    ties = f", {o.near_ties} at near-ties" if o.near_ties else ""
    return f"{o.flips}{share} in {o.flipped_calls} call(s){ties}"


def _f(x: float) -> str:
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def shadow_json(shadowed: Shadowed) -> dict[str, Any]:
    out = []
    for p in shadowed.prepared:
        seen = shadowed.run.models.get(p.sha256, ModelSeen())
        stats = seen.stats
        out.append({**_model_json(p), "sessions": seen.sessions, "shadowed": seen.shadowed,
                    "calls": 0 if stats is None else stats.calls, "errors": 0 if stats is None else stats.errors,
                    "first_error": "" if stats is None else stats.first_error,
                    "evidence": None if stats is None else {**stats.evidence().__dict__,
                                                            "upper_bound": stats.evidence().bound,
                                                            "weak": stats.evidence().weak},
                    "outputs": {} if stats is None else {n: {**_clean(o.__dict__), "mean_rel_l2": o.mean_rel_l2,
                                                            "mean_cosine": o.mean_cosine}
                                                        for n, o in sorted(stats.outputs.items())}})
    return {"exit_code": shadowed.run.exit_code, "seconds": round(shadowed.run.seconds, 3), "models": out}


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def render_search(searched: Searched, written: str | None) -> str:
    lines = []
    for f in searched.found:
        p = f.prepared
        if f.best is None:
            lines.append(f"{p.relpath}: no plan passed within {f.runs} run(s) (see the lines above)")
            continue
        b = f.best.prepared
        flips, positions = f.best.flips
        tensors = ", ".join(f"{t} {e}" for (_, t), e in sorted(f.best.tensors.items()))
        with_ = f"{p.options.method} and {tensors}" if tensors else f"{p.options.method} as configured, no tensor wider"
        lines.append(f"{p.relpath}: {human(b.original_size)} -> {human(b.shrunk_size)} "
                     f"({100 * b.shrunk_size / b.original_size:.1f}%) with {with_}; "
                     f"{tally(f.best.verdict.shrunk)}, nothing regressed, {flips} of {positions} shadow decisions "
                     f"flipped ({f.runs} runs; configured as is: {human(p.shrunk_size)})")
        if f.guard:
            lines.append(f"{p.relpath}: {f.guard}")
    if searched.joint is not None:
        j = searched.joint
        lines.append("every plan at once: " + ("nothing regressed" if j.passed else
                                               f"{len(j.regressions)} regressed: "
                                               + ", ".join(r.test for r in j.regressions[:5])))
    if written:
        lines.append(written)
    failures = search_failures(searched)
    lines.append(f"verdict: FAILS, exit 1: {'; '.join(failures)}" if failures else
                 "verdict: ok: every searched model has a plan its tests accept")
    return "\n".join(lines)


def search_failures(searched: Searched) -> list[str]:
    """Why ``check --search`` fails (empty: it passes)."""
    if not searched.found:
        return ["no configured model was run by the command, so nothing was searched"]
    out = [f"{f.prepared.relpath}: no plan passed within {f.runs} run(s) (--max-runs)" for f in searched.found
           if f.best is None]
    out += [f"{f.prepared.relpath}: the plan found was not kept ({f.guard or 'refused'})" for f in searched.found
            if f.best is not None and not f.accepted]
    if searched.joint is not None and not searched.joint.passed:
        out.append("each plan passes alone, but not all of them at once")
    return out


def search_json(searched: Searched) -> dict[str, Any]:
    return {"models": [_found_json(f) for f in searched.found],
            "joint_passed": None if searched.joint is None else searched.joint.passed}


def _found_json(f: Found) -> dict[str, Any]:
    best = f.best
    return {"model": f.prepared.relpath, "runs": f.runs, "ranked": list(f.ranked[:20]),
            "passed": best is not None, "accepted": best is not None and f.accepted, "guard": f.guard,
            "tensors": [] if best is None else [[s, t, e] for (s, t), e in sorted(best.tensors.items())],
            "shrunk_size": None if best is None else best.prepared.shrunk_size,
            "shrunk_sha256": None if best is None else best.shrunk_sha256}
