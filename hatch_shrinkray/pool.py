"""A thread pool that stops promptly: when the work fails or is interrupted (Ctrl-C), the pieces not
yet started are dropped instead of all run first, which is what leaving a plain
``ThreadPoolExecutor`` does (``samples.run_in_order``'s feeds, ``auto``'s weights); and one job in
the background that an interrupted run never waits for. Work runs in a copy of its caller's context
(as ``asyncio``'s executors do), so context variables such as the words hints speak in
(:mod:`hatch_shrinkray.hints`) reach the threads."""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _InContext(ThreadPoolExecutor):
    """Each piece of work runs in a copy of the context it was submitted from (``map`` submits)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


@contextlib.contextmanager
def thread_pool(threads: int) -> Iterator[ThreadPoolExecutor]:
    """A ``ThreadPoolExecutor`` of ``threads`` that cancels its queued work when the body raises."""
    pool = _InContext(threads)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class Cancelled(Exception):
    """A background job's owner no longer wants its result (:meth:`Background.cancel`)."""


_here = threading.local()
_running: set[Background[Any]] = set()


def checkpoint() -> None:
    """Where a background job may stop: raises :class:`Cancelled` in one that was cancelled, and
    does nothing anywhere else (a job calls it between pieces of its work)."""
    job = getattr(_here, "job", None)
    if job is not None and job.cancelled:
        raise Cancelled


class Background(Generic[T]):
    """``job()`` in a daemon thread, its result (or its exception) when asked. An executor's threads
    are joined when the interpreter exits, so a build interrupted during the engine's encoding
    would first wait for the original's compression (minutes at brotli 11); a daemon thread is not.
    Nor may one outlive the interpreter: a daemon thread still in C code while the interpreter is
    torn down can crash the process, so at exit every job still running is cancelled and joined (it
    stops at its next :func:`checkpoint`)."""

    def __init__(self, job: Callable[[], T]) -> None:
        self._future: Future[T] = Future()
        self._cancel = threading.Event()

        def run() -> None:
            _here.job = self
            try:
                self._future.set_result(job())
            except BaseException as exc:  # handed to whoever asks for the result
                self._future.set_exception(exc)
            finally:
                _running.discard(self)

        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                                        name="hatch-shrinkray-background")
        _running.add(self)
        self._thread.start()

    def result(self) -> T:
        return self._future.result()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """The result is not wanted (any more): the job stops at its next checkpoint."""
        self._cancel.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


EXIT_WAIT = 30.0
"""Seconds the interpreter's exit waits for a cancelled job to reach its next checkpoint."""


@atexit.register
def _stop_running() -> None:
    """At interpreter exit (before it is torn down), no background job may still be running."""
    jobs = list(_running)
    for job in jobs:
        job.cancel()
    for job in jobs:
        job.join(EXIT_WAIT)
