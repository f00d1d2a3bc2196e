"""Where MODEL arguments are: files or globs in a project, or the files of an installed package.

``check`` takes a package's models by their paths in the project (``src/pkg/m.onnx``) or where the
package is installed (``.../site-packages/pkg/m.onnx``), whose paths there are their paths inside the
wheel; ``shrink`` uses the same spellings to find a file's options in the project's table.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path


def expand(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The files ``patterns`` name (globs expanded, ``**`` included, each glob's matches sorted) and
    the globs that match nothing. A plain path is kept as given, whether or not it exists."""
    files: list[Path] = []
    unmatched: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            hits = sorted(glob.glob(pattern, recursive=True))
            if not hits:
                unmatched.append(pattern)
            files.extend(Path(h) for h in hits)
        else:
            files.append(Path(pattern))
    return files, unmatched


def installed_root(patterns: Sequence[str]) -> tuple[Path, list[str]] | None:
    """For MODEL files of an installed package (all under one ``site-packages`` or ``dist-packages``):
    that directory and their paths in it, which are their paths inside the wheel; else None."""
    files, unmatched = expand(patterns)
    if unmatched or not files:
        return None
    roots = set()
    relpaths = []
    for f in files:
        absolute = f.absolute()
        base = next((p for p in absolute.parents if p.name in ("site-packages", "dist-packages")), None)
        if base is None or not f.is_file():
            return None
        roots.add(base)
        relpaths.append(absolute.relative_to(base).as_posix())
    return (roots.pop(), relpaths) if len(roots) == 1 else None


def inside(pattern: str, project: Path) -> str | None:
    """``pattern`` (a MODEL argument) relative to ``project``, or None when it lies outside
    (``../env/...`` included: normalized first)."""
    absolute = Path(os.path.abspath(pattern))
    try:
        return absolute.relative_to(project).as_posix()
    except ValueError:
        return None
