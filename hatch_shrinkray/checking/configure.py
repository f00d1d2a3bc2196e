"""Which models ``check`` judges, with which options, and which plan file it reads and writes.

MODEL files inside a configured project (or an installed package's files, matched by their paths
inside the wheel) take the project's table with the flags overriding it key by key; files outside
any configured project take the flags alone. A plan file written for another project is refused
before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from hatch_shrinkray.checking.installed import expand, inside, installed_root
from hatch_shrinkray.checking.models import Configured
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.config import CommandLine, HookConfig, ModelEntry, load_config
from hatch_shrinkray.shipping.plan import PLAN_NAME, read_plan
from hatch_shrinkray.shipping.project import find_table

COMMAND_LINE = "the command line"
"""The table name of a configuration from model files and flags alone (no project table)."""


def configure(models: Sequence[str], *, project: Path | None, plan: Path | None, options: ShrinkOptions,
              names: Mapping[str, str], flags: Callable[[list[str]], CommandLine]) -> tuple[Configured, Path | None]:
    """The models to check (``models``: MODEL files with the flags' ``options``, or the table of the
    project, by default the current directory's, with ``flags`` for the paths it selects) and the
    plan file that ``--fix`` and ``--search`` write (None: ``plan = false`` in the project; ``plan``:
    the ``--plan`` given). Raises the table's :class:`ConfigurationError` as it is."""
    root = (project or Path(".")).resolve()
    within = [inside(m, root) for m in models]
    raw, table = find_table(root, required=not models or project is not None)
    installed = installed_root(models) if table is not None and project is None and None in within else None
    if installed is None and (table is None or None in within):  # files outside a configured project: the flags
        if project is not None:
            raise ShrinkrayError("MODEL files must lie inside --project", path=models[within.index(None)])
        return _files_alone(models, plan, options, names)
    # The project's table: for its own files, or for an installed package's, matched by their in-wheel paths.
    files_root, relpaths = installed if installed is not None else (None, [m for m in within if m])
    config = load_config(raw, root, "wheel", table, models_root=files_root, flags=flags(relpaths))
    roots = tuple((files_root or root) for _ in config.models)
    if plan is not None:
        config = replace(config, plan_file=plan, plans=read_plan(plan) if plan.is_file() else {})
        return Configured(config, roots), plan
    plan_file = None if raw.get("plan") is False else (config.plan_file or root / PLAN_NAME)
    return Configured(config, roots), plan_file


def _files_alone(models: Sequence[str], plan: Path | None, options: ShrinkOptions,
                 names: Mapping[str, str]) -> tuple[Configured, Path]:
    files, unmatched = expand(models)
    missing = [*unmatched, *(str(f) for f in files if not f.is_file())]
    if missing:
        raise ShrinkrayError("no such model file", path=missing[0])
    plan_file = plan or Path(PLAN_NAME)
    plans = read_plan(plan_file) if plan_file.is_file() else {}
    config = HookConfig(table=COMMAND_LINE, target="wheel", models=tuple(ModelEntry(f.name, options, names)
                                                                          for f in files),
                        plan_file=plan_file, plans=plans)
    return Configured(config, tuple(f.resolve().parent for f in files)), plan_file


def refuse_foreign(config: HookConfig, plan_file: Path | None) -> None:
    """A plan file whose every entry names a model this configuration does not have was written for
    another project (copied along, or ``--plan`` pointing elsewhere): refused before anything runs,
    so that ``--fix`` never merges its choices into it."""
    configured = {m.relpath for m in config.models}
    named = sorted({e.model for e in config.plans.values()})
    if named and not configured & set(named):
        raise ShrinkrayError(
            f"holds choices only for models this project does not configure ({', '.join(named[:3])}"
            f"{' ...' if len(named) > 3 else ''}): it was written for another project",
            path=str(plan_file or config.plan_file),
            hint="delete it, or point --plan (the `plan` key) at this project's own plan file, then run "
                 "`hatch-shrinkray check --fix -- COMMAND` again")
