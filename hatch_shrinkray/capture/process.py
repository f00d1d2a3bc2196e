"""Which processes of a ``record`` run reported, so that "nothing ran" and "a process ended without
letting us write" are told apart. Standard library and ``codec`` only: this runs at interpreter start.

Every Python process that starts with recording on leaves ``<pid>-<token>.boot`` in the run
directory, ``<pid>-<token>.ort`` once it imports onnxruntime and ``<pid>-<token>.run`` at its first
recorded call; at exit it writes ``<pid>-<token>.done``, its ``Report``. A ``.run`` marker without
its report is a process that ran models and ended through ``os._exit``, a signal or a crash, or
could not write even its report (a full disk): its calls are lost. A process that ran no model had
nothing to lose. A forked child gets its own token.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray.capture import env
from hatch_shrinkray.codec import encode

_token: list[str] = []
_reported: set[str] = set()
stats: dict[str, Any] = {"onnxruntime": False, "sessions": 0, "calls": 0}


@dataclass(frozen=True)
class Report:
    """Whether it imported onnxruntime, the sessions it created, the calls it saw (``stats``), the parts it
    wrote and any error while writing them."""

    pid: int
    onnxruntime: bool
    sessions: int
    calls: int
    parts: tuple[str, ...]
    errors: tuple[str, ...]


def directory() -> Path | None:
    target = os.environ.get(env.RECORD)
    return Path(target) if target else None


def started() -> None:
    """Leave this process's boot marker (once per process, again in a forked child)."""
    target = directory()
    if target is None or (_token and _token[0].startswith(f"{os.getpid()}-")):
        return
    if not _token:
        atexit.register(_at_exit)
    _token[:] = [f"{os.getpid()}-{secrets.token_hex(4)}"]
    _mark("boot")
    if stats["onnxruntime"]:  # a forked child of a process that uses onnxruntime
        _mark("ort")


def onnxruntime_imported() -> None:
    """Called when onnxruntime is instrumented in this process."""
    stats["onnxruntime"] = True
    _mark("ort")


def called() -> None:
    """Counts a recorded call; the first one of this process leaves its ``.run`` marker."""
    stats["calls"] += 1
    if stats["calls"] == 1:
        _mark("run")


def _mark(kind: str) -> None:
    target = directory()
    if target is None or not _token:
        return
    with contextlib.suppress(OSError):  # the report at exit says what went wrong, if it can
        os.close(os.open(target / f"{_token[0]}.{kind}", os.O_WRONLY | os.O_CREAT, 0o666))


def report(parts: list[str], errors: list[str]) -> None:
    """Write this process's exit report (once per token); never raises."""
    target = directory()
    if target is None or not _token or _token[0] in _reported:
        return
    _reported.add(_token[0])
    data = Report(os.getpid(), parts=tuple(sorted(parts)), errors=tuple(errors), **stats)
    path = target / f"{_token[0]}.done"
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(encode(data), sort_keys=True), encoding="utf-8")
        tmp.replace(path)


def _at_exit() -> None:
    """Write what this process recorded (if it loaded the recorder at all), then the report."""
    session = sys.modules.get("hatch_shrinkray.capture.session")
    if session is not None:
        session.flush()
    else:
        report([], [])


def forked() -> None:
    """A forked child: counts start again, under a token of its own. A ``multiprocessing`` worker
    ends with ``os._exit`` after running its finalizers, so it also writes from one of those."""
    stats.update(sessions=0, calls=0)
    if not _token:
        return
    started()
    util = sys.modules.get("multiprocessing.util")
    if util is not None:  # a worker clears finalizers when it starts, then runs its after-fork hooks
        util.register_after_fork(_ANCHOR, _finalize_in_worker)


class _Anchor:
    """What ``multiprocessing``'s after-fork registry holds on to (it keeps weak references)."""


_ANCHOR = _Anchor()


def _finalize_in_worker(_: object) -> None:
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.Finalize(None, _at_exit, exitpriority=0)


os.register_at_fork(after_in_child=forked)
