"""A thread pool that stops promptly: when the work fails or is interrupted (Ctrl-C), the pieces not
yet started are dropped instead of all run first, which is what leaving a plain
``ThreadPoolExecutor`` does (``samples.run_in_order``'s feeds, ``auto``'s weights)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor


@contextlib.contextmanager
def thread_pool(threads: int) -> Iterator[ThreadPoolExecutor]:
    """A ``ThreadPoolExecutor`` of ``threads`` that cancels its queued work when the body raises."""
    pool = ThreadPoolExecutor(threads)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
