"""How shipping talks to the user: through a display (hatchling's ``self.app``, or the wheel
rewriter's stand-in), every line prefixed ``shrinkray:`` and made printable, and a work directory
it cannot write to said in one line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from hatch_shrinkray.errors import ShrinkrayError, printable

PREFIX = "shrinkray:"


class Display(Protocol):
    """The part of hatchling's ``self.app`` that shipping talks through (plain text, stderr); the
    wheel rewriter provides the same five methods."""

    def display_info(self, message: str = "") -> None: ...
    def display_waiting(self, message: str = "") -> None: ...
    def display_success(self, message: str = "") -> None: ...
    def display_warning(self, message: str = "") -> None: ...
    def display_debug(self, message: str = "", level: int = 1) -> None: ...


class Sanitized:
    """A display that prints every line as data: names and figures can come from files we did not
    write (a model's tensor names, a plan, a cache record), and a control character in them must not
    move the cursor, colour the log or fake a line (:func:`errors.printable`)."""

    def __init__(self, app: Display) -> None:
        self.app = app

    def display_info(self, message: str = "") -> None:
        self.app.display_info(printable_lines(message))

    def display_waiting(self, message: str = "") -> None:
        self.app.display_waiting(printable_lines(message))

    def display_success(self, message: str = "") -> None:
        self.app.display_success(printable_lines(message))

    def display_warning(self, message: str = "") -> None:
        self.app.display_warning(printable_lines(message))

    def display_debug(self, message: str = "", level: int = 1) -> None:
        self.app.display_debug(printable_lines(message), level)


def printable_lines(text: str) -> str:
    """``text`` with each of its lines made printable (tables keep their line breaks)."""
    return "\n".join(printable(line) for line in text.split("\n"))


@contextlib.contextmanager
def writing_to(workdir: Path) -> Iterator[None]:
    """A full or unwritable work directory (TMPDIR) is a one-line error, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise ShrinkrayError(f"cannot write to the temporary directory {workdir}: {exc.strerror or exc}",
                             hint="free some space there or point TMPDIR elsewhere") from exc
