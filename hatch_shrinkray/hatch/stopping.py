"""Ctrl-C and SIGTERM during a build with the hook: one line, a non-zero exit, nothing left behind.

A frontend runs the build backend in a process of its own, and a terminal sends Ctrl-C to every
process of the build at once; what the backend prints is what the user reads. So while a hook is
live (``initialize`` to ``finalize``) one handler serves every live hook of the process (hatchling
may hold several: sdist then wheel in one process; ``--hooks-only`` or a failed archive never
reaches ``finalize``) and is put back when the last one leaves:

* inside ``initialize`` the signal unwinds the work as an exception (KeyboardInterrupt, or
  :class:`Terminated`), so every cleanup on the way runs (staging files, cache temporaries); the
  hook then removes every live work directory and stops;
* while hatchling writes an archive, the handler removes the work directories and the unfinished
  archive (hatchling would leave its temporary file, or a partial copy of it in the output
  directory), and stops.

A frontend that gets Ctrl-C with its backend kills the backend a quarter of a second later (what
``subprocess.run`` does), and a backend busy in a long C call (``import onnxruntime``, a session
of a large model) cannot clean up by then: a :class:`Reaper` removes its work directory after it.

Stopping is one line (``shrinkray: interrupted``), then exit 130 for Ctrl-C (as the command line,
and as ``hatch build`` then reports it) or death by SIGTERM, as callers of a terminated process
expect. No traceback: the user asked for the stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from types import FrameType
from typing import ClassVar, NoReturn, Protocol

from hatch_shrinkray.shipping.display import PREFIX
from hatch_shrinkray.signals import HANDLED, STOPPED, Terminated, on_signal, redeliver, stop_request

INTERRUPTED = 130
"""The exit status of a process Ctrl-C stopped, as a shell reports one (128 + SIGINT)."""
HATCHLING_ARCHIVES = ("hatchling/builders/wheel.py", "hatchling/builders/sdist.py")
HATCHLING_MOVE = "hatchling/builders/utils.py"


class Live(Protocol):
    """A hook between ``initialize`` and ``finalize``."""

    initializing: bool

    def cleanup(self) -> None:
        """Remove its work directory (and leave the guard)."""


class Guard:
    """The one handler of SIGINT and SIGTERM for every live hook of the process."""

    live: ClassVar[list[Live]] = []
    restores: ClassVar[list[Callable[[], None]]] = []

    @classmethod
    def enter(cls, hook: Live) -> None:
        if not cls.live:
            cls.restores = [r for r in (on_signal(s, cls.handle) for s in HANDLED) if r is not None]
        if hook not in cls.live:
            cls.live.append(hook)

    @classmethod
    def leave(cls, hook: Live) -> None:
        if hook in cls.live:
            cls.live.remove(hook)
        if not cls.live:
            for restore in cls.restores:
                restore()
            cls.restores = []

    @classmethod
    def handle(cls, signum: int, frame: FrameType | None) -> None:
        if any(hook.initializing for hook in cls.live):
            raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)
        _remove_unfinished_archive(frame)
        stop(signum)


def stop(signum: int) -> NoReturn:
    """Remove every live hook's work directory, say so in one line, and end the process."""
    for hook in list(Guard.live):
        hook.cleanup()
    print(f"{PREFIX} {STOPPED[signum]}", file=sys.stderr, flush=True)
    if signum != signal.SIGINT:
        redeliver(signum)
    raise SystemExit(INTERRUPTED)


def stopping(exc: BaseException) -> None:
    """End the process if ``exc`` is a stop request (Ctrl-C or SIGTERM, even surfacing as another
    error, as during ``import onnxruntime``); otherwise return."""
    request = stop_request(exc)
    if isinstance(request, Terminated):
        stop(request.signum)
    if isinstance(request, KeyboardInterrupt):
        stop(signal.SIGINT)


REAPER = ("import os, shutil, signal, sys\n"
          "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
          "while os.read(0, 1):\n"
          "    pass\n"
          "shutil.rmtree(sys.argv[1], ignore_errors=True)\n")
"""The reaper's program: wait for the pipe to close, then remove the directory if it is still there."""


class Reaper:
    """Removes a directory once this process lets go of it, however the process ends (a SIGKILL
    included): a small process of its own session (a terminal's Ctrl-C does not reach it) waits
    for a pipe from this one to close, at :meth:`release` or when this process dies, then removes
    what is left. Where it cannot start (Windows, no process groups to interrupt at once; no
    resources), the in-process cleanup is all there is."""

    def __init__(self, path: str) -> None:
        self._pipe: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        if os.name == "nt":
            return
        read, self._pipe = os.pipe()  # not inherited by this process's other children
        try:
            self._process = subprocess.Popen([sys.executable, "-I", "-S", "-c", REAPER, path], stdin=read,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)
        except OSError:
            os.close(self._pipe)
            self._pipe = None
        finally:
            os.close(read)

    def release(self) -> None:
        """The directory is gone: the reaper removes nothing and ends (waited for, no zombie)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=10)
            self._process = None


def _remove_unfinished_archive(frame: FrameType | None) -> None:
    """The archive hatchling is writing (its temporary file) or moving into the output directory
    (a copy across file systems can be partial): it is not finished, and no one else removes it.
    Found by the local names of hatchling's own code on the interrupted stack."""
    while frame is not None:
        filename = frame.f_code.co_filename.replace(os.sep, "/")
        names = frame.f_locals
        paths: list[object] = []
        if filename.endswith(HATCHLING_MOVE) and frame.f_code.co_name == "replace_file":
            paths = [names.get("dst"), names.get("src")]
        elif filename.endswith(HATCHLING_ARCHIVES) and "archive" in names:
            paths = [getattr(names["archive"], "path", None)]
        for path in paths:
            if isinstance(path, str):
                with contextlib.suppress(OSError):
                    os.remove(path)
        frame = frame.f_back
