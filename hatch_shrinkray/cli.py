"""``hatch-shrinkray`` / ``python -m hatch_shrinkray``: info, shrink, compare, wheel, record, check.

Every user mistake ends in one line on stderr and a non-zero exit; ``-v`` adds tracebacks.
In ``shrink`` a bad file is reported and the remaining files are still processed. Ctrl-C and
SIGTERM leave nothing behind and end the process the conventional way (130, or by the signal).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from hatch_shrinkray import hints, progress
from hatch_shrinkray.capture import env
from hatch_shrinkray.errors import OptionError, PlanError, ShrinkrayError, VerificationError, printable
from hatch_shrinkray.files import copy_atomically, write_atomically
from hatch_shrinkray.hints import FLAGS
from hatch_shrinkray.option_table import BY_FIELD, BY_KEY, KINDS, OPTIONS, option_errors, options_from
from hatch_shrinkray.options import ShrinkOptions, in_range
from hatch_shrinkray.shipping.advice import record_advice
from hatch_shrinkray.shipping.config import (
    PINS_CHOICES,
    CommandLine,
    ConfigurationError,
    HookConfig,
)
from hatch_shrinkray.shipping.ship import confirm_plan, engine_missing, fix_line, printable_lines
from hatch_shrinkray.signals import Terminated, redeliver, stop_request, terminate_raises
from hatch_shrinkray.sizes import BROTLI_HINT, brotli_problem

QUIET_HELP = ("no progress (on a terminal a live display; on a pipe a line at least every 30 s, "
              f"{progress.INTERVAL_ENV} seconds) and no informational lines; warnings, errors and results remain")
DEFAULT_TIMEOUT = 3600.0
"""``check --timeout``: an hour per run of the command, generous for a test suite; a hang ends."""
MAX_TIMEOUT = 7 * 24 * 3600.0
COMMAND_LINE = "the command line"
"""The table name of a configuration from model files and flags alone (no project table)."""
FLAG_NAMES = {**{o.field: o.flags[0] for o in OPTIONS if o.flags}, "plan": "--plan"}
"""Options field -> the flag that sets it, for messages about flags (``plan``: the plan file's)."""


class _Given(argparse.Action):
    """argparse's store, append and store-const in one, which also notes (in the order given) the
    settings the user gave and how they spelled each: the flags given override the project's table
    key by key, messages name them as written, and hints quote them."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, append: bool = False, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.append = append

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        value = self.const if self.nargs == 0 else values
        if self.append:
            value = [*getattr(namespace, self.dest), value]
        setattr(namespace, self.dest, value)
        namespace.given = {**getattr(namespace, "given", {})}
        namespace.given.setdefault(self.dest, option_string)


def _option_flags(p: argparse.ArgumentParser, *, verify: bool) -> None:
    """The flags of the engine options (``verify``: the verification ones, in their own group)."""
    group = p.add_argument_group("verification") if verify else p
    for option in OPTIONS:
        if not option.flags or option.verify != verify:
            continue
        spec = dict(KINDS[option.kind].flag)
        append = spec.pop("append", False)
        default = option.default()
        if option.kind == "boolean":
            spec["const"] = option.const
        elif append or option.kind == "range":
            default = list(default)
        if option.metavar:
            spec["metavar"] = option.metavar
        deprecated = f" (also {option.alias}, deprecated)" if option.alias else ""
        group.add_argument(*option.flags, dest=option.field, action=_Given, append=append, default=default,
                           help=f"{option.flag_help}{deprecated}", **spec)


class _Parser(argparse.ArgumentParser):
    """A usage error is a user mistake like any other: one line, ``error: ...``, and exit 1 (argparse
    prints its usage block and exits 2); the line names the help that shows the usage."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(1)


VERBOSE_HELP = "show tracebacks and the details: per-tensor encodings, verification figures and tables"


def parser() -> argparse.ArgumentParser:
    from hatch_shrinkray import __version__

    p = _Parser(
        prog="hatch-shrinkray",
        description="Shrink ONNX models (weights-only quantization), verified with onnxruntime.")
    p.add_argument("--version", action="version", version=f"hatch-shrinkray {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="show a model's weights and how much of the file they are")
    info.add_argument("model", type=Path)
    info.add_argument("--min-elements", type=int, default=16384,
                      help="smallest tensor the table counts as one to encode (default 16384, as shrink)")
    info.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("shrink", help="shrink models into an output directory")
    s.add_argument("models", nargs="+", help="model files (glob patterns allowed)")
    s.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    _option_flags(s, verify=False)
    s.add_argument("--force", action="store_true", help="overwrite existing outputs")
    s.add_argument("--sizes", action="store_true",
                   help="measure the web size (brotli 11, ~0.3 MB/s; needs the compress extra) instead of estimating "
                        "it, and print a size table")
    s.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON ('-' for stdout)")
    s.add_argument("--plan", type=Path, metavar="FILE", action=_Given,
                   help="apply the per-tensor plan this plan file holds for each model's bytes (check --search)")
    _option_flags(s, verify=True)

    w = sub.add_parser("wheel", help="shrink the models inside built wheels (any build backend)",
                       description="Rewrite wheels with their models shrunk and verified as the build hook "
                                   "would. The configuration is [tool.hatch-shrinkray] (or the hook's table) "
                                   "of the project's pyproject.toml; --models and the options below override its "
                                   "keys one by one (without a table, they configure alone).")
    w.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL", help="wheel files")
    where = w.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", type=Path, default=Path("wheelhouse"),
                       help="directory for the rewritten wheels (default: wheelhouse)")
    where.add_argument("--in-place", action="store_true", help="replace each input wheel")
    w.add_argument("--force", action="store_true", help="overwrite existing output wheels")
    w.add_argument("--project", type=Path, default=Path("."), action=_Given,
                   help="the project whose pyproject.toml configures the models (default: the current directory)")
    w.add_argument("--models", action="append", metavar="GLOB",
                   help="the models to shrink instead of the table's `models`: paths inside the wheel or in the "
                        "project (pkg/models/*.onnx or src/pkg/models/*.onnx; repeatable; ** allowed)")
    w.add_argument("--pins", choices=PINS_CHOICES,
                   help="what to do where the wheel's own text files pin the sha256, sha1 or md5 of an original "
                        "model: warn (the default) or rewrite them to name the shrunk model's (the `pins` key)")
    _option_flags(w, verify=False)
    _option_flags(w, verify=True)

    c = sub.add_parser("compare", help="verify a shrunk model against its original and compare sizes")
    c.add_argument("original", type=Path)
    c.add_argument("shrunk", type=Path)
    c.add_argument("--sizes", action="store_true", help="measure the web size (brotli 11, ~0.3 MB/s; needs the "
                                                        "compress extra) instead of estimating it")
    _option_flags(c, verify=True)

    r = sub.add_parser("record", help="run a command and record the inputs its onnxruntime sessions see",
                       description="Run COMMAND (tests, a demo, your CLI; Python subprocesses included) with "
                                   "onnxruntime instrumented, and write a bounded sample of each model's inputs into "
                                   "DIR, one .npz per model, for `inputs`: spread over the pytest tests that ran it "
                                   "(else over its calls), whole streams for a recurrent model. Ends with a coverage "
                                   "table, including the project's configured models that never ran, and the next "
                                   "step. The command's exit code is passed through; when a recording is not "
                                   "complete on disk (a full disk), record names what was lost and exits 1 if the "
                                   "command did not fail.",
                       usage="hatch-shrinkray record --output DIR [options] -- COMMAND [ARGS...]")
    r.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="recording directory")
    r.add_argument("--max-samples", type=int, default=env.MAX_SAMPLES, metavar="N",
                   help=f"samples kept per model; a stream counts as one (default {env.MAX_SAMPLES})")
    r.add_argument("--max-bytes", type=int, default=None, metavar="BYTES",
                   help=f"bound on the bytes each model's samples take in its file, compressed, headers "
                        f"included, hard when given; a feed over it alone is left out and counted (default "
                        f"{env.MAX_BYTES}, growing up to {env.MAX_BYTES_FOR_UNITS} when 16 independent units need "
                        "more)")
    r.add_argument("--max-memory", type=int, default=env.MAX_MEMORY, metavar="BYTES",
                   help=f"bound on the bytes each model's samples take once loaded (the arrays a build decodes); "
                        f"a feed over a sixteenth of it alone is left out and counted (default {env.MAX_MEMORY}; "
                        "at most the 1 GB that reading a recording allows)")
    r.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to run, after --")

    k = sub.add_parser(
        "check", help="let the package's own tests (or any command) judge the shrunk models",
        description="Shrink the models as configured (through the cache), run COMMAND with the original models "
                    "and again with every onnxruntime session of a configured model loading the shrunk one, and "
                    "report every test that regressed (exit 1). --shadow: one run in which every call also runs "
                    "the shrunk model and the differences are counted. --fix: where tests regress, the cheapest "
                    "choice per model that passes them again (round-to-nearest codes, int8, fp16, the original), "
                    "written into the plan file the hook reads. --search: the smallest per-tensor plan the tests "
                    "accept, written there too.",
        usage="hatch-shrinkray check [MODEL...] [--project DIR] [options] -- COMMAND [ARGS...]")
    k.add_argument("models", nargs="*", metavar="MODEL",
                   help="the models to check (default: the project's `models`): paths or globs in the project or "
                        "inside the wheel (src/pkg/m.onnx or pkg/m.onnx), with the project's options and the flags "
                        "below overriding them key by key; outside a configured project, model files shrunk with "
                        "the flags alone")
    k.add_argument("--project", type=Path, default=None, action=_Given,
                   help="the project whose pyproject.toml configures the models (default: the current directory)")
    mode = k.add_mutually_exclusive_group()
    mode.add_argument("--shadow", action="store_true",
                      help="one run: the program gets the original outputs, the shrunk models run beside them")
    mode.add_argument("--fix", action="store_true",
                      help="where tests regress, find per model the cheapest choice with which they pass again "
                           "(round-to-nearest codes, int8 instead of auto's plan, fp16, the original) and write it "
                           "into the plan file the hook and `wheel` read")
    mode.add_argument("--search", action="store_true",
                      help="find the smallest per-tensor plan the tests accept and write it into the plan file")
    k.add_argument("--pytest", action="store_true",
                   help="require per-test outcomes (automatic when COMMAND is pytest or python -m pytest)")
    k.add_argument("--threshold", type=float, default=0.5, action=_Given,
                   help="decision threshold of probability outputs for shadow flips (default 0.5)")
    k.add_argument("--max-flip-rate", type=float, default=0.0, metavar="RATE",
                   help="--search/--shadow: share of shadow decisions allowed to flip (default 0)")
    k.add_argument("--max-runs", type=int, default=16, metavar="N",
                   help="--search: runs of COMMAND per model at most (default 16)")
    k.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", action=_Given,
                   help=f"the longest one run of COMMAND may take; it is then stopped with its whole process group "
                        f"and check fails (default {DEFAULT_TIMEOUT:.0f})")
    k.add_argument("--plan", type=Path, metavar="FILE", action=_Given,
                   help="plan file to read and (--fix, --search) write (default: the configuration's, or "
                        "shrinkray-plan.json)")
    k.add_argument("--json", type=Path, metavar="FILE", help="write the report as JSON ('-' for stdout)")
    _option_flags(k, verify=False)
    _option_flags(k, verify=True)
    k.set_defaults(argv=[])  # everything after `--`, split off before parsing (see main)
    for command in sub.choices.values():  # before or after the command's name
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p


