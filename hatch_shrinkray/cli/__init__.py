"""``hatch-shrinkray`` / ``python -m hatch_shrinkray``: info, shrink, compare, wheel, bundle, record, check.

One module per command (its arguments and what it does), over :mod:`.flags` (the engine options'
flags, made from the option table) and :mod:`.output` (what every command prints the same way).
Every user mistake ends in one line on stderr and a non-zero exit; ``-v`` adds tracebacks.
Ctrl-C and SIGTERM leave nothing behind and end the process the conventional way (130, or by the
signal).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hatch_shrinkray import hints, progress
from hatch_shrinkray.cli import bundle, check, compare, info, record, shrink, wheel
from hatch_shrinkray.cli.flags import as_check_args, names_of
from hatch_shrinkray.cli.output import print_error
from hatch_shrinkray.cli.parser import parse, parser
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.requirements import engine_missing
from hatch_shrinkray.signals import stop_request, stopped, terminate_raises

__all__ = ["main", "parser"]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "shrink": shrink.run, "info": info.run, "compare": compare.run, "wheel": wheel.run, "record": record.run,
    "check": check.run, "bundle": bundle.run}
"""What each command runs, by name."""


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``check``'s own arguments and the COMMAND after its ``--`` (argparse would let MODEL... swallow it)."""
    head = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if head is None or argv[head] not in ("check", "bundle") or "--" not in argv[head:]:
        return argv, None
    cut = argv.index("--", head)
    return argv[:cut], argv[cut + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    try:
        with terminate_raises():  # from the parser on (building it takes a moment): one stop handling
            args = parse(*_split_command(list(sys.argv[1:] if argv is None else argv)))
            with hints.speaking(_invocation(args)), \
                    progress.reporting(progress.for_stream(sys.stderr, quiet=args.quiet)):
                return COMMANDS[args.command](args)
    except BrokenPipeError:
        if args is None:
            raise
        # The reader went away (`hatch-shrinkray info m.onnx | head`): no traceback, and nothing more
        # to stdout, whose pending writes would fail again at exit (the recipe in Python's signal docs).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BaseException as exc:
        stop = stop_request(exc)  # Ctrl-C, SIGTERM, or either surfacing as another error (during `import onnxruntime`)
        if stop is not None:
            return stopped(stop)
        if args is None:  # argparse's own exit (a usage error, --help) and anything else while parsing
            raise
        if isinstance(exc, ShrinkrayError):
            print_error(exc, args.verbose, names_of(args))
            return 1
        if isinstance(exc, MemoryError):
            print_error(ShrinkrayError("out of memory", hint="the engine needs about 2.5 times a model's size in "
                                                             "memory; free some or shrink on a larger machine"),
                        args.verbose)
            return 1
        missing = engine_missing(exc) if isinstance(exc, ModuleNotFoundError) else None
        if missing is None:
            raise
        print_error(missing, args.verbose)
        return 1


def _invocation(args: argparse.Namespace) -> hints.Invocation:
    """Who hints speak to: the command and the project it works in, and for those that can suggest
    a ``check`` what it was given."""
    where = Path(getattr(args, "project", None) or ".").resolve()
    root = where if (where / "pyproject.toml").is_file() else None
    if args.command not in ("shrink", "wheel", "check"):
        return hints.Invocation(args.command, root=root)
    return hints.Invocation(args.command, tuple(as_check_args(args)),
                            tuple(args.argv) if args.command == "check" else (),
                            tuple(str(m) for m in getattr(args, "models", None) or ()), root=root)
