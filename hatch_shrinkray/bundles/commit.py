"""Replacing files of a tree so that, however the run ends, each is its original or complete.

Every replacement is first written in full beside its file (``tree.beside``: same directory, same
file system, the original's permissions); then a journal naming every change is written atomically
at the tree's root; then each replacement is renamed over its file and each file that leaves the
tree is removed. Before the journal exists, the tree holds its originals (and replacements that a
later run deletes); once it exists, a later run finishes the renames (:func:`recover`). With
``keep`` (a check judges the tree next), each original stays beside its file until :meth:`Applied.
commit` (the journal goes first: that is the moment the change is final) or :meth:`Applied.undo`
puts it back; a run killed in between is undone by the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from hatch_shrinkray.bundles.tree import NEW_SUFFIX, OLD_SUFFIX, beside
from hatch_shrinkray.codec import encode, loads, one_of
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import write_atomically
from hatch_shrinkray.signals import deferred

JOURNAL = ".shrinkray-journal.json"
FORMAT = "hatch-shrinkray-bundle-journal"


@dataclass(frozen=True)
class Change:
    """One file of the tree: ``source``'s bytes go there, or (``source`` None) it leaves the tree."""

    relpath: str
    source: Path | None


@dataclass(frozen=True)
class Journaled:
    """A change as the journal names it: whether the file leaves the tree, and whether it existed."""

    path: str
    leaves: bool
    existed: bool


@dataclass(frozen=True)
class Journal:
    keep: bool
    changes: tuple[Journaled, ...]
    format: Annotated[str, one_of([FORMAT])] = FORMAT


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the tree for this run: a second run on the same directory meanwhile is one line."""
    fd = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ShrinkrayError("another hatch-shrinkray run is changing this directory", path=str(root),
                                 hint="wait for it to finish, then run again") from None
        yield
    finally:
        os.close(fd)


class Applied:
    """Changes made with their originals kept beside them, until :meth:`commit` or :meth:`undo`."""

    def __init__(self, root: Path, changes: Sequence[tuple[str, bool]]) -> None:
        self.root, self.changes = root, changes

    def commit(self) -> None:
        with deferred():
            (self.root / JOURNAL).unlink(missing_ok=True)
        for rel, _ in self.changes:
            beside(self.root / rel, OLD_SUFFIX).unlink(missing_ok=True)

    def undo(self) -> None:
        _undo(self.root, self.changes)


def apply(root: Path, changes: Sequence[Change], *, keep: bool = False) -> Applied | None:
    """Make ``changes`` in the tree at ``root`` (see the module's docstring); with ``keep``, the
    :class:`Applied` that commits or undoes them."""
    staged: list[Path] = []
    try:
        for change in changes:
            if change.source is not None:
                staged.append(_stage(root / change.relpath, change.source))
        journal = Journal(keep, tuple(Journaled(c.relpath, c.source is None, _exists(root / c.relpath))
                                      for c in changes))
        write_atomically(root / JOURNAL, json.dumps(encode(journal), indent=1, sort_keys=True).encode())
    except BaseException:
        for path in staged:
            path.unlink(missing_ok=True)
        raise
    _forward(root, journal)
    if keep:
        return Applied(root, [(c.path, c.existed) for c in journal.changes])
    with deferred():
        (root / JOURNAL).unlink(missing_ok=True)
    return None


def recover(root: Path) -> str | None:
    """Finish (or, where originals were kept for a check, undo) what a killed run began; what was done,
    in words, or None when there was nothing to do."""
    path = root / JOURNAL
    if not path.is_file():
        return None
    try:
        journal: Journal = loads(Journal, path.read_bytes())
    except (OSError, ValueError) as exc:  # codec.Invalid: every problem
        raise ShrinkrayError(f"cannot read the journal of an earlier run ({exc})", path=str(path),
                             hint="the tree may hold a mix of original and shrunk files; reinstall or rebuild it"
                             ) from exc
    changes = [(c.path, c.existed) for c in journal.changes]
    if journal.keep:
        _undo(root, changes)
        return f"an earlier run was stopped before its check finished: its {len(changes)} change(s) undone"
    _forward(root, journal)
    with deferred():
        path.unlink(missing_ok=True)
    return f"an earlier run was stopped while replacing files: its {len(changes)} change(s) finished"


def remove_leftovers(root: Path, leftovers: Sequence[str]) -> None:
    """Delete what a run stopped before its journal left beside the files (never a file of the tree)."""
    for rel in leftovers:
        (root / rel).unlink(missing_ok=True)


def _stage(target: Path, source: Path) -> Path:
    """``source``'s bytes, complete and flushed, beside ``target`` with ``target``'s permissions."""
    staged = beside(target, NEW_SUFFIX)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    try:
        with deferred():
            staged.unlink(missing_ok=True)
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as dst, open(source, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.chmod(staged, mode)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise ShrinkrayError(f"cannot write beside this file: {exc.strerror or exc}", path=str(target),
                             hint="make its directory writable, free some space there, or write the shrunk tree "
                                  "elsewhere with -o OUT") from exc
    return staged


def _forward(root: Path, journal: Journal) -> None:
    """Every change of ``journal`` made (each step can be repeated: a killed run's next finishes it).
    Originals to keep are all kept before the first rename, so an undo never meets a replaced file
    without its original."""
    if journal.keep:
        for change in journal.changes:
            target = root / change.path
            old = beside(target, OLD_SUFFIX)
            if change.existed and not _exists(old):
                _keep(target, old)
    for change in journal.changes:
        target = root / change.path
        new = beside(target, NEW_SUFFIX)
        if change.leaves:
            target.unlink(missing_ok=True)
        elif new.exists():
            os.replace(new, target)


def _keep(target: Path, old: Path) -> None:
    """``target``'s original beside it: a hard link (nothing copied), or a copy where links are not had."""
    try:
        os.link(target, old, follow_symlinks=False)
    except OSError:
        tmp = beside(old, NEW_SUFFIX)
        shutil.copy2(target, tmp, follow_symlinks=False)
        os.replace(tmp, old)


def _undo(root: Path, changes: Sequence[tuple[str, bool]]) -> None:
    """Every kept original put back and every file that did not exist before removed, then the journal."""
    for rel, existed in changes:
        target = root / rel
        old = beside(target, OLD_SUFFIX)
        beside(target, NEW_SUFFIX).unlink(missing_ok=True)
        if _exists(old) and _exists(target) and os.path.samestat(old.lstat(), target.lstat()):
            old.unlink()  # never replaced: renaming a hard link over its twin does nothing at all
        elif _exists(old):
            os.replace(old, target)
        elif not existed:
            target.unlink(missing_ok=True)
    with deferred():
        (root / JOURNAL).unlink(missing_ok=True)


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()
