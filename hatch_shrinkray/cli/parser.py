"""The command line's parser: each command adds its own arguments (``add_parser`` in its module)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import cast

from hatch_shrinkray import progress
from hatch_shrinkray.cli.bundle import add_parser as add_bundle
from hatch_shrinkray.cli.check import add_parser as add_check
from hatch_shrinkray.cli.compare import add_parser as add_compare
from hatch_shrinkray.cli.info import add_parser as add_info
from hatch_shrinkray.cli.record import add_parser as add_record
from hatch_shrinkray.cli.shrink import add_parser as add_shrink
from hatch_shrinkray.cli.usage import Parser, finish
from hatch_shrinkray.cli.wheel import add_parser as add_wheel
from hatch_shrinkray.errors import did_you_mean

QUIET_HELP = ("no progress and no informational lines; warnings, errors and results remain (progress: on a "
              f"terminal a live display, on a pipe a line at least every 30 s, {progress.INTERVAL_ENV} seconds)")
VERBOSE_HELP = "show tracebacks and the details: per-tensor encodings, verification figures and tables"


def parser() -> Parser:
    from hatch_shrinkray import __version__

    p = Parser(
        prog="hatch-shrinkray",
        description="Shrink ONNX models (weights-only quantization), verified with onnxruntime.")
    p.add_argument("--version", action="version", version=f"hatch-shrinkray {__version__}")
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               p.add_subparsers(dest="command", required=True))
    for add in (add_info, add_shrink, add_wheel, add_bundle, add_compare, add_record, add_check):
        add(sub)
    finish(p, verbose_help=VERBOSE_HELP, quiet_help=QUIET_HELP, top=True)
    for each in _commands(p).values():
        finish(each, verbose_help=VERBOSE_HELP, quiet_help=QUIET_HELP)
    sub.metavar = "COMMAND"  # the commands are listed under it
    return p


def _commands(p: argparse.ArgumentParser) -> dict[str, Parser]:
    return cast("dict[str, Parser]", next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices)


def parse(argv: Sequence[str], command: list[str] | None = None) -> argparse.Namespace:
    """The command line ``argv`` parsed (``command``: ``check``'s COMMAND, split off after its
    ``--``), or one line naming the slip and exit 1: an unknown command or flag with the closest
    one, a COMMAND without its ``--``, argparse's message otherwise."""
    top = parser()
    commands = _commands(top)
    name = next((a for a in argv if not a.startswith("-")), None)
    if name is not None and name not in commands:
        close = did_you_mean(name, commands)
        top.error(f"no command `{name}`" + (f"; did you mean `{close}`?" if close else
                                           f" (the commands: {', '.join(commands)})"))
    if command is not None and name is not None:  # its COMMAND came after a `--`: no slip to name
        commands[name].takes_command = False
    args, extras = top.parse_known_args(argv)
    own = commands[args.command]
    if extras:  # argparse would blame the command line as a whole, and name no fix
        own.error(f"unrecognized arguments: {' '.join(extras)}")
    if command is not None:
        args.argv = command
    own.check_given(args)
    return args
