"""Where a project's files land inside its wheel, so a model can be named by either path.

A Hatch project's wheel drops the source prefixes that ``packages`` and ``sources`` name
(``src/pkg/models/x.onnx`` ships as ``pkg/models/x.onnx``); hatchling's own ``WheelBuilderConfig``
says which, so the mapping is exactly the build's. Any other project (setuptools, flit, ...) is
taken to use the common ``src`` layout when it has a ``src`` directory. ``models`` globs (the
table's, ``--models``, ``check MODEL``) may use either spelling, in the source tree (the hook,
``check``) and inside a built wheel (``wheel``) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    sources: tuple[tuple[str, str], ...] = ()
    """``(source prefix, wheel prefix)`` pairs, first match wins, as hatchling applies ``sources``;
    an empty source prefix applies to every path."""

    def to_wheel(self, path: str) -> str:
        """The in-wheel spelling of a project path (or glob)."""
        return next((wheel + path[len(source):] for source, wheel in self.sources
                     if not source or path.startswith(source)), path)

    def to_source(self, path: str) -> str:
        """The project spelling of an in-wheel path (or glob)."""
        return next((source + path[len(wheel):] for source, wheel in self.sources if path.startswith(wheel)), path)

    def spellings(self, pattern: str, in_wheel: bool) -> list[str]:
        """``pattern`` and its other spelling, for matching in a wheel's files or in the project's."""
        other = self.to_wheel(pattern) if in_wheel else self.to_source(pattern)
        return [pattern] if other == pattern else [pattern, other]


def project_layout(root: Path) -> Layout:
    """The layout of the project at ``root`` (none when it has no ``pyproject.toml``)."""
    if not (root / "pyproject.toml").is_file():
        return Layout()
    try:
        from hatchling.builders.wheel import WheelBuilder

        sources = WheelBuilder(str(root)).config.sources
        return Layout(tuple((s.replace("\\", "/"), r.replace("\\", "/")) for s, r in sources.items()))
    except Exception:  # not a project hatchling can lay out (setuptools, flit, ...): the common src layout
        return Layout((("src/", ""),)) if (root / "src").is_dir() else Layout()
