"""The engine options as flags: made from the option table, and read once from the parsed command line.

Every flag of an engine option spells its key (``--min-elements`` sets ``min-elements``); the flags a
user gives override the project's table key by key, messages name them, and hints quote them in the
user's order.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray import option_table
from hatch_shrinkray.cli.usage import Parser
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.hints import FLAGS
from hatch_shrinkray.option_table import BY_FIELD, GROUPS, KINDS, OPTIONS, idle_options, option_errors, options_from
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.config import CommandLine, HookConfig

FLAG_NAMES = {**{o.field: o.flags[0] for o in OPTIONS if o.flags}, "plan": "--plan"}
"""Options field -> the flag that sets it, for messages about flags (``plan``: the plan file's)."""


class Noted(argparse.Action):
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


PLAN_HELP = ("apply what this plan file holds for each model's bytes (check --fix's remedy or check --search's "
             "per-tensor plan)")


def plan_flag(p: Parser, help_text: str = PLAN_HELP) -> argparse.Action:
    """``--plan FILE``: the plan file a command applies (``check``: reads and writes)."""
    return p.add_argument("--plan", type=Path, metavar="FILE", action=Noted, help=help_text)


def pins_flag(p: Parser, files: str) -> argparse.Action:
    """``--pins``: what to do where ``files`` pin an original model's digest (the ``pins`` key's values)."""
    return p.add_argument("--pins", choices=option_table.HOOK_BY_KEY["pins"].choices,
                          help=f"what to do where {files} pin the sha256, sha1 or md5 of an original model: "
                               f"{HookConfig.pins} (the default) or rewrite them to name the shrunk model's (the "
                               "`pins` key)")


def option_flags(p: Parser, *, verification_only: bool = False) -> None:
    """The flags of the engine options, each under its heading in ``--help`` and the common ones in
    ``-h`` (``verification_only``: those of :class:`VerifyOptions`, which ``compare`` takes)."""
    for option in OPTIONS:
        if not option.flags or (verification_only and not option.verify):
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
        action = p.heading(GROUPS[option.group]).add_argument(
            *option.flags, dest=option.field, action=Noted, append=append, default=default,
            help=option.flag_help, **spec)
        if option.common:
            p.common(action)


@dataclass(frozen=True)
class Given:
    """The engine options the user gave as flags, read once from the parsed command line."""

    settings: dict[str, Any]
    """Key -> value, typed as the table's values are read (``inputs``: the path as given)."""
    spelled: dict[str, str]
    """Key -> the flag as the user gave it."""
    names: dict[str, str]
    """Options field -> its flag, as the user wrote it when given (for messages)."""

    @classmethod
    def of(cls, args: argparse.Namespace) -> Given:
        settings: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for dest, flag in getattr(args, "given", {}).items():
            option = BY_FIELD.get(dest)
            if option is not None:
                settings[option.key] = KINDS[option.kind].given(getattr(args, dest), flag)
                spelled[option.key] = flag
        return cls(settings, spelled, names_of(args))

    def options(self) -> ShrinkOptions:
        """The options the flags alone give (the engine's defaults for the others), checked."""
        options = options_from(self.settings, Path())
        errors = option_errors(options, self.names)
        if errors:
            raise ShrinkrayError("; ".join(errors))
        return options

    def refuse_idle(self, per_model: Iterable[ShrinkOptions]) -> None:
        """Refuse, in one line, a flag that does nothing for any of the models (their options, the
        project's table and the flags merged): the user meant something that would not happen."""
        idle = idle_options(self.spelled, list(per_model), self.names)
        if idle:
            (name, why), others = idle[0], [n for n, _ in idle[1:]]
            more = f"; so {'does' if len(others) == 1 else 'do'} {', '.join(others)}" if others else ""
            raise ShrinkrayError(f"{name} does nothing here: {why}{more}", hint="drop it, or give what it needs")

    def command_line(self, args: argparse.Namespace, models: Sequence[str] = (), models_flag: str = "--models", *,
                     every_flag: bool = False, plan: Path | None = None) -> CommandLine:
        """The flags given, as keys that override the project's table one by one; ``models`` globs
        replace its ``models``; ``plan`` its plan file. ``every_flag``: there is no table, so
        messages name every setting by its flag, given or not."""
        settings = {k: str(Path(v).absolute()) if k == "inputs" else v for k, v in self.settings.items()}
        names = {**(FLAGS if every_flag else {}), **self.spelled}
        return CommandLine(settings, names, tuple(models), models_flag, getattr(args, "pins", None), plan)


def names_of(args: argparse.Namespace) -> dict[str, str]:
    """Options field -> the flag that sets it, as written when given (nothing parsed: for messages)."""
    return {**FLAG_NAMES, **{dest: flag for dest, flag in getattr(args, "given", {}).items() if dest in BY_FIELD}}


def as_check_args(args: argparse.Namespace) -> list[str]:
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
