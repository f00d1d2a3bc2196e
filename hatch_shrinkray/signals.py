"""SIGTERM handled like Ctrl-C, so that a terminated run cleans up after itself.

Python turns SIGINT into KeyboardInterrupt, and every ``finally`` and ``except BaseException``
then removes staging files; SIGTERM (what ``kill``, CI timeouts and container stops send) kills
the process on the spot and leaves them. ``terminate_raises`` makes SIGTERM raise ``Terminated``
instead; whoever catches it cleans up and calls ``redeliver`` so the process still dies by the
signal (exit status 143 in a shell) as callers expect.

``deferred`` holds SIGINT/SIGTERM back for a few statements that create a file and take
ownership of it (``mkdtemp`` then the assignment): a signal in between would leak the file.
Handlers can only be changed in the main thread; elsewhere both are no-ops (signals are only
ever handled in the main thread anyway).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)
STOPPED: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
"""The one line a stopped run prints (the command line's, and the build's after its prefix)."""


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException, like KeyboardInterrupt: a request to stop, not an error)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


DEFAULTS: dict[int, Any] = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
"""What Python starts with: Ctrl-C raises KeyboardInterrupt, SIGTERM kills."""


def on_signal(signum: int, handler: Callable[[int, FrameType | None], Any]) -> Callable[[], None] | None:
    """Install ``handler`` for ``signum`` (SIGINT or SIGTERM), and :func:`_never_lost` for what it
    raises; returns how to put both back, or ``None`` when nothing was installed (not the main thread,
    or someone else already handles or ignores it: a shell runs background jobs with SIGINT ignored)."""
    if not _main_thread() or signal.getsignal(signum) is not DEFAULTS[signum]:
        return None
    signal.signal(signum, handler)
    previous = sys.unraisablehook
    sys.unraisablehook = _never_lost(previous)

    def restore() -> None:
        if _main_thread():
            signal.signal(signum, DEFAULTS[signum])
        if getattr(sys.unraisablehook, "previous", None) is previous:
            sys.unraisablehook = previous

    return restore


REDELIVERY = 0.02
"""Seconds after a stop request was swallowed before it is delivered again."""


def _never_lost(previous: Callable[[Any], object]) -> Callable[[Any], object]:
    """An ``unraisablehook`` that delivers again a stop request a finalizer swallowed.

    Python runs signal handlers between any two bytecodes of the main thread, finalizers included
    (``__del__``, ``weakref.finalize``: a temporary directory's cleanup, a garbage collection); what
    the handler raises there is printed as "Exception ignored" and dropped, and the run went on as if
    nobody had asked it to stop, to exit normally much later. Here the request is delivered again a
    moment later (the signal itself, sent to this process from a timer thread), when the main thread
    is most likely out of the finalizer; should it land in one again, it comes back here again. A
    real signal, not ``_thread.interrupt_main``: by then the handler may be Python's default again
    (between two commands' handling), and a SIGTERM nobody handles must still end the process."""
    def hook(unraisable: Any) -> object:
        stop = unraisable.exc_value
        if isinstance(stop, (Terminated, KeyboardInterrupt)):
            signum = stop.signum if isinstance(stop, Terminated) else signal.SIGINT
            timer = threading.Timer(REDELIVERY, os.kill, args=(os.getpid(), signum))
            timer.daemon = True
            timer.start()
            return None
        return previous(unraisable)

    hook.previous = previous  # type: ignore[attr-defined]
    return hook


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Within, SIGTERM raises ``Terminated`` (unless someone else already handles or ignores it)."""
    restore = on_signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        if restore is not None:
            restore()


def stop_request(exc: BaseException) -> BaseException | None:
    """The ``Terminated`` or ``KeyboardInterrupt`` behind ``exc``, if any. A signal that lands while
    a C extension initialises (the first ``import onnxruntime`` takes a while) raises inside the
    initialisation, which reports it as ``ImportError: initialization failed`` caused by it: that is
    still a request to stop, not an error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (Terminated, KeyboardInterrupt)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def stopped(stop: BaseException) -> int:
    """How a command ends on a stop request: Ctrl-C, one line and 130; SIGTERM, one line, then death
    by the signal itself (143 in a shell), as callers expect."""
    if isinstance(stop, Terminated):
        print(STOPPED[stop.signum], file=sys.stderr)
        redeliver(stop.signum)
        return 128 + stop.signum
    print(STOPPED[signal.SIGINT], file=sys.stderr)
    return 128 + signal.SIGINT


def redeliver(signum: int) -> None:
    """Die by ``signum`` with the default action, as if it had never been caught (after flushing
    what was printed: death by a signal skips Python's own flush)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block is done, then deliver them to the usual handler."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []
    previous: dict[int, Callable[[int, FrameType | None], Any]] = {}
    for signum in HANDLED:
        handler = signal.getsignal(signum)
        if callable(handler):  # SIG_DFL and SIG_IGN need no deferring: they never raise
            previous[signum] = handler
            signal.signal(signum, lambda s, f: pending.append(s))
    try:
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        for arrived in dict.fromkeys(pending):
            signal.raise_signal(arrived)