@dataclass(frozen=True)
class Given:
    """The engine options the user gave as flags, read once from the parsed command line."""

    settings: dict[str, Any]
    """Key -> value, typed as the table's values are read (``inputs``: the path as given)."""
    spelled: dict[str, str]
    """Key -> the flag as the user wrote it (a deprecated spelling included)."""

    @classmethod
    def of(cls, args: argparse.Namespace) -> Given:
        settings: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for dest, flag in getattr(args, "given", {}).items():
            option = BY_FIELD.get(dest)
            if option is not None:
                settings[option.key] = KINDS[option.kind].given(getattr(args, dest), flag)
                spelled[option.key] = flag
        return cls(settings, spelled)

    def names(self) -> dict[str, str]:
        """Options field -> the flag that sets it, as the user wrote it when given."""
        return {**FLAG_NAMES, **{BY_KEY[k].field: flag for k, flag in self.spelled.items()}}

    def options(self) -> ShrinkOptions:
        """The options the flags alone give (the engine's defaults for the others), checked."""
        options = options_from(self.settings, Path())
        errors = option_errors(options, self.names())
        if errors:
            raise ShrinkrayError("; ".join(errors))
        return options

    def command_line(self, args: argparse.Namespace, models: Sequence[str] = (), models_flag: str = "--models", *,
                     every_flag: bool = False) -> CommandLine:
        """The flags given, as keys that override the project's table one by one; ``models`` globs
        replace its ``models``. ``every_flag``: there is no table, so messages name every setting
        by its flag, given or not."""
        settings = {k: str(Path(v).absolute()) if k == "inputs" else v for k, v in self.settings.items()}
        names = {**(FLAGS if every_flag else {}), **self.spelled}
        return CommandLine(settings, names, tuple(models), models_flag, getattr(args, "pins", None))


