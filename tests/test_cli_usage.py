"""How the command line explains itself (``hatch_shrinkray/cli/usage.py``), as a user meets it
through the console script: each common slip gets one line that names the fix, and the helps fit
their purpose (``-h`` one screen of the common flags, ``--help`` every flag under its heading)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hardening import cli

from hatch_shrinkray import hints
from hatch_shrinkray.cli import parser
from hatch_shrinkray.cli.usage import GLOBAL
from hatch_shrinkray.option_table import GROUPS, OPTIONS

SLIPS = [
    # a command to run without its `--`
    (["check", "python", "-m", "pytest", "tests"],
     "the command to run goes after `--`: `hatch-shrinkray check -- python -m pytest tests`", "check"),
    (["check", "pytest"], "the command to run goes after `--`: `hatch-shrinkray check -- pytest`", "check"),
    (["check", "--fix", "pytest", "-x"], "`hatch-shrinkray check --fix -- pytest -x`", "check"),
    (["record", "python", "-c", "pass", "-o", "rec"],
     "the command to run goes after `--`: `hatch-shrinkray record -o rec -- python -c pass`", "record"),
    # mistyped commands and flags
    (["shrik", "m.onnx", "-o", "out"], "no command `shrik`; did you mean `shrink`?", None),
    (["chek", "--", "pytest"], "no command `chek`; did you mean `check`?", None),
    (["shrink", "m.onnx", "-o", "out", "--methd", "int8"],
     "`hatch-shrinkray shrink` has no flag `--methd`; did you mean `--method`?", "shrink"),
    (["shrink", "m.onnx", "--methd", "int8"], "did you mean `--method`?", "shrink"),  # before the missing -o
    (["check", "--fx", "--", "pytest"], "`hatch-shrinkray check` has no flag `--fx`; did you mean `--fix`?", "check"),
    (["wheel", "w.whl", "--in-plase"], "did you mean `--in-place`?", "wheel"),
]


@pytest.mark.parametrize(("argv", "fix", "command"), SLIPS, ids=[" ".join(s[0][:3]) for s in SLIPS])
def test_each_common_slip_is_one_line_that_names_the_fix(argv: list[str], fix: str, command: str | None,
                                                          tmp_path: Path) -> None:
    proc = cli(*argv, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and fix in line, line
    assert line.endswith(f"(see `hatch-shrinkray{' ' + command if command else ''} --help`)"), line
    assert hints.counted(line) <= hints.LINE_LIMIT, line


WITH_DASHES = [
    # docs/bundles.md's line before it named its -o: the flag is what is missing, not the `--`
    (["record", "--", "./dist/myapp/myapp", "--selftest"], "the following arguments are required: -o/--output",
     "record"),
    (["record", "-o", "rec", "--max-sampels", "3", "--", "python", "-c", "pass"],
     "`hatch-shrinkray record` has no flag `--max-sampels`; did you mean `--max-samples`?", "record"),
    (["check", "--fix", "--shadow", "--", "python", "-m", "pytest"],
     "argument --shadow: not allowed with argument --fix", "check"),
    (["check", "--timeout", "soon", "--", "pytest"], "argument --timeout: invalid float value: 'soon'", "check"),
    pytest.param(["check", "--fix", "--shadow", "python", "--", "pytest"],
                 "argument --shadow: not allowed with argument --fix", "check"),
]


@pytest.mark.parametrize(("argv", "said", "command"), WITH_DASHES,
                         ids=["record no -o", "record typo", "check two modes", "check bad value", "check program"])
def test_a_line_with_its_dashes_is_never_told_to_add_them(argv: list[str], said: str, command: str,
                                                          tmp_path: Path) -> None:
    """A command line that has its ``--`` and another mistake gets that mistake named, never "the
    command to run goes after ``--``"."""
    proc = cli(*argv, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc
    assert proc.stderr.splitlines() == [f"error: {said} (see `hatch-shrinkray {command} --help`)"]


def test_a_mistyped_value_gets_the_closest_choice(tmp_path: Path) -> None:
    proc = cli("shrink", "m.onnx", "-o", "out", "--method", "int9", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: --method must be one of int8, float-levels, fp16, dedup, dynamic, int4, auto; got 'int9' "
        "(did you mean 'int8'?)"]


def test_a_long_command_is_quoted_short() -> None:
    """The fix quotes the user's own arguments only as far as the line allows."""
    long = ["check", "src/m.onnx", "--method", "int8", "python", "-m", "pytest", "-x",
            *(f"tests/test_{n}.py" for n in range(12))]
    proc = cli(*long)
    (line,) = proc.stderr.splitlines()
    assert "`hatch-shrinkray check [options] -- python -m pytest" in line, line
    assert hints.counted(line) <= hints.LINE_LIMIT, line


COMMANDS = ("info", "shrink", "wheel", "compare", "record", "check")


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_h_is_one_screen_of_the_common_flags_and_dash_dash_help_all_of_them(command: str) -> None:
    env = {**os.environ, "COLUMNS": "100"}
    short = cli(command, "-h", env=env)
    full = cli(command, "--help", env=env)
    assert short.returncode == full.returncode == 0
    assert len(short.stdout.splitlines()) <= 30, short.stdout
    assert len(full.stdout.splitlines()) > len(short.stdout.splitlines())
    sub = next(a for a in parser()._actions if a.dest == "command").choices[command]  # type: ignore[index]
    flags = {s for a in sub._actions for s in a.option_strings}
    listed = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", full.stdout))
    assert flags <= listed, flags - listed  # --help: every flag
    common = {s for a in sub._common for s in a.option_strings}
    assert common and common <= set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", short.stdout))
    assert f"`hatch-shrinkray {command} --help`" in short.stdout  # where the rest are
    assert f"{GLOBAL}:" in full.stdout


def test_every_engine_flag_sits_under_its_heading_in_shrink_help() -> None:
    full = cli("shrink", "--help", env={**os.environ, "COLUMNS": "100"}).stdout
    sections = dict(re.findall(r"^(\S[^\n]*):\n((?:(?:  |\n(?= )).*\n?)*)", full, flags=re.M))
    for option in OPTIONS:
        if option.flags:
            assert f"  {option.flags[0]}" in sections[GROUPS[option.group]], (option.key, option.group)
    assert [o.flags[0] for o in OPTIONS if o.common] == ["--method", "--target", "--strict", "--inputs"]
