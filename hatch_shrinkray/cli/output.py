"""What every command prints the same way: errors, the build's report lines, the JSON report."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

from hatch_shrinkray.cli.flags import FLAG_NAMES
from hatch_shrinkray.errors import Malformed, OptionError, ShrinkrayError, VerificationError
from hatch_shrinkray.files import write_atomically
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.config import ConfigurationError
from hatch_shrinkray.shipping.display import printable_lines
from hatch_shrinkray.sizes import BROTLI_HINT, brotli_problem


def print_error(exc: ShrinkrayError, verbose: bool, names: Mapping[str, str] = FLAG_NAMES) -> None:
    if isinstance(exc, OptionError) and not exc.named:
        exc.name_options(names)  # options given as flags (a project's are named by shipping first)
    if verbose:
        traceback.print_exception(exc)
    text = printable_lines(str(exc))
    if isinstance(exc, (VerificationError, ConfigurationError, Malformed)):
        print(f"error: {text}", file=sys.stderr)
    else:
        print(f"error: {text.splitlines()[0]}", file=sys.stderr)


def need_brotli(options: ShrinkOptions, sizes: bool) -> None:
    """One line, before any model, when brotli quality 11 must be measured and cannot be."""
    problem = brotli_problem()
    if problem and (options.target == "web" or sizes):
        what = "--target web counts" if options.target == "web" else "--sizes measures"
        raise ShrinkrayError(f"{what} brotli quality 11 bytes, and {problem}", hint=BROTLI_HINT)


def write_report(path: Path, text: str, verbose: bool) -> bool:
    """Print (``-``) or write the JSON report atomically; a failure is one error line."""
    if str(path) == "-":
        print(text)
        return True
    try:
        write_atomically(path, (text + "\n").encode())
    except OSError as exc:
        print_error(ShrinkrayError(f"cannot write the report: {exc.strerror or exc}", path=str(path),
                              hint="free some space or choose another --json path"), verbose)
        return False
    return True


class Stderr:
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
