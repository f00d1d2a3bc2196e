"""What ``hatch-shrinkray check`` asks of every process it runs: a session created from a
configured model (recognised by its resolved path, else by the sha256 of the bytes or file it was
given) loads the shrunk model instead (``load = "shrunk"``), and/or runs the other model beside it
on every call (``shadow``: ``shadow.ModelStats``). Each process reports, at exit, how many sessions
of each model it created and what the shadow runs saw, as ``<reports>/<pid>.<n>.json``.

Standard library only at import time: ``boot`` reaches this module at interpreter start.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from hatch_shrinkray.capture import env
from hatch_shrinkray.codec import encode, loads, one_of

if TYPE_CHECKING:
    from hatch_shrinkray.capture.shadow import ModelStats

FORMAT = "hatch-shrinkray-check-instructions"


@dataclass(frozen=True)
class Target:
    sha256: str
    label: str
    """The model as the configuration names it, for reports."""
    original: str
    """Resolved path of the original model file."""
    shrunk: str
    """Path of the shrunk model to load or shadow."""
    judges: tuple[tuple[str, str], ...] = ()
    """``(output, judge)`` from the ``judges`` key: how the shadow compares those outputs."""


@dataclass(frozen=True)
class Instructions:
    load: str
    """``original`` or ``shrunk``: what the program's sessions of a target compute with."""
    shadow: bool
    """Also run the other model on every call and compare (the program still gets ``load``'s outputs)."""
    threshold: float
    reports: str
    targets: tuple[Target, ...]
    format: Annotated[str, one_of([FORMAT])] = FORMAT

    def to_json(self) -> str:
        return json.dumps(encode(self), sort_keys=True, indent=1)

    def find(self, path_or_bytes: Any, identity: Callable[[], str | None]) -> Target | None:
        """The target this session is created from, by resolved path first (no hashing), then by
        the sha256 ``identity`` computes."""
        if isinstance(path_or_bytes, (str, os.PathLike)):
            try:
                resolved = os.path.realpath(os.fspath(path_or_bytes))
            except (TypeError, ValueError):
                resolved = ""
            for target in self.targets:
                if target.original == resolved:
                    return target
        sha = identity()
        return next((t for t in self.targets if t.sha256 == sha), None) if sha else None


@dataclass
class Seen:
    """One target in this process: sessions created (and how many of them were given the shrunk
    model instead), and the shadow statistics."""

    sessions: int = 0
    swapped: int = 0
    shadowed: int = 0
    shadow_errors: list[str] = field(default_factory=list)
    stats: ModelStats | None = None


_lock = threading.Lock()
_serial = itertools.count()
_cached: list[Instructions | None] = []
_seen: dict[str, Seen] = {}


def instructions() -> Instructions | None:
    """This process's instructions (read once), or None when ``check`` did not ask for anything."""
    if _cached:
        return _cached[0]
    source = os.environ.get(env.CHECK)
    found = None
    if source:
        try:
            found = loads(Instructions, Path(source).read_bytes())
        except (OSError, ValueError) as exc:  # codec.Invalid too; never break the program under check
            import sys

            sys.stderr.write(f"hatch-shrinkray: ignoring {env.CHECK}={source}: {exc}\n")
    _cached.append(found)
    return found


def seen(target: Target) -> Seen:
    with _lock:
        if not _seen:
            atexit.register(flush)
        return _seen.setdefault(target.sha256, Seen())


def flush() -> Path | None:
    """Write this process's report (and forget it): sessions per target and shadow statistics."""
    check = instructions()
    with _lock:
        items = dict(_seen)
        _seen.clear()
    if check is None or not items:
        return None
    report = {sha: encode(dataclasses.replace(s, shadow_errors=s.shadow_errors[:3]))
              for sha, s in sorted(items.items())}
    directory = Path(check.reports)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{os.getpid()}.{next(_serial)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "models": report}, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def _forget_in_child() -> None:
    """A forked child starts with the parent's counts; they are the parent's to report."""
    with _lock:
        _seen.clear()


os.register_at_fork(after_in_child=_forget_in_child)
