"""The one exception type users see, so the CLI and the hook can print it without a traceback."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping


def one_line(exc: BaseException, limit: int = 400) -> str:
    """A library's exception message on one line (onnx and onnxruntime spread theirs over several,
    with the useful part, e.g. the node, after the first newline)."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``word`` most likely misspells (a key, a flag, a command, a
    value), or None when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def quoted(text: str | bytes, limit: int = 60) -> str:
    """``text`` quoted for a message, cut short: a hostile name or path can be megabytes long."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 3]) + f"... ({len(text)} characters)"


def printable(text: str) -> str:
    """``text`` with every control, format or unassigned character escaped (``\\x1b``): what a file
    we did not write says is printed as data, never as a terminal escape sequence or a fake line."""
    return text if text.isprintable() else "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ShrinkrayError(Exception):
    """A problem with the user's input, configuration or environment, worded for the user.

    ``path`` names the file concerned (if any) and ``hint`` says what to do about it.
    """

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class Malformed(ShrinkrayError):
    """A file that does not read as what we write: each problem (``codec.Invalid``) a line naming the file."""

    def __str__(self) -> str:
        return "\n".join(f"{self.path}: {p}" for p in self.message.splitlines()) + (f" ({self.hint})" * bool(self.hint))


class OptionError(ShrinkrayError):
    """An option value this model cannot take (generated inputs too large to allocate). The
    message names options as ``<<samples>>`` or ``<<dims:batch>>``; :meth:`name_options` spells
    them the way the user wrote them (a full TOML key or a flag), else they read ``samples``,
    ``dims.batch``."""

    def __init__(self, template: str, *, path: str | None = None, hint: str | None = None) -> None:
        self.template = template
        self.named = False
        super().__init__(_spelled(template, {}), path=path, hint=hint)

    def name_options(self, names: Mapping[str, str]) -> None:
        """Spell the options with ``names`` (field name -> ``tool.hatch...samples`` or ``--samples``)."""
        self.message = _spelled(self.template, names)
        self.args = (self.message,)
        self.named = True


def _spelled(template: str, names: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        field, sub = match.group(1), match.group(2)
        name = names.get(field, field.replace("_", "-"))
        if sub is None:
            return f"`{name}`"
        return f"`{name} {sub}=N`" if name.startswith("--") else f"`{name}.{sub}`"

    return re.sub(r"<<([a-z_]+)(?::([^>]*))?>>", one, template)


class PlanError(ShrinkrayError):
    """A per-tensor plan that does not fit the model it is keyed to (a tensor it names is not
    there). The message says "the plan"; callers that know the plan file name it."""

    def name_plan(self, plan_file: str) -> None:
        self.message = self.message.replace("the plan", f"the plan in {plan_file}", 1)
        self.args = (self.message,)


class AlreadyQuantizedError(ShrinkrayError):
    """The input already carries quantized weights; shrinking it again would compound the error."""


class VerificationError(ShrinkrayError):
    """The shrunk model's outputs are too far from the original's; carries the full comparison and
    ``why`` in a few words (the limit it broke, for the line of a model that falls back)."""

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None,
                 table: str = "", why: str = "") -> None:
        super().__init__(message, path=path, hint=hint)
        self.table = table
        self.why = why or message

    def __str__(self) -> str:
        """The failure on its first line, the comparison's table below, and what to do last: each line
        short enough to read in a build log."""
        head = f"{self.path}: {self.message}" if self.path else self.message
        hint = [f"what to do: {self.hint}"] if self.hint else []
        return "\n".join([head, *([self.table] if self.table else []), *hint])

