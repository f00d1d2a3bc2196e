"""A flag's help shows its default from where the default lives (an engine option's: its options
field), through argparse's ``%(default)`` placeholder, never restated in prose: a changed default
shows itself in ``--help``, and a default written into the help text fails here."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hatch_shrinkray.cli import parser
from hatch_shrinkray.option_table import BY_FIELD, Option
from hatch_shrinkray.options import ShrinkOptions

PLACEHOLDER = re.compile(r"%\(default\)[-#0 +]*\d*(?:\.\d+)?[a-z]")
DESCRIBED = {Path("."): "default: the current directory"}
"""Defaults that read better in words than as their value (``--project .``), and those words."""


def _parsers() -> Iterator[argparse.ArgumentParser]:
    top = parser()
    yield top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.values()


def _with_defaults() -> Iterator[tuple[str, argparse.Action]]:
    """``(command, flag)`` for every flag that takes a value and has a default to show."""
    for p in _parsers():
        for action in p._actions:
            default = action.default
            if (action.option_strings and action.nargs != 0 and not action.required
                    and default not in (None, argparse.SUPPRESS, [], ())):
                yield p.prog, action


def restated(help_text: str) -> list[str]:
    """What ``help_text`` gives as a default in words instead of by placeholder."""
    text = PLACEHOLDER.sub("<field>", help_text)
    return [m.group(0) for m in re.finditer(r"\bdefault\b:?\s*(\S+)", text) if not m.group(1).startswith("<field>")]


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_the_detector_tells_a_placeholder_from_prose() -> None:
    assert restated("smallest tensor to encode (default 16384)") == ["default 16384)"]
    assert restated("directory (default: wheelhouse)") == ["default: wheelhouse)"]
    assert restated("smallest tensor to encode (default %(default)s)") == []
    assert restated("may take (default %(default).0f); default: %(default)g") == []


def test_every_flag_with_a_default_shows_it_from_the_field() -> None:
    seen = []
    for prog, action in _with_defaults():
        flag = f"{prog} {action.option_strings[-1]}"
        if isinstance(action.default, Path) and action.default in DESCRIBED:
            assert DESCRIBED[action.default] in (action.help or ""), flag
            continue
        assert action.help and PLACEHOLDER.search(action.help), f"{flag}: its help does not show its default"
        assert not restated(action.help), f"{flag}: its help restates a default: {restated(action.help)}"
        shown = argparse.HelpFormatter(prog)._expand_help(action)
        assert _shown(action.default) in shown, (flag, shown)
        option = BY_FIELD.get(action.dest)
        if option is not None:  # an engine option's flag: the default is its options field's
            field = option.default()
            assert action.default == (list(field) if isinstance(field, tuple) else field), flag
        seen.append(flag)
    assert "hatch-shrinkray shrink --min-elements" in seen and "hatch-shrinkray check --timeout" in seen
    assert "hatch-shrinkray info --min-elements" in seen  # info's own flag, from the same field


def test_info_counts_from_the_engine_default() -> None:
    info = next(a for p in _parsers() if p.prog.endswith(" info") for a in p._actions if a.dest == "min_elements")
    assert info.default == ShrinkOptions().min_elements


def test_a_changed_field_default_shows_in_help(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the default where it lives and the help says the new value, with no text to edit."""
    engine = Option.default
    monkeypatch.setattr(Option, "default", lambda self: 4096 if self.key == "min-elements" else engine(self))
    shrink = next(p for p in _parsers() if p.prog.endswith(" shrink"))
    text = " ".join(shrink.format_help().split())
    assert "smallest tensor to encode (default 4096)" in text


def test_levels_shows_each_methods_default_from_its_facts() -> None:
    """``levels`` has no one default (its field is None: each method's own); its help and the docs show
    each from the method's facts, so a changed fact shows itself there."""
    from hatch_shrinkray.method_facts import FACTS

    option = BY_FIELD["levels"]
    ranges = {name: f.levels for name, f in FACTS.items() if f.levels is not None}
    assert len(ranges) >= 2
    for name, (low, high, default) in ranges.items():
        assert f"{name} {low}..{high} (default {default})" in (option.flag_help or ""), name
        assert f"`{default}` (`{name}`)" in (option.shown or ""), name
        assert f"`{name}` {low}..{high}" in option.help, name
