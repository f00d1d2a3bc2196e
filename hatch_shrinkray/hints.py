"""Hints in the words of the interface the user is in: a key of the hook's table during a build
(``inputs = "DIR"``), a flag on the command line (``--inputs DIR``), the project's own test command
and paths relative to it where the tool knows them (``tests/shrinkray-inputs``, not ``DIR``).

A hint is only useful where it can be followed: a build user has a pyproject table and no flags, a
``shrink`` user may have flags and no table, and ``check`` in a configured project fixes the table
(its docs promise config lines). The CLI runs each command inside :func:`speaking`, with what it was
given (an :class:`Invocation`); the hook speaks with its project's root; everything else asks
:func:`setting` to spell a key, so one message reads right in each. The invocation lives in a
context variable set for the command's duration only: a library caller in the same process (a
test, a build after a CLI call) gets the hook's words, and the engine's worker threads
(:mod:`hatch_shrinkray.pool`) see their caller's.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from hatch_shrinkray.option_table import OPTIONS

HOOK = "hook"
"""The interface of a build: the hook's table in pyproject.toml."""

FLAGS: dict[str, str] = {o.key: o.flags[0] for o in OPTIONS if o.flags}
"""Configuration key -> the flag that sets it on ``shrink``, ``wheel`` and ``check`` (repeatable
flags take one item each; ``--no-dedup`` and ``--no-verify`` set their key to false)."""

TESTS = ("python", "-m", "pytest")
"""The test command a hint suggests when the user has not given one."""

SITE = "SITE-PACKAGES/"
"""Where an installed package's files are, in a hint that names them (a placeholder)."""
RECORDING = "tests/shrinkray-inputs"
"""Where a project with a ``tests`` directory records its inputs: beside its tests, which are what
it runs."""
TEST_COMMAND = "python -m pytest tests"


@dataclass(frozen=True)
class Invocation:
    """Who is speaking and what they gave: the ``interface`` (:data:`HOOK` or a command's name), and
    for ``shrink``, ``wheel`` and ``check`` the flags (``args``, as ``check`` would take them), the
    test command (``command``) and the ``models`` (files or globs), so hints quote the user's own
    command. A build has none of them."""

    interface: str = HOOK
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    root: Path | None = None
    """The project the user works in, when known: hints name its test command and paths relative
    to it."""
    table: bool = False
    """A command whose models a project's table configures, where its fixes go (``check``): settings
    are spelled as the table's keys."""

    def installed(self) -> Invocation:
        """The models are paths inside a wheel that no project table maps to files (``wheel --models``
        alone): ``check`` finds them only where the wheel is installed, so hints name them there
        (:data:`SITE`)."""
        return replace(self, models=tuple(m if m.startswith(SITE) else SITE + m for m in self.models))


_current: ContextVar[Invocation] = ContextVar("shrinkray_hints", default=Invocation())  # noqa: B039 (frozen)


@contextlib.contextmanager
def speaking(invocation: Invocation) -> Iterator[Invocation]:
    """Hints in this context are for ``invocation``; the words before it come back on leaving."""
    token = _current.set(invocation)
    try:
        yield invocation
    finally:
        _current.reset(token)


def current() -> Invocation:
    """The invocation hints speak to here (the hook's, outside :func:`speaking`)."""
    return _current.get()


def configured_by_table() -> None:
    """For the rest of the enclosing :func:`speaking`, the models are the project's, configured by
    its table: settings are spelled as its keys (:attr:`Invocation.table`)."""
    _current.set(replace(_current.get(), table=True))


@dataclass(frozen=True)
class Blank:
    """A value the user fills in (``N``), printed as it is: no quotes in TOML or on a command line."""

    name: str


Value = str | int | float | bool | Blank | Sequence[str] | Sequence[int] | Mapping[str, "str | Blank"]


def interface() -> str:
    """:data:`HOOK` or the running command's name."""
    return _current.get().interface


def _as_flag(key: str) -> bool:
    return interface() != HOOK and not _current.get().table and key in FLAGS


def setting(key: str, value: Value) -> str:
    """How to set ``key`` to ``value`` where the user is: ```inputs = "DIR"``` in the table or
    ```--inputs DIR``` on the command line (backquoted, ready to paste)."""
    return f"`{_flags(key, value)}`" if _as_flag(key) else f"`{key} = {_toml(value)}`"


def set_it(key: str, value: Value) -> str:
    """:func:`setting` with its verb: ``set `inputs = "DIR"``` or ``pass `--inputs DIR```."""
    return f"{'pass' if _as_flag(key) else 'set'} {setting(key, value)}"


def key(name: str) -> str:
    """The name of a setting where the user is: ``exclude-tensors`` or ``--exclude-tensors``."""
    return FLAGS[name] if _as_flag(name) else name