def _names(args: argparse.Namespace) -> dict[str, str]:
    """Options field -> the flag that sets it, as written when given (nothing parsed: for messages)."""
    given = getattr(args, "given", {})
    return {**FLAG_NAMES, **{dest: flag for dest, flag in given.items() if dest in BY_FIELD}}


def _as_check_args(args: argparse.Namespace) -> list[str]:
    """The shrink and verification flags the user gave, in their order and spelling, as ``check``
    takes them, for hints that quote their command (the models go apart: ``check``'s MODEL
    arguments take the same spellings as ``--models``)."""
    given = getattr(args, "given", {})
    tokens: list[str] = []
    for dest in ("project", "plan", "timeout", "threshold"):
        if dest in given and getattr(args, dest, None) is not None:
            tokens += [f"--{dest}", str(getattr(args, dest))]
    if getattr(args, "pytest", False):
        tokens.append("--pytest")
    for dest, flag in given.items():
        option = BY_FIELD.get(dest)
        value = getattr(args, dest)
        if option is None or value is None:
            continue
        if option.kind == "boolean":
            tokens.append(flag)
        elif option.kind == "range":
            tokens += [flag, *map(str, value)]
        elif isinstance(value, list):
            tokens += [t for v in value for t in (flag, str(v))]
        else:
            tokens += [flag, str(value)]
    return tokens


