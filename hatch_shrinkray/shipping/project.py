"""Which table of a project's ``pyproject.toml`` configures shipping outside a Hatch build.

``[tool.hatch-shrinkray]`` when present; otherwise the hook's own table (the wheel target's, which
replaces the global one as in hatchling), so a Hatch project needs no second copy of its settings.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import read_regular
from hatch_shrinkray.shipping.config import hook_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TOOL_TABLE = "tool.hatch-shrinkray"
MAX_BYTES = 16 << 20
"""A pyproject.toml is kilobytes; a bigger one (or a FIFO, a device) is not read."""


def find_table(project: Path, *, required: bool = False) -> tuple[dict[str, Any], str | None]:
    """The configuration table of the project at ``project`` and its TOML path; ``({}, None)``
    when there is no ``pyproject.toml`` or no table in it, unless ``required``. A table that
    cannot be read is an error either way."""
    path = project / "pyproject.toml"
    hint = "run in the project's directory, pass --project DIR, or select models with --models"
    try:
        data = tomllib.loads(read_regular(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError as exc:
        if not required:
            return {}, None
        raise ShrinkrayError("no pyproject.toml here", path=str(path), hint=hint) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ShrinkrayError(f"cannot read: {exc}", path=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ShrinkrayError(f"invalid TOML: {exc}", path=str(path)) from exc
    except RecursionError as exc:
        raise ShrinkrayError("invalid TOML: nested too deeply", path=str(path)) from exc
    for table in (TOOL_TABLE, hook_table("wheel"), hook_table()):
        value: Any = data
        for key in table.split("."):
            value = value.get(key, {}) if isinstance(value, dict) else {}
        if value:
            if not isinstance(value, dict):
                raise ShrinkrayError(f"Field `{table}` must be a table", path=str(path))
            return value, table
    if not required:
        return {}, None
    raise ShrinkrayError(f"no [{TOOL_TABLE}] table (nor a [{hook_table()}] table)", path=str(path), hint=hint)
