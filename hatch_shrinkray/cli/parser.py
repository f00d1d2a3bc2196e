"""The command line's parser: each command adds its own arguments (``add_parser`` in its module)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, cast

from hatch_shrinkray import progress
from hatch_shrinkray.cli.bundle import add_parser as add_bundle
from hatch_shrinkray.cli.check import add_parser as add_check
from hatch_shrinkray.cli.compare import add_parser as add_compare
from hatch_shrinkray.cli.info import add_parser as add_info
from hatch_shrinkray.cli.record import add_parser as add_record
from hatch_shrinkray.cli.shrink import add_parser as add_shrink
from hatch_shrinkray.cli.wheel import add_parser as add_wheel

QUIET_HELP = ("no progress (on a terminal a live display; on a pipe a line at least every 30 s, "
              f"{progress.INTERVAL_ENV} seconds) and no informational lines; warnings, errors and results remain")
VERBOSE_HELP = "show tracebacks and the details: per-tensor encodings, verification figures and tables"


class _Parser(argparse.ArgumentParser):
    """A usage error is a user mistake like any other: one line, ``error: ...``, and exit 1 (argparse
    prints its usage block and exits 2); the line names the help that shows the usage."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(1)


def parser() -> argparse.ArgumentParser:
    from hatch_shrinkray import __version__

    p = _Parser(
        prog="hatch-shrinkray",
        description="Shrink ONNX models (weights-only quantization), verified with onnxruntime.")
    p.add_argument("--version", action="version", version=f"hatch-shrinkray {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    # Each command's parser is a _Parser too (argparse makes them of the parent's class).
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               p.add_subparsers(dest="command", required=True))
    for add in (add_info, add_shrink, add_wheel, add_bundle, add_compare, add_record, add_check):
        add(sub)
    for each in sub.choices.values():  # before or after the command's name
        each.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        each.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p