def _expand(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    files: list[Path] = []
    unmatched: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            hits = sorted(glob.glob(pattern, recursive=True))
            if not hits:
                unmatched.append(pattern)
            files.extend(Path(h) for h in hits)
        else:
            files.append(Path(pattern))
    return files, unmatched


def cmd_shrink(args: argparse.Namespace) -> int:
    from hatch_shrinkray.engine import shrink
    from hatch_shrinkray.report import result_json, shrink_report
    from hatch_shrinkray.shipping.manifest import file_sha256
    from hatch_shrinkray.shipping.plan import read_plan

    given = Given.of(args)
    options = given.options()
    _need_brotli(options, args.sizes)
    plans = read_plan(args.plan) if args.plan is not None else {}
    files, unmatched = _expand(args.models)
    configured = _project_options(args, given, files)
    failures = 0
    for pattern in unmatched:
        print(f"error: {pattern}: matches no file", file=sys.stderr)
        failures += 1
    reports = []
    seen: set[Path] = set()
    for src in progress.tracked(files, "shrink"):
        dest = args.output / src.name
        try:
            if dest in seen:
                raise ShrinkrayError(f"another input also writes {dest}", path=str(src),
                                     hint="shrink same-named models into different directories")
            seen.add(dest)
            if dest.exists() and src.exists() and dest.resolve() == src.resolve():
                raise ShrinkrayError("the output would overwrite the source", path=str(src),
                                     hint="choose another output directory")
            if dest.exists() and not args.force:
                raise ShrinkrayError(f"output {dest} exists", path=str(src), hint="use --force to overwrite")
            plan = plans.get(file_sha256(src)) if args.plan is not None and src.is_file() else None
            if args.plan is not None and plan is None and src.is_file():
                print(f"{src}: {args.plan} has no plan for these bytes (a retrained model has none); shrinking "
                      f"with {configured.get(src, options).method} as given", file=sys.stderr)
            chosen = configured.get(src, options)
            if plan is not None and plan.remedy is not None:
                print(printable(fix_line(str(src), plan, chosen, src.stat().st_size)), file=sys.stderr)
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
                exc.name_plan(str(args.plan))
            failures += 1
            _error(exc, args.verbose, given.names())
            continue
        if plan is not None:
            confirm_plan(str(src), plan, file_sha256(dest), _Stderr(args.verbose, args.quiet))
        print(shrink_report(result, args.sizes, verbose=args.verbose))
        if result.unverified:
            inputs = chosen.verify.inputs if chosen.verify is not None else None
            print(f"{src}: original kept; {record_advice(Path.cwd(), inputs, '--inputs')}", file=sys.stderr)
        reports.append(result_json(result))
    written = args.json is None or _write_report(args.json, json.dumps(reports, indent=2, sort_keys=True), args.verbose)
    if failures:
        print(f"{failures} of {len(files) + len(unmatched)} models failed", file=sys.stderr)
    return 1 if failures or not written else 0


def _project_options(args: argparse.Namespace, given: Given, files: Sequence[Path]) -> dict[Path, ShrinkOptions]:
    """The options of each file inside the current directory's project, as its configuration table
    gives them (overrides included) with the flags given overriding it key by key; {} when there is
    no table (the flags alone then)."""
    from hatch_shrinkray.shipping.config import load_config
    from hatch_shrinkray.shipping.project import find_table

    root = Path.cwd()
    raw, table = find_table(root)
    inside = {f: _inside(str(f), root) for f in files if f.is_file()}
    relpaths = {f: r for f, r in inside.items() if r is not None}
    if table is None or not relpaths:
        return {}
    flags = given.command_line(args, sorted(set(relpaths.values())), "MODEL")
    config = load_config(raw, root, "wheel", table, flags=flags)
    by_path = {m.relpath: m.options for m in config.models}
    print(f"shrink: options from `{table}` in pyproject.toml; the flags given override them", file=sys.stderr)
    return {f: by_path[r] for f, r in relpaths.items() if r in by_path}


def _need_brotli(options: ShrinkOptions, sizes: bool) -> None:
    """One line, before any model, when brotli quality 11 must be measured and cannot be."""
    problem = brotli_problem()
    if problem and (options.target == "web" or sizes):
        what = "--target web counts" if options.target == "web" else "--sizes measures"
        raise ShrinkrayError(f"{what} brotli quality 11 bytes, and {problem}", hint=BROTLI_HINT)


def _write_report(path: Path, text: str, verbose: bool) -> bool:
    """Print (``-``) or write the JSON report atomically; a failure is one error line."""
    if str(path) == "-":
        print(text)
        return True
    try:
        write_atomically(path, (text + "\n").encode())
    except OSError as exc:
        _error(ShrinkrayError(f"cannot write the report: {exc.strerror or exc}", path=str(path),
                              hint="free some space or choose another --json path"), verbose)
        return False
    return True


class _Stderr:
    """The hook's five report calls, for the terminal: the same lines a build prints (``-q``: only
    the warnings, as ``hatch -q build``)."""

    def __init__(self, verbose: bool, quiet: bool = False) -> None:
        self.verbose = verbose
        self.quiet = quiet

    def display_warning(self, message: str = "") -> None:
        print(printable_lines(message), file=sys.stderr, flush=True)

    def display_info(self, message: str = "") -> None:
        if not self.quiet:
            self.display_warning(message)

    display_waiting = display_success = display_info

    def display_debug(self, message: str = "", level: int = 1) -> None:
        if self.verbose:
            self.display_warning(message)


def cmd_wheel(args: argparse.Namespace) -> int:
    from hatch_shrinkray.result import human
    from hatch_shrinkray.shipping.config import load_config
    from hatch_shrinkray.shipping.layout import project_layout
    from hatch_shrinkray.shipping.manifest import read_manifest
    from hatch_shrinkray.shipping.project import find_table
    from hatch_shrinkray.wheels.rewrite import rewrite_wheel

    given = Given.of(args)
    given.options()  # the flags are checked on their own first, each named as given
    project = args.project.resolve()
    raw, table = find_table(project, required=not args.models)
    if table is None:
        hints.installed_models()
    configure: Callable[[Path], HookConfig] = functools.partial(
        load_config, raw, project, "wheel", table or "--models",
        flags=given.command_line(args, args.models or (), every_flag=table is None))
    created = not args.in_place and not args.output.exists()
    outputs = _wheel_destinations(args)
    display = _Stderr(args.verbose, args.quiet)
    manifest = read_manifest(project, display.display_warning)
    rewrote = in_tree = False
    layout = project_layout(project)  # how the wheel's paths are spelled in the project's tree
    for source, destination in progress.tracked(outputs, "wheel", detail=lambda pair: pair[0].name):
        try:
            done = rewrite_wheel(source, destination, configure, manifest, display)
        except BaseException as exc:
            if created:  # the output directory this command made, if nothing was written into it
                with contextlib.suppress(OSError):
                    args.output.rmdir()
            if isinstance(exc, ShrinkrayError) and exc.path not in (str(source), str(destination)):
                exc.path = f"{source}: {exc.path}" if exc.path else str(source)
            raise
        before = sum(m.original_size for m in done.shipped)
        after = sum(m.shipped_size for m in done.shipped)
        what = "rewrote" if done.changed else "copied unchanged" if destination != source else "left unchanged"
        count = f"{len(done.shipped)} model" + ("s" if len(done.shipped) != 1 else "")
        print(f"{destination}: {what} ({count}, {human(before)} -> {human(after)})")
        rewrote = rewrote or done.changed
        in_tree = in_tree or any((project / spelled).is_file() for m in done.shipped
                                 for spelled in layout.spellings(m.relpath, in_wheel=False))
    # The hook shrinks a Hatch project's sdist itself; a project whose tree does not hold the models (a
    # wheel rewritten from a stub project) has no sdist that could carry them.
    if rewrote and in_tree and not (table or "").startswith("tool.hatch."):
        print("note: only wheels are rewritten; this project's sdist still holds the original models (for a slim "
              "sdist, leave them out of it, or build with the Hatch hook, which shrinks them there too)")
    return 0


def _wheel_destinations(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """``(input, output)`` per wheel, refusing clashes before any work is done."""
    pairs: list[tuple[Path, Path]] = []
    for source in args.wheels:
        if not source.is_file():
            raise ShrinkrayError("no such wheel", path=str(source), hint="pass the .whl files a build wrote")
        destination = source if args.in_place else args.output / source.name
        if not args.in_place and destination.exists() and destination.resolve() == source.resolve():
            raise ShrinkrayError("the output would overwrite the input", path=str(source),
                                 hint="pass --in-place to replace it, or choose another -o directory")
        if destination in (d for _, d in pairs):
            raise ShrinkrayError(f"another input also writes {destination}", path=str(source))
        if not args.in_place and destination.exists() and not args.force:
            raise ShrinkrayError(f"output {destination} exists", path=str(source), hint="use --force to overwrite")
        pairs.append((source, destination))
    if not args.in_place:
        try:
            args.output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ShrinkrayError(f"cannot create the output directory: {exc.strerror or exc}",
                                 path=str(args.output)) from exc
    return pairs


def cmd_info(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from hatch_shrinkray.onnxgraph.inspect_model import model_info

    errors = option_errors(ShrinkOptions(min_elements=args.min_elements), FLAG_NAMES)
    if errors:
        raise ShrinkrayError("; ".join(errors))
    info = model_info(args.model)
    if args.json:
        print(json.dumps({**asdict(info), "weight_bytes": info.weight_bytes}, indent=2))
    else:
        print(info.render(args.min_elements))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from hatch_shrinkray.report import model_files, sizes_table, verification_report
    from hatch_shrinkray.sizes import measure
    from hatch_shrinkray.verification.runner import verify

    _need_brotli(ShrinkOptions(), args.sizes)
    # Checked like `shrink` checks its input first, so a bad file gets the same one-line message.
    options = Given.of(args).options().verify
    assert options is not None  # compare has no --no-verify
    files = {path: model_files(path) for path in (args.original, args.shrunk)}
    result = verify(args.original, args.shrunk, options)
    print(sizes_table(measure(files[args.original], exact_web=args.sizes),
                      measure(files[args.shrunk], exact_web=args.sizes)))
    print("\n" + verification_report(result))
    if not result.passed:
        print(f"error: {args.shrunk}: differs too much from {args.original}", file=sys.stderr)
        return 1
    return 0


def _error(exc: ShrinkrayError, verbose: bool, names: Mapping[str, str] = FLAG_NAMES) -> None:
    if isinstance(exc, OptionError) and not exc.named:
        exc.name_options(names)  # options given as flags (a project's are named by shipping first)
    if verbose:
        traceback.print_exception(exc)
    text = printable_lines(str(exc))
    if isinstance(exc, (VerificationError, ConfigurationError)):
        print(f"error: {text}", file=sys.stderr)
    else:
        print(f"error: {text.splitlines()[0]}", file=sys.stderr)


def cmd_record(args: argparse.Namespace) -> int:
    from hatch_shrinkray.capture.run import project_root, record, summary
    from hatch_shrinkray.capture.select import Caps
    from hatch_shrinkray.verification.npz import MAX_BYTES as MAX_DECODED

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    problems = [f"{flag} must be {what}; got {value}" for flag, value, ok, what in (
        ("--max-samples", args.max_samples, args.max_samples >= 1, "a positive integer"),
        ("--max-bytes", args.max_bytes, args.max_bytes is None or args.max_bytes >= 1, "a positive integer"),
        ("--max-memory", args.max_memory, 1 <= args.max_memory <= MAX_DECODED,
         f"a positive integer of at most {MAX_DECODED} (what a recording may take once loaded)")) if not ok]
    if problems:
        raise ShrinkrayError("; ".join(problems))
    caps = Caps(args.max_samples, memory=args.max_memory) if args.max_bytes is None else \
        Caps.hard(args.max_samples, args.max_bytes, args.max_memory)
    root = project_root(args.output)
    code, done = record(command, args.output, caps, root)
    models, setup = _record_setup(root)
    print(summary(done, args.output, models, command, setup))
    lost = done.incomplete
    for problem in lost:
        print(f"error: {problem}", file=sys.stderr)
    if lost:
        verdict = (f"{len(lost)} recording(s) or part(s) of one are not complete on disk (the error lines above); "
                   f"the command itself exited {code}")
        print(f"verdict: exit {code or 1}: {verdict}", file=sys.stderr)
    elif code:
        print(f"verdict: exit {code}: the command's own exit code, passed through (what it recorded is kept "
              "above)", file=sys.stderr)
    return code or (1 if lost else 0)


def _record_setup(root: Path) -> tuple[list[Any], Any]:
    """The models the project at ``root`` configures (for the coverage table; none when it
    configures none or its table cannot be read: the build says why) and where its table points
    the build's ``inputs`` (for the next step)."""
    from hatch_shrinkray.capture.run import Expected, Setup
    from hatch_shrinkray.files import file_sha256
    from hatch_shrinkray.shipping.config import hook_table, load_config
    from hatch_shrinkray.shipping.project import find_table

    try:
        raw, table = find_table(root)
    except ShrinkrayError:
        return [], Setup(root=root, hook=hook_table())
    inputs = raw.get("inputs")
    setup = Setup(table, inputs if isinstance(inputs, str) else None, root, hook_table())
    if table is None:
        return [], setup
    try:
        config = load_config(raw, root, "wheel", table)
        return [Expected(m.relpath, file_sha256(root / m.relpath), m.options.method) for m in config.models], setup
    except (ShrinkrayError, OSError):
        return [], setup


def cmd_check(args: argparse.Namespace) -> int:
    from hatch_shrinkray.checking import report
    from hatch_shrinkray.checking.check import Settings, looks_like_pytest, run_check, run_shadow
    from hatch_shrinkray.checking.fix import fix_entries, run_fix
    from hatch_shrinkray.checking.search import plan_entries, run_search
    from hatch_shrinkray.shipping.pins import original_pins

    command = tuple(args.argv)
    if not command:
        raise ShrinkrayError("no command to check with", hint="hatch-shrinkray check [MODEL...] -- python -m pytest")
    problems = [f"{flag} must be {what}; got {value}" for flag, value, ok, what in (
        ("--max-flip-rate", args.max_flip_rate, in_range(args.max_flip_rate, 0.0, 1.0), "a share from 0 to 1"),
        ("--threshold", args.threshold, in_range(args.threshold, 0.0, 1.0) and 0 < args.threshold < 1,
         "a probability between 0 and 1"),
        ("--max-runs", args.max_runs, args.max_runs >= 1, "a positive integer"),
        ("--timeout", args.timeout, in_range(args.timeout, 0.0, MAX_TIMEOUT) and args.timeout > 0,
         f"a number of seconds above 0 and at most {MAX_TIMEOUT:.0f}")) if not ok]
    if problems:
        raise ShrinkrayError("; ".join(problems))
    configured, plan_file = _check_config(args)
    _refuse_foreign(configured.config, plan_file)
    project = (args.project or Path(".")).resolve()
    settings = Settings(command, args.pytest or looks_like_pytest(command), args.threshold, args.max_flip_rate,
                        timeout=args.timeout, project=project)
    display = _Stderr(args.verbose, args.quiet)
    data: dict[str, Any]
    if args.shadow:
        shadowed = run_shadow(configured, settings, display)
        print(report.render_shadow(shadowed, args.max_flip_rate))
        data = report.shadow_json(shadowed)
        code = 1 if report.shadow_failures(shadowed, args.max_flip_rate) else shadowed.run.exit_code
    elif args.fix:
        old = dict(configured.config.plans)
        # --fix judges the configuration itself: the choices it made before are made again
        fixing = replace(configured, config=replace(configured.config, plans={}))
        fixed = run_fix(fixing, settings, display)
        judged = {c.prepared.relpath for c in fixed.choices}
        fixes = fix_entries(fixed, command, project)
        written = None
        if not fixed.passed:
            written = "the plan file is left as it was: the tests do not pass with every choice applied"
        elif fixes or any(e.model in judged for e in old.values()):
            written = _write_plan(plan_file, fixes, configured.config.table != COMMAND_LINE, judged=judged, old=old)
        print(report.render_fix(fixed, written))
        data = report.fix_json(fixed)
        code = 0 if fixed.passed else 1
    elif args.search:
        searched = run_search(configured, settings, display, args.max_runs)
        entries = plan_entries(searched, command, args.max_flip_rate, project)
        written = _write_plan(plan_file, entries, configured.config.table != COMMAND_LINE) if entries else None
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
    if args.json is not None and not _write_report(args.json, json.dumps(data, indent=2, sort_keys=True),
                                                   args.verbose):
        return 1
    return code


def _check_config(args: argparse.Namespace) -> tuple[Any, Path | None]:
    """The models to check (MODEL files with the command-line options, or the project's table) and
    the plan file that ``--search`` writes (None: ``plan = false`` in the project)."""
    from hatch_shrinkray.checking.models import Configured
    from hatch_shrinkray.shipping.config import ModelEntry, load_config
    from hatch_shrinkray.shipping.plan import PLAN_NAME, read_plan
    from hatch_shrinkray.shipping.project import find_table

    given = Given.of(args)
    options = given.options()
    project = (args.project or Path(".")).resolve()
    inside = [_inside(m, project) for m in args.models]
    raw, table = find_table(project, required=not args.models or args.project is not None)
    installed = _installed_root(args.models) if table is not None and args.project is None and None in inside \
        else None
    if installed is None and (table is None or None in inside):  # files outside a configured project: the flags
        if args.project is not None:
            raise ShrinkrayError("MODEL files must lie inside --project", path=args.models[inside.index(None)])
        files, unmatched = _expand(args.models)
        missing = [*unmatched, *(str(f) for f in files if not f.is_file())]
        if missing:
            raise ShrinkrayError("no such model file", path=missing[0])
        plan_file = args.plan or Path(PLAN_NAME)
        plans = read_plan(plan_file) if plan_file.is_file() else {}
        config = HookConfig(table=COMMAND_LINE, target="wheel",
                            models=tuple(ModelEntry(f.name, options, given.names()) for f in files),
                            plan_file=plan_file, plans=plans)
        return Configured(config, tuple(f.resolve().parent for f in files)), plan_file
    # The project's table: for its own files, or for an installed package's, matched by their in-wheel paths.
    root, relpaths = installed if installed is not None else (None, [m for m in inside if m])
    try:
        config = load_config(raw, project, "wheel", table, models_root=root,
                             flags=given.command_line(args, relpaths, "MODEL"))
    except ConfigurationError as exc:
        raise _in_the_wheel(exc, table, args) from exc
    roots = tuple((root or project) for _ in config.models)
    if args.plan is not None:
        config = replace(config, plan_file=args.plan, plans=read_plan(args.plan) if args.plan.is_file() else {})
        return Configured(config, roots), args.plan
    plan_file = None if raw.get("plan") is False else (config.plan_file or project / PLAN_NAME)
    return Configured(config, roots), plan_file


def _in_the_wheel(exc: ConfigurationError, table: str | None, args: argparse.Namespace) -> ShrinkrayError:
    """``exc``, or where a ``[tool.hatch-shrinkray]`` table's ``models`` match nothing in the project
    (paths inside a wheel the project does not hold, as a stub that rewrites someone else's wheel),
    what ``check`` needs instead: the installed files."""
    if args.models or table != "tool.hatch-shrinkray" or not all("matches no file" in e for e in exc.errors):
        return exc
    patterns = [e.split("pattern `", 1)[1].split("`", 1)[0] for e in exc.errors if "pattern `" in e]
    listed = " ".join(shlex.quote(hints.SITE + p) for p in patterns)
    return ShrinkrayError(f"`{table}.models` ({', '.join(patterns)}) names files inside the wheel, and this project "
                          "does not hold them", hint=f"name the installed files: hatch-shrinkray check {listed} -- "
                          f"{shlex.join(args.argv) or 'COMMAND'} (SITE-PACKAGES: where the package is installed)")


def _refuse_foreign(config: HookConfig, plan_file: Path | None) -> None:
    """A plan file whose every entry names a model this configuration does not have was written for
    another project (copied along, or ``--plan`` pointing elsewhere): refused before anything runs,
    so that ``--fix`` never merges its choices into it."""
    configured = {m.relpath for m in config.models}
    named = sorted({e.model for e in config.plans.values()})
    if named and not configured & set(named):
        raise ShrinkrayError(
            f"holds choices only for models this project does not configure ({', '.join(named[:3])}"
            f"{' ...' if len(named) > 3 else ''}): it was written for another project",
            path=str(plan_file or config.plan_file),
            hint="delete it, or point --plan (the `plan` key) at this project's own plan file, then run "
                 "`hatch-shrinkray check --fix -- COMMAND` again")


def _installed_root(patterns: Sequence[str]) -> tuple[Path, list[str]] | None:
    """For MODEL files of an installed package (all under one ``site-packages`` or ``dist-packages``):
    that directory and their paths in it, which are their paths inside the wheel; else None."""
    files, unmatched = _expand(patterns)
    if unmatched or not files:
        return None
    roots = set()
    relpaths = []
    for f in files:
        absolute = f.absolute()
        base = next((p for p in absolute.parents if p.name in ("site-packages", "dist-packages")), None)
        if base is None or not f.is_file():
            return None
        roots.add(base)
        relpaths.append(absolute.relative_to(base).as_posix())
    return (roots.pop(), relpaths) if len(roots) == 1 else None


def _inside(pattern: str, project: Path) -> str | None:
    """``pattern`` (a MODEL argument) relative to ``project``, or None when it lies outside
    (``../env/...`` included: normalized first)."""
    absolute = Path(os.path.abspath(pattern))
    try:
        return absolute.relative_to(project).as_posix()
    except ValueError:
        return None


def _write_plan(path: Path | None, entries: dict[str, Any], project: bool, *, judged: set[str] | None = None,
                old: dict[str, Any] | None = None) -> str:
    """Merge ``entries`` into the plan file: other models' plans stay, plans for other bytes of the
    searched models (``judged``: of the models ``--fix`` judged) go."""
    from hatch_shrinkray.shipping.plan import read_plan, write_plan

    if path is None:
        return "not written: the configuration says `plan = false` (set `plan` to a file name to keep it)"
    if old is None:
        old = read_plan(path) if path.is_file() else {}
    searched = judged if judged is not None else {e.model for e in entries.values()}
    kept = {sha: e for sha, e in old.items() if e.model not in searched}
    try:
        write_plan(path, {**kept, **entries})
    except OSError as exc:
        raise ShrinkrayError(f"cannot write the plan: {exc.strerror or exc}", path=str(path)) from exc
    ships = ("every build of this project (the hook, `hatch-shrinkray wheel`) ships it" if project
             else f"`hatch-shrinkray shrink MODEL --plan {path}` ships it")
    if not entries:
        return f"wrote {path}: no model needs a remedy now (the earlier ones for these models are gone); commit it"
    return f"wrote the plan for {len(entries)} model(s) into {path}: {ships}; commit it"


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``check``'s own arguments and the COMMAND after its ``--`` (argparse would let MODEL... swallow it)."""
    head = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if head is None or argv[head] != "check" or "--" not in argv[head:]:
        return argv, None
    cut = argv.index("--", head)
    return argv[:cut], argv[cut + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    own, command = _split_command(list(sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(own)
    if command is not None:
        args.argv = command
    hints.speak_to(args.command)
    if args.command in ("shrink", "wheel", "check"):
        hints.set_invocation(_as_check_args(args), args.argv if args.command == "check" else (),
                             [str(m) for m in getattr(args, "models", None) or ()])
    commands = {"shrink": cmd_shrink, "info": cmd_info, "compare": cmd_compare, "wheel": cmd_wheel,
                "record": cmd_record, "check": cmd_check}
    try:
        with terminate_raises(), progress.reporting(progress.for_stream(sys.stderr, quiet=args.quiet)):
            return commands[args.command](args)
    except BrokenPipeError:
        # The reader went away (`hatch-shrinkray info m.onnx | head`): no traceback, and nothing more
        # to stdout, whose pending writes would fail again at exit (the recipe in Python's signal docs).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BaseException as exc:
        stop = stop_request(exc)  # Ctrl-C, SIGTERM, or either surfacing as another error (during `import onnxruntime`)
        if stop is not None:
            return _stopped(stop)
        if isinstance(exc, ShrinkrayError):
            _error(exc, args.verbose, _names(args))
            return 1
        if isinstance(exc, MemoryError):
            _error(ShrinkrayError("out of memory", hint="the engine needs about 2.5 times a model's size in memory; "
                                                         "free some or shrink on a larger machine"), args.verbose)
            return 1
        missing = engine_missing(exc) if isinstance(exc, ModuleNotFoundError) else None
        if missing is None:
            raise
        _error(missing, args.verbose)
        return 1


def _stopped(stop: BaseException) -> int:
    """Ctrl-C: one line and 130. SIGTERM: one line, then death by the signal itself (143 in a shell),
    as callers expect."""
    if isinstance(stop, Terminated):
        print("terminated", file=sys.stderr)
        redeliver(stop.signum)
        return 128 + stop.signum
    print("interrupted", file=sys.stderr)
    return 130


if __name__ == "__main__":
    sys.exit(main())
