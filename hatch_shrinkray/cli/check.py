"""``hatch-shrinkray check``: let the package's own tests (or any command) judge the shrunk models."""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hatch_shrinkray import hints
from hatch_shrinkray.cli.flags import Given, Noted, option_flags, plan_flag
from hatch_shrinkray.cli.output import Stderr, write_report
from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import in_range
from hatch_shrinkray.shipping.config import ConfigurationError
from hatch_shrinkray.shipping.plan import merge_plan

if TYPE_CHECKING:
    from hatch_shrinkray.checking.check import Settings
    from hatch_shrinkray.checking.models import Configured

DEFAULT_TIMEOUT = 3600.0
"""``--timeout``: an hour per run of the command, generous for a test suite; a hang ends."""
MAX_TIMEOUT = 7 * 24 * 3600.0
SEARCH_RUNS = 16  # --search's runs of the command per model when --max-runs does not say


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    k = command(
        sub, "check", help="let the package's own tests (or any command) judge the shrunk models",
        description="Shrink the models as configured (through the cache), run COMMAND with the original models "
                    "and again with every onnxruntime session of a configured model loading the shrunk one, and "
                    "report every test that regressed (exit 1). --shadow: one run in which every call also runs "
                    "the shrunk model and the differences are counted. --fix: where tests regress, the cheapest "
                    "choice per model that passes them again (round-to-nearest codes, int8, int8 with some tensors "
                    "wider, fp16, the original), written into the plan file the hook and `wheel` read. --search: "
                    "the smallest per-tensor plan the tests accept, written there too.",
        usage="hatch-shrinkray check [MODEL...] [--project DIR] [options] -- COMMAND [ARGS...]")
    k.takes_command = True
    k.add_argument("models", nargs="*", metavar="MODEL",
                   help="the models to check (default: the project's `models`): paths or globs in the project or "
                        "inside the wheel (src/pkg/m.onnx or pkg/m.onnx), with the project's options and the flags "
                        "below overriding them key by key; outside a configured project, model files shrunk with "
                        "the flags alone")
    k.common(k.add_argument("--project", type=Path, default=None, action=Noted, metavar="DIR",
                            help="the project whose pyproject.toml configures the models (default: the current "
                                 "directory)"))
    mode = k.add_mutually_exclusive_group()
    k.common(mode.add_argument("--shadow", action="store_true",
                               help="one run: the program gets the original outputs, the shrunk models run beside "
                                    "them"))
    k.common(mode.add_argument("--fix", action="store_true",
                               help="where tests regress, find per model the cheapest choice with which they pass "
                                    "again (round-to-nearest codes, int8 instead of auto's plan, int8 with some "
                                    "tensors wider, fp16, the original) and write it into the plan file the hook and "
                                    "`wheel` read"))
    k.common(mode.add_argument("--search", action="store_true",
                               help="find the smallest per-tensor plan the tests accept and write it into the plan "
                                    "file"))
    k.add_argument("--pytest", action="store_true",
                   help="require per-test outcomes (automatic when COMMAND is pytest or python -m pytest)")
    k.add_argument("--threshold", type=float, default=0.5, action=Noted,
                   help="decision threshold of probability outputs for shadow flips (default %(default)g)")
    k.add_argument("--max-flip-rate", type=float, default=0.0, metavar="RATE",
                   help="--shadow: share of the judged answers allowed to change; --search: of the shadow "
                        "decisions allowed to flip (default %(default)g)")
    k.add_argument("--max-runs", type=int, metavar="N",
                   help=f"--search: runs of COMMAND per model at most (default {SEARCH_RUNS}); --fix: runs its "
                        "per-tensor rung between int8 and fp16 may take per model (default: that rung is not tried)")
    k.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", action=Noted,
                   help="the longest one run of COMMAND may take; it is then stopped with its whole process group "
                        "and check fails (default %(default).0f)")
    k.common(plan_flag(k, "plan file to read, and to write with --fix or --search (default: the "
                          "configuration's, or shrinkray-plan.json)"))
    k.add_argument("--json", type=Path, metavar="FILE", help="write the report as JSON ('-' for stdout)")
    option_flags(k)
    k.set_defaults(argv=[])  # everything after `--`, split off before parsing (see main)


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.checking import report
    from hatch_shrinkray.checking.check import Settings, looks_like_pytest, run_check, run_shadow
    from hatch_shrinkray.checking.configure import COMMAND_LINE
    from hatch_shrinkray.checking.search import plan_entries, run_search
    from hatch_shrinkray.shipping.pins import original_pins

    command = tuple(args.argv)
    if not command:
        raise ShrinkrayError("no command to check with", hint="hatch-shrinkray check [MODEL...] -- python -m pytest")
    _check_limits(args)
    configured, plan_file = _configured(args)
    project = (args.project or Path(".")).resolve()
    settings = Settings(command, args.pytest or looks_like_pytest(command), args.threshold, args.max_flip_rate,
                        timeout=args.timeout, project=project)
    display = Stderr(args.verbose, args.quiet)
    data: dict[str, Any]
    if args.shadow:
        shadowed = run_shadow(configured, settings, display)
        print(report.render_shadow(shadowed, args.max_flip_rate))
        data = report.shadow_json(shadowed)
        code = 1 if report.shadow_failures(shadowed, args.max_flip_rate) else shadowed.run.exit_code
    elif args.fix:
        data, code = _fix(configured, settings, display, plan_file, args.max_runs or 0)
    elif args.search:
        searched = run_search(configured, settings, display, args.max_runs or SEARCH_RUNS)
        entries = plan_entries(searched, command, args.max_flip_rate, project)
        written = _plan_written(plan_file, entries, configured.config.table != COMMAND_LINE) if entries else None
        print(report.render_search(searched, written))
        data = report.search_json(searched)
        code = 1 if report.search_failures(searched) else 0
    else:
        checked = run_check(configured, settings, display)
        print(report.render_check(checked))
        data = report.check_json(checked)
        code = 0 if checked.verdict.passed else 1
    rewrite = configured.config.pins == "rewrite"
    for pin in original_pins((root, m.relpath) for root, m in configured.entries()):
        print(f"{'note' if rewrite else 'warning'}: {pin.check_text(rewrite)}")
    if args.json is not None and not write_report(args.json, json.dumps(data, indent=2, sort_keys=True),
                                                   args.verbose):
        return 1
    return code


