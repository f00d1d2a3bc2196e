"""A bounded, deterministic sample of the feeds one model was run with, in one process.

The number of calls is unknown until the process ends, so calls are kept on a stride that doubles
whenever the kept samples exceed twice the bounds; at the end, samples spread evenly over those are
chosen within the bounds. Identical feeds are kept once. The same sequence of calls always keeps
the same samples (calls from several threads interleave as they happen to).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.verification.recordings import Recording, spread

MAX_SAMPLES = 32
MAX_BYTES = 8_000_000

Feed = dict[str, npt.NDArray[Any]]


@dataclass
class ModelLog:
    sha256: str
    model: str
    """The path the session was given, or ``<bytes>``."""
    inputs: tuple[str, ...]
    max_samples: int = MAX_SAMPLES
    max_bytes: int = MAX_BYTES
    calls: int = 0
    stride: int = 1
    kept: list[tuple[int, Feed]] = field(default_factory=list)
    digests: set[str] = field(default_factory=set)
    skipped: int = 0
    """Calls whose feed did not name every model input (or held values numpy cannot copy)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, feed: Any) -> None:
        with self.lock:
            index = self.calls
            self.calls += 1
            if index % self.stride:
                return
            copy = _copy(feed, self.inputs)
            if copy is None:
                self.skipped += 1
                return
            digest = _digest(copy, self.inputs)
            if digest in self.digests:
                return
            self.digests.add(digest)
            self.kept.append((index, copy))
            while len(self.kept) > 1 and (len(self.kept) > 2 * self.max_samples
                                          or _nbytes(self.kept) > 2 * self.max_bytes):
                self.stride *= 2
                self.kept = [(i, f) for i, f in self.kept if i % self.stride == 0]
                self.digests = {_digest(f, self.inputs) for _, f in self.kept}

    def recording(self) -> Recording:
        with self.lock:
            keep = spread(len(self.kept), self.max_samples)
            while len(keep) > 1 and sum(_feed_bytes(self.kept[i][1]) for i in keep) > self.max_bytes:
                keep = spread(len(self.kept), len(keep) - 1)
            return Recording(self.sha256, self.model, self.inputs, tuple(self.kept[i][1] for i in keep),
                             self.calls, tuple(self.kept[i][0] for i in keep))


def _copy(feed: Any, inputs: tuple[str, ...]) -> Feed | None:
    try:
        if set(feed) != set(inputs):
            return None
        return {name: np.array(feed[name], copy=True) for name in inputs}
    except (TypeError, ValueError):
        return None


def _digest(feed: Feed, inputs: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for name in inputs:
        a = np.ascontiguousarray(feed[name])
        h.update(f"{name}\0{a.dtype}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _feed_bytes(feed: Feed) -> int:
    return sum(int(a.nbytes) for a in feed.values())


def _nbytes(kept: list[tuple[int, Feed]]) -> int:
    return sum(_feed_bytes(f) for _, f in kept)
