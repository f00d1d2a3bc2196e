"""A thread pool that stops promptly: when the work fails or is interrupted (Ctrl-C), the pieces not
yet started are dropped instead of all run first, which is what leaving a plain
``ThreadPoolExecutor`` does (``samples.run_in_order``'s feeds, ``auto``'s weights); and one job in
the background that an interrupted run never waits for. Work runs in a copy of its caller's context
(as ``asyncio``'s executors do), so context variables such as the words hints speak in
(:mod:`hatch_shrinkray.hints`) reach the threads."""

from __future__ import annotations

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


class Background(Generic[T]):
    """``job()`` in a daemon thread, its result (or its exception) when asked. An executor's threads
    are joined when the interpreter exits, so a build interrupted during the engine's encoding
    would first wait for the original's compression (minutes at brotli 11); a daemon thread is not."""

    def __init__(self, job: Callable[[], T]) -> None:
        self._future: Future[T] = Future()

        def run() -> None:
            try:
                self._future.set_result(job())
            except BaseException as exc:  # handed to whoever asks for the result
                self._future.set_exception(exc)

        threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                         name="hatch-shrinkray-background").start()

    def result(self) -> T:
        return self._future.result()