def _configured(args: argparse.Namespace) -> tuple[Configured, Path | None]:
    """The models to check with their options (the flags given, over the project's table when the
    models are its own or an installed package's), and the plan file to read and write."""
    from hatch_shrinkray.checking.configure import COMMAND_LINE, configure, refuse_foreign

    given = Given.of(args)
    options = given.options()
    try:
        configured, plan_file = configure(args.models, project=args.project, plan=args.plan, options=options,
                                          names=given.names,
                                          flags=lambda relpaths: given.command_line(args, relpaths, "MODEL"))
    except ConfigurationError as exc:
        raise _in_the_wheel(exc, args) from exc
    refuse_foreign(configured.config, plan_file)
    given.refuse_idle(m.options for m in configured.config.models)
    if configured.config.table != COMMAND_LINE:  # its fixes go into the table: hints name its keys
        hints.configured_by_table()
    return configured, plan_file


def _fix(configured: Configured, settings: Settings, display: Stderr, plan_file: Path | None,
         max_runs: int) -> tuple[dict[str, Any], int]:
    """``--fix``: the cheapest choice per model with which the tests pass again (``max_runs``: the runs
    its per-tensor rung may take per model; 0: not tried), merged into the plan file when they pass
    with every choice applied; the report's JSON and the exit code."""
    from hatch_shrinkray.checking import report
    from hatch_shrinkray.checking.configure import COMMAND_LINE
    from hatch_shrinkray.checking.fix import fix_entries, run_fix

    old = dict(configured.config.plans)
    # --fix judges the configuration itself: the choices it made before are made again
    fixed = run_fix(replace(configured, config=replace(configured.config, plans={})), settings, display, max_runs)
    judged = {c.prepared.relpath for c in fixed.choices}
    fixes = fix_entries(fixed, settings.command, settings.project)
    written = None
    if not fixed.passed:
        written = "the plan file is left as it was: the tests do not pass with every choice applied"
    elif fixes or any(e.model in judged for e in old.values()):
        written = _plan_written(plan_file, fixes, configured.config.table != COMMAND_LINE, judged=judged, old=old)
    print(report.render_fix(fixed, written))
    return report.fix_json(fixed), 0 if fixed.passed else 1


