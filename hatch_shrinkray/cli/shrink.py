"""``hatch-shrinkray shrink``: shrink model files into an output directory.

A bad file is reported and the remaining files are still processed. Inside a project with a
configuration table, a file the table selects takes its options and the plan file's plan for its
bytes, with the flags given overriding them key by key: the build's bytes (``cli.project``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hatch_shrinkray import progress
from hatch_shrinkray.checking.installed import expand
from hatch_shrinkray.cli.flags import Given, option_flags, plan_flag
from hatch_shrinkray.cli.output import Stderr, need_brotli, print_error, write_report
from hatch_shrinkray.cli.project import project_of
from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import PlanError, ShrinkrayError, printable
from hatch_shrinkray.files import copy_atomically, model_files
from hatch_shrinkray.hints import LINE_LIMIT, listed
from hatch_shrinkray.shipping.advice import record_advice
from hatch_shrinkray.shipping.planned import confirm_plan
from hatch_shrinkray.shipping.wording import fix_line
from hatch_shrinkray.verdict import WRITTEN


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = command(sub, "shrink", help="shrink models into an output directory",
                description="Shrink models into an output directory. Files inside the current directory's project "
                            "get its configuration table's options (overrides included) and its plan file's plans, "
                            "the flags given overriding them key by key; other files get the flags alone.")
    s.add_argument("models", nargs="+", metavar="MODEL", help="model files (glob patterns allowed)")
    s.common(s.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="output directory"),
             s.add_argument("--force", action="store_true", help="overwrite existing outputs"),
             plan_flag(s))
    s.add_argument("--sizes", action="store_true",
                   help="measure the web size (brotli 11, ~0.3 MB/s; needs the compress extra) instead of estimating "
                        "it, and print a size table")
    s.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON ('-' for stdout)")
    option_flags(s)


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.codec import encode
    from hatch_shrinkray.engine import shrink
    from hatch_shrinkray.report import shrink_report
    from hatch_shrinkray.shipping.manifest import file_sha256
    from hatch_shrinkray.shipping.plan import read_plan

    given = Given.of(args)
    options = given.options()
    need_brotli(options, args.sizes)
    files, unmatched = expand(args.models)
    project = project_of(args, given, files, "shrink")
    configured = project.options
    given.refuse_idle([configured.get(f, options) for f in files] or [options])
    plans = read_plan(args.plan) if args.plan is not None else project.plans
    plan_name = str(args.plan) if args.plan is not None else project.plan_file
    failures = 0
    for pattern in unmatched:
        print(f"error: {pattern}: matches no file; {_models_here()}", file=sys.stderr)
        failures += 1
    reports = []
    seen: set[Path] = set()
    for src in progress.tracked(files, "shrink"):
        dest = args.output / src.name
        try:
            _refuse_clash(src, dest, seen, args.force)
            planned = args.plan is not None or src in configured
            plan = plans.get(file_sha256(src)) if planned and src.is_file() else None
            if args.plan is not None and plan is None and src.is_file():
                print(f"{src}: {args.plan} has no plan for these bytes (a retrained model has none); shrinking "
                      f"with {configured.get(src, options).method} as given", file=sys.stderr)
            chosen = configured.get(src, options)
            if plan is not None and plan.remedy is not None:
                print(printable(fix_line(str(src), plan, chosen, src.stat().st_size, WRITTEN)), file=sys.stderr)
            if plan is not None and plan.ships_original:
                try:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    copy_atomically(src, dest)
                except OSError as exc:
                    raise ShrinkrayError(f"cannot write {dest}: {exc.strerror or exc}", path=str(src)) from exc
                continue
            result = shrink(src, dest, plan.apply(chosen) if plan is not None else chosen, exact_web=args.sizes)
        except ShrinkrayError as exc:
            if isinstance(exc, PlanError):
                exc.name_plan(plan_name)
            failures += 1
            print_error(exc, args.verbose, given.names)
            continue
        if plan is not None:
            confirm_plan(str(src), plan, file_sha256(dest), Stderr(args.verbose, args.quiet))
        print(shrink_report(result, args.sizes, verbose=args.verbose))
        if result.unverified:
            inputs = chosen.verify.inputs if chosen.verify is not None else None
            # the line above says the original shipped; this one what lets the next run shrink it
            print(f"{src}: {record_advice(Path.cwd(), inputs, '--inputs')}", file=sys.stderr)
        reports.append(encode(result))
    written = args.json is None or write_report(args.json, json.dumps(reports, indent=2, sort_keys=True), args.verbose)
    if failures:
        print(f"{failures} of {len(files) + len(unmatched)} models failed", file=sys.stderr)
    return 1 if failures or not written else 0


def _models_here() -> str:
    """The model files under the working directory, for a glob that matched none."""
    found = model_files(Path.cwd())
    return f"the .onnx files here: {listed(found, LINE_LIMIT - 70)}" if found else "no .onnx file under this directory"


def _refuse_clash(src: Path, dest: Path, seen: set[Path], force: bool) -> None:
    """Refuse an output another input writes, the source itself, or (without ``--force``) one that exists."""
    if dest in seen:
        raise ShrinkrayError(f"another input also writes {dest}", path=str(src),
                             hint="shrink same-named models into different directories")
    seen.add(dest)
    if dest.exists() and src.exists() and dest.resolve() == src.resolve():
        raise ShrinkrayError("the output would overwrite the source", path=str(src),
                             hint="choose another output directory")
    if dest.exists() and not force:
        raise ShrinkrayError(f"output {dest} exists", path=str(src), hint="use --force to overwrite")
