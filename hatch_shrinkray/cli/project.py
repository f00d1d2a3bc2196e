"""What the current directory's project says of model files named on the command line: the options
its configuration table gives them (overrides included, the flags given overriding it key by key)
and the plan file's plans, so ``shrink`` and ``compare`` in a project give the build's bytes and
verdict. What they leave out is said in one line, with the flag that reads it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hatch_shrinkray.checking.installed import inside
from hatch_shrinkray.cli.flags import Given
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.plan import PLAN_NAME, PlanEntry

PLAN_KEYS = ("method", "rounding", "encodings")
"""Flags that choose what a plan chooses: given, they are the user's choice, and the plan steps aside."""


@dataclass(frozen=True)
class Project:
    """The table's options per file inside the project, and its plan file's plans (by sha256)."""

    options: Mapping[Path, ShrinkOptions] = field(default_factory=dict)
    plans: Mapping[str, PlanEntry] = field(default_factory=dict)
    plan_file: str = PLAN_NAME


def project_of(args: argparse.Namespace, given: Given, files: Sequence[Path], command: str) -> Project:
    """The project around the current directory for ``files`` (empty: no table, or no file inside
    it), saying in one line what it takes from it."""
    from hatch_shrinkray.shipping.config import load_config
    from hatch_shrinkray.shipping.project import find_table

    root = Path.cwd()
    raw, table = find_table(root)
    within = {f: inside(str(f), root) for f in files if f.is_file()}
    relpaths = {f: r for f, r in within.items() if r is not None}
    if table is None or not relpaths:
        return Project()
    flags = given.command_line(args, sorted(set(relpaths.values())), "MODEL")
    config = load_config(raw, root, "wheel", table, flags=flags)
    by_path = {m.relpath: m.options for m in config.models}
    name = config.plan_file.name if config.plan_file is not None else PLAN_NAME
    plans = config.plans
    chosen = [f"--{k}" for k in PLAN_KEYS if k in given.settings]
    if plans and chosen:
        print(f"{command}: options from `{table}` in pyproject.toml, the flags given overriding them; {name} not "
              f"applied ({', '.join(chosen)} given; `--plan {name}` applies it)", file=sys.stderr)
        plans = {}
    else:
        read = f" and {name}" if plans else ""
        print(f"{command}: options from `{table}` in pyproject.toml{read}; the flags given override them",
              file=sys.stderr)
    return Project({f: by_path[r] for f, r in relpaths.items() if r in by_path}, plans, name)