def _flags(key: str, value: Value) -> str:
    flag = FLAGS[key]
    if key == "int-range" and isinstance(value, (list, tuple)):
        return f"{flag} {' '.join(map(str, value))}"
    if isinstance(value, bool):
        return flag  # --no-dedup, --no-verify: the only booleans with flags, both setting false
    if isinstance(value, Mapping):
        return " ".join(f"{flag} {_word(f'{k}={_plain(v)}')}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " ".join(f"{flag} {_word(str(v))}" for v in value)
    return f"{flag} {_plain(value) if isinstance(value, Blank) else _word(str(value))}"


def _plain(value: object) -> str:
    return value.name if isinstance(value, Blank) else str(value)


def _word(text: str) -> str:
    return text if re.fullmatch(r"[A-Z]+|[A-Za-z0-9_./=*:+-]+", text) and "*" not in text else shlex.quote(text)


def _toml(value: Value) -> str:
    if isinstance(value, Blank):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else json.dumps(k)} = {_toml(v)}"
                          for k, v in value.items())
        return "{" + items + "}"
    return "[" + ", ".join(str(v) if isinstance(v, int) else json.dumps(str(v)) for v in value) + "]"


LINE_LIMIT = 160
"""The most characters a line the tool prints takes, a path counted as at most :data:`PATH_ROOM`."""
PATH_ROOM = 40
PATHS = re.compile(r"\S*/\S*")
"""A token with a slash: a path, a glob or a command quoting one."""


def counted(text: str) -> int:
    """``text``'s length as the line budget counts it: every path as at most :data:`PATH_ROOM`
    characters (it is the user's own, printed whole), the punctuation after it as itself."""
    def shown(m: re.Match[str]) -> str:
        token = m.group(0)
        path = token.rstrip(":;,.)`'\"")
        return path[:PATH_ROOM] + token[len(path):]

    return len(PATHS.sub(shown, text))


def listed(items: Sequence[str], room: int) -> str:
    """``items`` joined with commas while they fit in ``room`` (:func:`counted`), then how many more."""
    shown: list[str] = []
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        more = f", and {rest} more" if rest else ""
        if shown and counted(", ".join([*shown, item]) + more) > room:
            return ", ".join(shown) + f", and {len(items) - len(shown)} more"
        shown.append(item)
    return ", ".join(shown)


def default_recording(root: Path) -> str:
    """Where a project at ``root`` records its inputs unless it says otherwise."""
    return RECORDING if (root / "tests").is_dir() else "shrinkray-inputs"


def record_command(root: Path | None, output: str) -> str:
    """``hatch-shrinkray record -o OUTPUT -- python -m pytest tests``: with the command the user gave
    (``check``'s), else the tests of a project with a ``tests`` directory at ``root``, else
    ``COMMAND`` (the command that runs its code). ``-o``: the line that quotes it stays short."""
    given = _current.get().command
    command = shlex.join(given) if given else TEST_COMMAND if root is not None and (root / "tests").is_dir() \
        else "COMMAND"
    return f"hatch-shrinkray record -o {output} -- {command}"


def record_hint(output: str | None = None) -> str:
    """What to do when verification had only generated inputs: the ``record`` command (into
    ``output``, else where the project records) in the project's own words where it is known, and
    the setting that takes its recording, named but not repeated (a line stays short)."""
    root = _current.get().root
    output = output or (default_recording(root) if root is not None else "DIR")
    take = "pass it as `--inputs`" if _as_flag("inputs") else "set `inputs` to it"
    return f"record real inputs: `{record_command(root, output)}`, then {take}"


def in_project(path: str | Path | None) -> str:
    """``path`` as the project's settings name it (relative to its root when inside it), else as given."""
    return "the recording" if path is None else relative(Path(path), _current.get().root)


def relative(path: Path, root: Path | None) -> str:
    """``path`` as a setting names it: relative to ``root`` (POSIX) when inside it, else as given."""
    if root is not None and Path(path).is_relative_to(root):
        return PurePosixPath(Path(path).relative_to(root)).as_posix()
    return str(path)


def installed_models() -> None:
    """For the rest of the enclosing :func:`speaking`, the models given are paths inside a wheel
    that no project table maps to files (:meth:`Invocation.installed`)."""
    _current.set(_current.get().installed())


def check_hint(command: str | None = None, *, fix: bool = False) -> str:
    """The command that finds the smallest model a package's own tests accept (``fix``: the one that
    chooses a remedy per model and writes it where the build reads it): with the models and flags
    the user gave, and their test command (``command``: the one a plan recorded) when known.
    After ``wheel`` the models are files inside the wheel, which ``check`` finds only through the
    project's table (its MODEL arguments are files, or paths its table's models match): the hint
    then names no model and runs in the project."""
    invocation = _current.get()
    test = command or shlex.join(invocation.command or TESTS)
    args = shlex.join((*invocation.models, *invocation.args))
    return f"hatch-shrinkray check {'--fix' if fix else '--search'} {args + ' ' if args else ''}-- {test}"
