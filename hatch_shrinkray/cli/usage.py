"""How the command line explains itself: ``-h`` (a command's common flags, one screen), ``--help``
(every flag under its heading, as uv does), and one line for a usage slip that names the fix: a
command to run given without its ``--``, a mistyped command or flag ("did you mean").

A usage error is a user mistake like any other: one line, ``error: ...``, exit 1 (argparse prints
its usage block and exits 2), ending with the help of the command it concerns.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, cast

from hatch_shrinkray.errors import did_you_mean

GLOBAL = "global options"
"""The heading of ``-h``, ``--help``, ``-v`` and ``-q``, last in every command's ``--help``."""
MESSAGE_WIDTH = 110
FIX_WIDTH = 50
"""The most of the user's arguments a fix quotes: its line stays within 160 characters."""
GLOBAL_FLAGS = frozenset({"-h", "--help", "-v", "--verbose", "-q", "--quiet"})
COMMON = "common options"
BRIEF_CUTS = ("; ", " (")
"""Where ``-h`` cuts a flag's help: its first clause is the summary (``--help`` has the rest)."""
NEGATIVE_NUMBER = re.compile(r"-\d+(\.\d*)?([eE][-+]?\d+)?|-inf|-nan")
COMMANDS_RUN = frozenset({"python", "python3", "pytest", "tox", "nox", "make", "uv", "hatch", "sh", "bash"})
"""Words that start a command even where no such executable is on ``PATH`` (a test environment)."""


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line usage errors that name the fix, and two helps: ``-h`` the
    common flags (:meth:`common`), ``--help`` all of them under their headings (:meth:`heading`).
    Each command's parser is one too (argparse makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["add_help"] = False  # -h and --help are two helps, added by finish()
        super().__init__(*args, **kwargs)
        self._positionals.title = "arguments"
        self._common: list[argparse.Action] = []
        self._headings: dict[str, argparse._ArgumentGroup] = {}
        self._given: list[str] = []
        self.summary = ""
        """What the command does, in one line (``-h`` shows it; ``--help`` the description)."""
        self.takes_command = False
        """A COMMAND to run follows ``--`` (``check``, ``record``): a slip that leaves out the ``--``
        is named."""

    def common(self, *actions: argparse.Action) -> None:
        """These flags are among the few ``-h`` shows."""
        self._common.extend(actions)

    def heading(self, title: str) -> argparse._ArgumentGroup:
        """The group of flags listed under ``title`` in ``--help`` (made on first use)."""
        if title not in self._headings:
            self._headings[title] = self.add_argument_group(title)
        return self._headings[title]

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._given, namespace)

    def error(self, message: str) -> NoReturn:
        """One line: the slip behind ``message`` where one is recognised (an unknown flag, a command
        without its ``--``), else argparse's message; then the help to read."""
        said = self.slip() or message
        if len(said) > MESSAGE_WIDTH:  # argparse quotes what it did not take, however long
            said = said[:MESSAGE_WIDTH - 3] + "..."
        print(f"error: {said} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(1)

    def slip(self) -> str | None:
        """The slip in the arguments this parser was given, worded with its fix (None: none seen)."""
        return self._command_without_dashes() or self._unknown_flag()

    def _unknown_flag(self) -> str | None:
        for token in _before_dashes(self._given):
            flag = token.split("=", 1)[0]
            if token == "-" or not token.startswith("-") or NEGATIVE_NUMBER.fullmatch(token) or self._knows(flag):
                continue
            close = did_you_mean(flag, [s for s in self._option_string_actions if s.startswith("--")])
            return f"`{self.prog}` has no flag `{flag}`" + (f"; did you mean `{close}`?" if close else "")
        return None

    def _knows(self, flag: str) -> bool:
        """A flag of this parser, or an unambiguous abbreviation of one (argparse takes those)."""
        return flag in self._option_string_actions or (
            flag.startswith("--") and len([s for s in self._option_string_actions if s.startswith(flag)]) == 1)

    def _command_without_dashes(self) -> str | None:
        """A command to run given among this command's own arguments (``check python -m pytest``):
        where it starts, and the line with the ``--`` in place."""
        if not self.takes_command or "--" in self._given:
            return None
        own, command = self._split_at_command()
        if not command:
            return None
        fixed = shlex.join([*own, "--", *command])
        for cut in range(len(command), 0, -1):  # a long line names the options and the command's start
            if len(fixed) <= FIX_WIDTH:
                break
            fixed = f"[options] -- {shlex.join(command[:cut])} ..."
        return f"the command to run goes after `--`: `{self.prog} {fixed}`"

    def _split_at_command(self) -> tuple[list[str], list[str]]:
        """This command's own arguments and the command to run, where a positional argument names a
        program rather than a model (not a path that exists, no glob, no ``.onnx``; a program on
        ``PATH`` or a usual one). This command's flags given after it are its own (``record pytest
        -o DIR``), except the global ones, which a test command takes too (``pytest -q``)."""
        own: list[str] = []
        command: list[str] = []
        tokens = iter(self._given)
        for token in tokens:
            action = self._option_string_actions.get(token)
            if action is not None and not (command and token in GLOBAL_FLAGS):
                own += [token, *(next(tokens, "") for _ in range(_values_taken(action)))]
            elif command or (not token.startswith("-") and _a_program(token)):
                command.append(token)
            else:
                own.append(token)
        return own, command

    def check_given(self, args: argparse.Namespace) -> None:
        """After a parse that argparse accepted: a COMMAND given without its ``--`` that every
        argument took as this command's own (``check pytest``) is still a slip."""
        if self.takes_command and not getattr(args, "argv", None):
            slip = self._command_without_dashes()
            if slip is not None:
                self.error(slip)

    def format_usage(self) -> str:
        self._compact_usage()
        return super().format_usage()

    def format_help(self) -> str:
        self._compact_usage()
        return super().format_help()

    def _compact_usage(self) -> None:
        """``hatch-shrinkray shrink [options] MODEL... -o OUTPUT``: the arguments a call needs, the
        rest as ``[options]`` (argparse lists every flag, 15 lines for ``shrink``)."""
        if self.usage is not None:
            return
        parts = [self.prog, "[options]"]
        for action in self._actions:
            if not action.option_strings:
                if not isinstance(action, argparse._SubParsersAction):
                    name = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
                    parts.append({"+": f"{name}...", "*": f"[{name}...]"}.get(str(action.nargs), name))
                else:
                    parts.append("COMMAND ...")
            elif action.required:
                parts.append(f"{action.option_strings[0]} {_metavar(action)}")
        self.usage = " ".join(parts)

    def format_brief(self) -> str:
        """``-h``: the usage, the first sentence of the description, the common flags with the first
        clause of their help, and where the rest are."""
        self._compact_usage()
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        if self.summary:
            formatter.add_text(self.summary[:1].upper() + self.summary[1:] + ".")
        positionals = [a for a in self._actions if not a.option_strings]
        shown = list(dict.fromkeys([*positionals, *self._common, *self._headings[GLOBAL]._group_actions]))
        formatter.start_section(COMMON)
        formatter.add_arguments([_brief(a) for a in shown if a.help != argparse.SUPPRESS])
        formatter.end_section()
        more = len([a for a in self._actions if a not in shown and a.help != argparse.SUPPRESS])
        if more:
            headings = f" ({', '.join(h for h in self._headings if h != GLOBAL)})" if len(self._headings) > 1 else ""
            formatter.add_text(f"{more} more option{'s' if more != 1 else ''}{headings}: `{self.prog} --help`")
        return formatter.format_help()


def _brief(action: argparse.Action) -> argparse.Action:
    """``action`` with its help cut to the first clause (a copy: ``--help`` keeps the whole)."""
    brief = copy.copy(action)
    text = action.help or ""
    cuts = [i for i in (text.find(c) for c in BRIEF_CUTS) if i > 0]
    brief.help = text[:min(cuts)] if cuts else text
    return brief


def _a_program(token: str) -> bool:
    """``token`` names a program to run rather than a model (a path that exists, a glob, a .onnx)."""
    return not (os.path.exists(token) or any(c in token for c in "*?[") or token.endswith(".onnx")) and (
        token in COMMANDS_RUN or shutil.which(token) is not None)


def _metavar(action: argparse.Action) -> str:
    metavar = action.metavar
    return " ".join(metavar) if isinstance(metavar, tuple) else metavar or action.dest.upper()


def _values_taken(action: argparse.Action) -> int:
    nargs = action.nargs
    if nargs is None:
        return 1
    return nargs if isinstance(nargs, int) else 0


def _before_dashes(tokens: Sequence[str]) -> Sequence[str]:
    return tokens[:tokens.index("--")] if "--" in tokens else tokens


class _Help(argparse.Action):
    """``-h`` or ``--help``: print it and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, *, full: bool,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, help=help)
        self.full = full

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        target = cast("Parser", parser)
        print(target.format_help() if self.full or not target._common else target.format_brief(), end="")
        parser.exit()


def finish(parser: Parser, *, verbose_help: str, quiet_help: str, top: bool = False) -> None:
    """Add the options every command (and the command line itself) takes, under :data:`GLOBAL`."""
    group = parser.heading(GLOBAL)
    group.add_argument("-h", action=_Help, full=False, help="the common options; --help: all of them")
    group.add_argument("--help", action=_Help, full=True, help="every option, under headings")
    # before or after the command's name: a command's own leaves the command line's value alone
    default: Any = False if top else argparse.SUPPRESS
    group.add_argument("-v", "--verbose", action="store_true", default=default, help=verbose_help)
    group.add_argument("-q", "--quiet", action="store_true", default=default, help=quiet_help)


def command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, **kwargs: Any) -> Parser:
    """A command's parser (a :class:`Parser`, as the command line's own is), its ``help`` kept as
    the summary ``-h`` shows."""
    parser = cast("Parser", sub.add_parser(name, **kwargs))
    parser.summary = kwargs.get("help", "")
    return parser
