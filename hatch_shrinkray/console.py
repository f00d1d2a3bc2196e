"""The ``hatch-shrinkray`` console script: signals handled before the command line is even imported.

Importing the commands takes a noticeable share of a short run (argparse, every command's module,
the option table), and a Ctrl-C or SIGTERM that landed meanwhile ended the process Python's way: a
``KeyboardInterrupt`` traceback and death by SIGINT, or death by SIGTERM without a word. Here the
import runs under the same handling as the commands, so a stop request ends every run alike: one
line, then 130, or death by SIGTERM. Only the standard library and ``signals`` are imported first.
"""

from __future__ import annotations

from collections.abc import Sequence

from hatch_shrinkray.signals import stop_request, stopped, terminate_raises


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with terminate_raises():
            from hatch_shrinkray.cli import main as command_line
    except BaseException as exc:
        stop = stop_request(exc)
        if stop is None:
            raise
        return stopped(stop)
    return command_line(argv)
