"""The option table: each engine option declared once, and everything made from it agrees.

The hook's table, the commands' flags, the docs' references and the hints all come from
``hatch_shrinkray.option_table.OPTIONS``; these tests pin that they do, and that the flags spell
the keys (an earlier spelling stays accepted)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from hatch_shrinkray import hints
from hatch_shrinkray.cli import parser
from hatch_shrinkray.cli.flags import Given
from hatch_shrinkray.cli.flags import as_check_args as _as_check_args
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.option_table import BY_KEY, KINDS, OPTIONS, option_errors, options_from, read_settings
from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.shipping.config import ENGINE_KEYS


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_field_is_declared_once() -> None:
    declared = [o.field for o in OPTIONS]
    assert len(declared) == len(set(declared))
    fields_set = {f.name for f in (*fields(ShrinkOptions), *fields(VerifyOptions))} - {"plan"}
    covered = set(declared) - {"int_range"} | {"int_low", "int_high"}
    assert covered == fields_set
    assert list(ENGINE_KEYS) == [o.key for o in OPTIONS]
    assert all(o.kind in KINDS for o in OPTIONS)


def test_flags_spell_the_keys() -> None:
    """A flag is the key itself, or its negation for a switch that is on by default; an earlier
    spelling is an alias of the same flag."""
    for option in OPTIONS:
        if not option.flags:
            continue
        flag = option.flags[0]
        assert flag in (f"--{option.key}", f"--no-{option.key}"), flag
        assert hints.FLAGS[option.key] == flag
    assert all(len(o.flags) <= 1 for o in OPTIONS)  # one spelling per flag: no deprecated ones in a first release


@pytest.mark.parametrize("command", ["shrink", "wheel", "check"])
def test_every_command_takes_every_flag(command: str) -> None:
    taken = {s for a in _subcommand(command)._actions for s in a.option_strings}
    assert {f for o in OPTIONS for f in o.flags} <= taken
    compare = {s for a in _subcommand("compare")._actions for s in a.option_strings}
    assert {f for o in OPTIONS if o.verify for f in o.flags} <= compare
    assert not {f for o in OPTIONS if not o.verify for f in o.flags} & compare


def _given(*argv: str) -> tuple[Given, argparse.Namespace]:
    args = parser().parse_args(["shrink", "m.onnx", "-o", "out", *argv])
    return Given.of(args), args


def test_a_flag_has_one_spelling_and_an_abbreviation_is_named_in_full() -> None:
    """No deprecated spellings; what argparse takes as an abbreviation (``--dim`` for ``--dims``) sets the
    same option and is named by its full flag in messages and hints."""
    new, _ = _given("--dims", "batch=2", "--exclude-tensors", "W1", "--runtimes", "web", "--judges", "y=values")
    short, args = _given("--dim", "batch=2", "--exclude-tensor", "W1", "--runtime", "web", "--judge", "y=values")
    assert new.settings == short.settings == {"dims": (("batch", 2),), "exclude-tensors": ("W1",),
                                              "runtimes": ("web",), "judges": (("y", "values"),)}
    assert short.options() == new.options()
    assert short.names["dims"] == new.names["dims"] == "--dims"
    assert _as_check_args(args) == ["--dims", "batch=2", "--exclude-tensors", "W1", "--runtimes", "web",
                                    "--judges", "y=values"]
    assert "deprecated" not in parser().format_help() + _subcommand("shrink").format_help()


def test_flags_give_what_the_table_gives(tmp_path: Path) -> None:
    """The same settings as flags and as TOML make the same options."""
    given, _ = _given("--method", "int4", "--block-size", "64", "--no-dedup", "--strict", "--int-range", "1", "9",
                      "--encodings", "conv.*=fp16", "--budget-load", "inf", "--samples", "3")
    errors: list[str] = []
    table = read_settings({"method": "int4", "block-size": 64, "dedup": False, "strict": True, "int-range": [1, 9],
                           "encodings": {"conv.*": "fp16"}, "budget-load": float("inf"), "samples": 3}, "t", errors)
    assert errors == []
    assert given.options() == options_from(table, tmp_path)
    assert given.options().verify == VerifyOptions(int_low=1, int_high=9, samples=3)


def test_flag_values_are_checked_with_the_flag_named_as_given() -> None:
    given, _ = _given("--runtimes", "onnxruntime", "--samples", "0", "--levels", "1")
    with pytest.raises(ShrinkrayError) as raised:
        given.options()
    assert str(raised.value) == (
        "--levels must be an integer from 3 to 255 with method int8 (255: plain int8); got 1; "
        "--runtimes entry 'onnxruntime' needs a version: the oldest release your users run, like 'onnxruntime>=1.18'; "
        "--samples must be a positive integer; got 0")
    with pytest.raises(ShrinkrayError, match=r"^--dims 'batch' must look like NAME=VALUE with an integer value$"):
        _given("--dims", "batch")[0].options()


def test_option_errors_follow_the_table_and_name_the_options() -> None:
    bad = ShrinkOptions(method="int9", block_size=True, budget_cosine=1.5,  # type: ignore[arg-type]
                        verify=VerifyOptions(default_dim=0, seed=-1, judges=(("", "nope"),)))
    assert option_errors(bad, {"method": "M"}) == [
        "M must be one of int8, float-levels, fp16, dedup, dynamic, int4, auto; got 'int9' (did you mean 'int8'?)",
        "block_size must be one of 16, 32, 64, 128, 256; got True",
        "budget_cosine must be a number from 0.0 to 1.0; got 1.5",
        "default_dim must be a positive integer; got 0",
        "seed must be a non-negative integer; got -1",
        "judges has an empty output name",
        "judges. must be one of auto, map, sequence, tags, boxes, top-1, decision, segments, equal, values, off "
        "(with a tolerance after a colon for segments, sequence, tags, top-1, decision, map, boxes: \"segments:2\"); "
        "got 'nope'",
    ]
    assert option_errors(ShrinkOptions(verify=None)) == []


def test_a_key_without_a_flag_is_the_tables_only() -> None:
    assert BY_KEY["seed"].flags == ()
    assert "seed" not in hints.FLAGS
    assert not any("--seed" in a.option_strings for a in _subcommand("shrink")._actions)
