"""``hatch-shrinkray bundle``: shrink the models inside an app folder, a venv or an unpacked installer."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path

from hatch_shrinkray.cli.check import DEFAULT_TIMEOUT
from hatch_shrinkray.cli.flags import Given, Noted, option_flags, pins_flag
from hatch_shrinkray.cli.output import Stderr
from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.config import ConfigurationError, HookConfig

EVERY_MODEL = "**/*.onnx"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = command(
        sub, "bundle", help="shrink the models inside a directory tree: an app folder, a venv, an unpacked installer",
        description="Shrink and verify every model under DIR as the build hook would (a PyInstaller onedir app, a "
                    "Briefcase app, a venv or the site-packages of a container image), in place or into a copy: "
                    "each file is replaced whole (a stopped run leaves it original or complete; the next run "
                    "finishes), every installed distribution's RECORD follows its files, and the manifest at "
                    "DIR's root lets a second run ship the same bytes without shrinking again. With -- COMMAND, "
                    "COMMAND (the app's self-test, the package's tests) runs on the original tree and on the "
                    "shrunk one; a test or exit status that regresses undoes everything. Options come from "
                    "[tool.hatch-shrinkray] of --project when it has one, then from the flags.",
        usage="hatch-shrinkray bundle DIR (-o OUT | --in-place) [options] [-- COMMAND [ARGS...]]")
    b.add_argument("directory", type=Path, metavar="DIR", help="the tree whose models to shrink")
    where = b.add_mutually_exclusive_group(required=True)
    where.add_argument("-o", "--output", type=Path, metavar="OUT", help="write the shrunk tree here (a new directory)")
    where.add_argument("--in-place", action="store_true", help="replace the models inside DIR")
    b.add_argument("--force", action="store_true", help="replace OUT when it exists")
    b.add_argument("--project", type=Path, default=Path("."), action=Noted,
                   help="the project whose [tool.hatch-shrinkray] table gives the options (default: the current "
                        "directory; its `models` are not used: --models selects)")
    b.add_argument("--models", action="append", metavar="GLOB",
                   help=f"the models to shrink: globs relative to DIR (repeatable; ** allowed; default {EVERY_MODEL})")
    pins_flag(b, "the tree's text files")
    b.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="the longest one run of COMMAND may take (default %(default).0f)")
    option_flags(b)
    b.set_defaults(argv=[])  # everything after `--`, split off before parsing (see main)


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.bundles.bundle import Check, bundle
    from hatch_shrinkray.result import human

    source: Path = args.directory
    if not source.is_dir():
        raise ShrinkrayError("no such directory", path=str(source),
                             hint="pass the folder to shrink: a PyInstaller dist/APP, a venv, site-packages")
    configure = _configuration(args)
    configure(source)  # a glob that matches nothing is said before anything is copied
    display = Stderr(args.verbose, args.quiet)
    check = Check(tuple(args.argv), args.timeout) if args.argv else None
    done = bundle(source, None if args.in_place else args.output, configure, display, force=args.force, check=check)
    before = sum(m.original_size for m in done.shipped)
    after = sum(m.shipped_size for m in done.shipped)
    count = f"{len(done.shipped)} model" + ("s" if len(done.shipped) != 1 else "")
    records = f"; {len(done.records)} RECORD file(s) follow their files" if done.records else ""
    if done.verdict is not None and not done.verdict.passed:
        print(f"{done.destination}: left as it was, the check failed ({count}; it would have shipped {human(before)} "
              f"-> {human(after)})")
    else:
        what = ("shrunk in place" if args.in_place else f"written, from {source}") if done.changed \
            else "unchanged: nothing to replace"
        print(f"{done.destination}: {what} ({count}, {human(before)} -> {human(after)}{records})")
    if done.verdict is None:
        return 0
    from hatch_shrinkray.checking.verdict import tally

    verdict = done.verdict
    for regression in verdict.regressions:
        said = regression.text.strip().splitlines()[0][:80] if regression.text.strip() else ""
        print(f"check: regressed: {regression.test}: {regression.before} -> {regression.after}"
              f"{': ' + said if said else ''}")
    runs = f"original tree: exit {verdict.original.exit_code}, {tally(verdict.original)}; shrunk tree: exit " \
           f"{verdict.shrunk.exit_code}, {tally(verdict.shrunk)}"
    if verdict.passed:
        print(f"check: passed: every test and the exit status held ({runs})")
        return 0
    print(f"check: failed: {len(verdict.regressions)} regression(s); nothing was changed ({runs})")
    return 1


def _configuration(args: argparse.Namespace) -> Callable[[Path], HookConfig]:
    """The configuration of a tree at a given root: the project's table (when it has one) for the
    options, the --models globs (relative to the tree) for the models, the flags over both."""
    from hatch_shrinkray.shipping.config import load_config
    from hatch_shrinkray.shipping.layout import Layout
    from hatch_shrinkray.shipping.project import find_table

    given = Given.of(args)
    given.options()  # the flags are checked on their own first, each named as given
    project = args.project.resolve()
    raw, table = find_table(project, required=False)
    flags = given.command_line(args, tuple(args.models or (EVERY_MODEL,)), every_flag=table is None)
    load = functools.partial(load_config, {k: v for k, v in (raw or {}).items() if k != "models"}, project,
                             "bundle", table or "--models", flags=flags, layout=Layout())

    def configure(root: Path) -> HookConfig:
        try:
            return load(models_root=root)
        except ConfigurationError as exc:
            if exc.unmatched and len(exc.unmatched) == len(exc.errors):
                raise ShrinkrayError(f"no model to shrink: no file matches {', '.join(exc.unmatched)}",
                                     path=str(args.directory), hint="pass --models GLOB, relative to DIR") from exc
            raise

    return configure
