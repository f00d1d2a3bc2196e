"""The engine's own linear algebra on one BLAS thread, and onnxruntime sessions that do not spin.

Output-aware rounding and ``auto`` multiply matrices of a few hundred to a few thousand rows (GPTQ,
the calibration moments, the scale trials): a second BLAS thread saves little there, and on a loaded
machine (a CI runner, a parallel build, the shared benchmark VM) OpenBLAS's busy-waiting threads made
``int8`` with real inputs take several times the CPU time and more wall time.
One thread also makes the sums, hence the chosen codes, the same whatever the number of cores.
onnxruntime's worker threads busy-wait between operators by default in the same way; the engine's
sessions run hundreds of short calls, so they sleep instead (``NO_SPINNING``; numerics unchanged).
Independent pieces of work (the feeds of one check, the candidates of different weights) run on up
to ``MAX_WORKERS`` threads at once, as onnxruntime and numpy let go of the interpreter lock; each
piece still runs alone on one thread, so the results (the shrunk bytes) are the same whatever the
number of workers, only sooner.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

NO_SPINNING = ("session.intra_op.allow_spinning", "0")
"""onnxruntime session config entry: idle worker threads sleep instead of spinning."""


def one_blas_thread() -> Any:
    """A context manager limiting BLAS (numpy's matrix products) to one thread in this process;
    BLAS as configured where threadpoolctl is missing (an engine installed without its extra's
    dependencies, e.g. ``pip install --no-deps``): slower on a loaded machine, not wrong."""
    try:
        from threadpoolctl import threadpool_limits
    except ModuleNotFoundError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def cores() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it, as in a container)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # macOS, Windows
        return max(os.cpu_count() or 1, 1)


MAX_WORKERS = 4
"""Threads the engine runs at once at most (feeds, weights): each holds its own activations or
copies of a weight, which for a big model are big."""


def workers() -> int:
    """Threads for independent pieces of work: one per core, up to ``MAX_WORKERS``."""
    return min(cores(), MAX_WORKERS)


def feed_workers(feeds: int) -> int:
    """How many feeds a session that runs ``feeds`` of them at a time should run at once: one per
    core (up to ``MAX_WORKERS``) when there are at least two per worker, each on one
    onnxruntime thread (on a small machine that takes less wall and CPU time than running them one
    after the other on several intra-op threads); 1 (onnxruntime's own threads) for fewer
    feeds."""
    n = workers()
    return n if n > 1 and feeds >= 2 * n else 1