def _check_limits(args: argparse.Namespace) -> None:
    """Every out-of-range value of ``check``'s own flags, in one line."""
    problems = [f"{flag} must be {what}; got {value}" for flag, value, ok, what in (
        ("--max-flip-rate", args.max_flip_rate, in_range(args.max_flip_rate, 0.0, 1.0), "a share from 0 to 1"),
        ("--threshold", args.threshold, in_range(args.threshold, 0.0, 1.0) and 0 < args.threshold < 1,
         "a probability between 0 and 1"),
        ("--max-runs", args.max_runs, args.max_runs is None or args.max_runs >= 1, "a positive integer"),
        ("--timeout", args.timeout, in_range(args.timeout, 0.0, MAX_TIMEOUT) and args.timeout > 0,
         f"a number of seconds above 0 and at most {MAX_TIMEOUT:.0f}")) if not ok]
    problems += [f"{flag} does nothing here: it applies with {modes} only" for flag, given, modes, active in (
        ("--max-flip-rate", args.max_flip_rate != 0.0, "--shadow or --search", args.shadow or args.search),
        ("--max-runs", args.max_runs is not None, "--search or --fix", args.search or args.fix))
        if given and not active]
    if problems:
        raise ShrinkrayError("; ".join(problems))


def _in_the_wheel(exc: ConfigurationError, args: argparse.Namespace) -> ShrinkrayError:
    """``exc``, or where a ``[tool.hatch-shrinkray]`` table's ``models`` match nothing in the project
    (paths inside a wheel the project does not hold, as a stub that rewrites someone else's wheel),
    what ``check`` needs instead: the installed files."""
    table, patterns = exc.table, exc.unmatched
    if args.models or table != "tool.hatch-shrinkray" or len(patterns) != len(exc.errors):
        return exc
    listed = " ".join(shlex.quote(hints.SITE + p) for p in patterns)
    return ShrinkrayError(f"`{table}.models` ({', '.join(patterns)}) names files inside the wheel, and this project "
                          "does not hold them", hint=f"name the installed files: hatch-shrinkray check {listed} -- "
                          f"{shlex.join(args.argv) or 'COMMAND'} (SITE-PACKAGES: where the package is installed)")


def _plan_written(path: Path | None, entries: dict[str, Any], project: bool, *, judged: set[str] | None = None,
                  old: dict[str, Any] | None = None) -> str:
    """Merge ``entries`` into the plan file (:func:`merge_plan`) and say what was written and what
    ships it (``project``: the project's builds, else ``shrink --plan``)."""
    if path is None:
        return "not written: the configuration says `plan = false` (set `plan` to a file name to keep it)"
    merge_plan(path, entries, judged=judged, old=old)
    ships = ("every build of this project (the hook, `hatch-shrinkray wheel`) ships it" if project
             else f"`hatch-shrinkray shrink MODEL --plan {path}` ships it")
    if not entries:
        return f"wrote {path}: no model needs a remedy now (the earlier ones for these models are gone); commit it"
    return f"wrote the plan for {len(entries)} model(s) into {path}: {ships}; commit it"
