"""The files of a bundle directory: the installed distributions' ``RECORD`` files, what a killed run
left beside the files it was replacing, and the configured models that are links.

A model that is a link (PyInstaller links shared libraries, a venv may link a package in) is shrunk
through its target, once however many links name it, and the links stay links; a link that leaves
the directory is not followed: that file belongs to another tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.display import Display

NEW_SUFFIX = ".shrinkray-new"
"""A replacement written beside its file (``.<name>.shrinkray-new``), renamed over it when complete."""
OLD_SUFFIX = ".shrinkray-old"
"""An original kept beside its file while a check judges the replacement."""


def beside(path: Path, suffix: str) -> Path:
    """Where ``path``'s replacement (``NEW_SUFFIX``) or kept original (``OLD_SUFFIX``) is written: a
    hidden name in the same directory, so renaming it over ``path`` never crosses a file system."""
    return path.with_name(f".{path.name}{suffix}")


@dataclass(frozen=True)
class Inventory:
    """What :func:`scan` found under a bundle directory (paths relative to it, POSIX)."""

    records: tuple[str, ...]
    """Every ``*.dist-info/RECORD``: an installed distribution's list of its files."""
    leftovers: tuple[str, ...]
    """Replacements and kept originals a killed run left behind (``beside``'s names)."""


def scan(root: Path) -> Inventory:
    """Walk ``root`` once (links to directories are not followed: what they hold is elsewhere)."""
    records: list[str] = []
    leftovers: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(directory).relative_to(root)
        for name in sorted(files):
            rel = (PurePosixPath(*here.parts) / name).as_posix()
            if name == "RECORD" and here.name.endswith(".dist-info"):
                records.append(rel)
            elif name.startswith(".") and name.endswith((NEW_SUFFIX, OLD_SUFFIX)):
                leftovers.append(rel)
    return Inventory(tuple(records), tuple(leftovers))


def through_links(config: HookConfig, root: Path, app: Display) -> HookConfig:
    """``config`` with every model that is a link (or lies under a linked directory) replaced by its
    target, each file once; a model whose target lies outside ``root`` is left out, said in one line."""
    top = Path(os.path.realpath(root))
    models: dict[str, ModelEntry] = {}
    for model in config.models:
        real = Path(os.path.realpath(root / model.relpath))
        if not real.is_relative_to(top):
            app.display_warning(wording.link_outside_line(model.relpath, str(real)))
            continue
        target = real.relative_to(top).as_posix()
        if target != model.relpath:
            app.display_info(wording.link_line(model.relpath, target))
        models.setdefault(target, replace(model, relpath=target))
    return replace(config, models=tuple(models.values()))
