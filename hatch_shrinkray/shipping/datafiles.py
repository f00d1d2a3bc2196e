"""Which external-data files the models of an archive read, so none that a shipped model needs is
dropped.

A shrunk model is self-contained (or has its own ``<name>.data``), so the original's data files
leave the archive, unless another model that ships its original bytes reads one of them too: two
models may share one ``weights.bin``, and only one of them may be configured. A model reads data
files in its own directory or below it, so the models that may read ``pkg/models/weights.bin`` are
the files directly in ``pkg/models``, ``pkg`` and the root. Each is recognised as an ONNX model and
its references are read without onnx (``manifest.external_data_refs``), so this stays light.

(A data file shared with another model is not all the shrunk model's own: the engine counts only
the bytes of its tensors there as its input, ``modelio.Loaded.size``.)
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Protocol

from hatch_shrinkray.shipping.manifest import external_data_refs


class Tree(Protocol):
    """The files an archive is made from: the project (the hook), or a wheel's entries."""

    root: Path

    def files_in(self, directory: str) -> list[str]:
        """The relative paths of the files directly in ``directory`` (``""``: the root)."""
        ...

    def fetch(self, relpath: str) -> Path | None:
        """The file with its bytes on disk, or ``None`` when its first bytes already show it is not
        an ONNX model (a wheel's entries are only unpacked when they may be one)."""
        ...

    def size(self, relpath: str) -> int:
        """The file's size in bytes."""
        ...


class ProjectTree:
    """Files on disk under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def files_in(self, directory: str) -> list[str]:
        try:
            entries = sorted(os.scandir(self.root / directory), key=lambda e: e.name)
        except OSError:
            return []
        return [posixpath.join(directory, e.name) if directory else e.name for e in entries if _is_file(e)]

    def fetch(self, relpath: str) -> Path | None:
        return self.root / relpath

    def size(self, relpath: str) -> int:
        try:
            return (self.root / relpath).stat().st_size
        except OSError:
            return 0


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


class Readers:
    """The models of ``tree`` that read each data file, by relative path (memoized: every model
    file is scanned at most once)."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._refs: dict[str, dict[str, list[tuple[int, int | None]]]] = {}

    def refs(self, model: str) -> dict[str, list[tuple[int, int | None]]]:
        """The data files ``model`` reads (relative paths; references that leave its directory are
        left out: the engine refuses them) with the ranges of its tensors; ``{}`` for a file that is
        not an ONNX model."""
        if model not in self._refs:
            path = self.tree.fetch(model)
            found = external_data_refs(path) if path is not None else None
            parent = PurePosixPath(model).parent.as_posix()
            resolved: dict[str, list[tuple[int, int | None]]] = {}
            for location, ranges in (found or {}).items():
                rel = posixpath.normpath(posixpath.join("" if parent == "." else parent, location))
                if not (location.startswith("/") or rel.startswith("../") or rel == ".."):
                    resolved.setdefault(rel, []).extend(ranges)
            self._refs[model] = resolved
        return self._refs[model]

    def of(self, data: str) -> set[str]:
        """Every model file of the tree that reads the data file ``data``."""
        return {model for model in _candidates(self.tree, data) if data in self.refs(model)}


def _candidates(tree: Tree, data: str) -> Iterator[str]:
    """The files that may read ``data``: those directly in its directory and in each one above it."""
    directory = PurePosixPath(data).parent
    while True:
        text = "" if directory.as_posix() == "." else directory.as_posix()
        yield from (f for f in tree.files_in(text) if f != data)
        if not text:
            return
        directory = directory.parent
