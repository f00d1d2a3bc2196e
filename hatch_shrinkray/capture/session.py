"""Instrumenting ``onnxruntime.InferenceSession`` (the class itself, so every reference to it, old
or new, is covered): each session learns which model it runs (sha256 of the bytes it was given) and
each ``run()`` is shown to that model's log. What happens at process exit: this process's logs are
written into the record directory, one part per model, for ``run.finish`` to merge.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hatch_shrinkray.capture import env, swap
from hatch_shrinkray.capture.env import MAX_BYTES, MAX_SAMPLES
from hatch_shrinkray.capture.recorder import ModelLog
from hatch_shrinkray.verification.recordings import SHA_DIGITS, write_recording

if TYPE_CHECKING:
    from hatch_shrinkray.capture.shadow import ModelStats

PARTS = ".parts"
_ATTR = "_hatch_shrinkray_model"
_TWIN = "_hatch_shrinkray_twin"
_logs: dict[str, ModelLog] = {}
_lock = threading.Lock()
_serial = itertools.count()
_instrumented: set[int] = set()


def model_identity(path_or_bytes: Any) -> tuple[str, str] | None:
    """(sha256, label) of what a session is created from: a path (read here) or serialized bytes."""
    try:
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            return hashlib.sha256(path_or_bytes).hexdigest(), "<bytes>"
        path = os.fspath(path_or_bytes)
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest(), str(path)
    except (OSError, TypeError):
        return None


def instrument(module: ModuleType) -> None:
    cls = module.InferenceSession
    if id(cls) in _instrumented:
        return
    _instrumented.add(id(cls))
    init, run = cls.__init__, cls.run

    @functools.wraps(init)
    def __init__(self: Any, path_or_bytes: Any, *args: Any, **kwargs: Any) -> None:
        known: list[tuple[str, str] | None] = []

        def identity() -> tuple[str, str] | None:
            if not known:
                known.append(model_identity(path_or_bytes))
            return known[0]

        check = swap.instructions()
        target = check.find(path_or_bytes, lambda: (identity() or ("", ""))[0]) if check is not None else None
        given = path_or_bytes
        if target is not None and check is not None and check.load == "shrunk":
            given = target.shrunk
        init(self, given, *args, **kwargs)
        if target is not None and check is not None:
            def make_twin(other: Any) -> Any:  # the unpatched __init__: the twin is neither swapped nor recorded
                twin = cls.__new__(cls)
                init(twin, other, *args, **kwargs)
                return twin

            _watch(self, target, check, path_or_bytes if given is not path_or_bytes else target.shrunk, make_twin)
        if os.environ.get(env.RECORD) and identity() is not None:
            setattr(self, _ATTR, _log_for(identity(), tuple(i.name for i in self.get_inputs())))  # type: ignore[arg-type]

    @functools.wraps(run)
    def run_(self: Any, output_names: Any, input_feed: Any, *args: Any, **kwargs: Any) -> Any:
        log = getattr(self, _ATTR, None)
        if log is not None:
            log.observe(input_feed)
        out = run(self, output_names, input_feed, *args, **kwargs)
        twin = getattr(self, _TWIN, None)
        if twin is not None:
            twin.compare(self, output_names, input_feed, out,
                         lambda other, feed: run(other, output_names, feed, *args, **kwargs))
        return out

    cls.__init__ = __init__
    cls.run = run_


class _Twin:
    """The other model of a shadowed session, and where its comparisons go.

    Closed loop: when a call continues a stream (an input is bitwise the output the session gave on
    its previous call, as a recurrent state fed back), the twin is fed *its own* previous output
    there instead, so it runs the whole stream on its own state, as the program would run it. Each
    stream is one unit of the evidence; calls outside streams are a unit each."""

    def __init__(self, session: Any, stats: ModelStats, original_first: bool, threshold: float) -> None:
        self.session = session
        self.stats = stats
        self.original_first = original_first
        self.threshold = threshold
        self.lock = threading.Lock()
        self.previous: dict[str, Any] = {}
        """The primary session's outputs on its previous call."""
        self.own: dict[str, Any] = {}
        """The twin's outputs on that call."""
        self.stream = -1
        self.states: set[str] = set()
        """Outputs seen fed back as inputs: recurrent state, judged by its numbers only."""

    def compare(self, primary: Any, output_names: Any, feed: Any, out: Any, run: Callable[[Any, Any], Any]) -> None:
        """Run the twin on the same feed (its own state where the feed continues a stream) and
        compare, the original's outputs as the reference. A twin that fails is counted, never
        raised: the program under check must not notice."""
        with self.lock:
            try:
                names = list(output_names) if output_names else [o.name for o in primary.get_outputs()]
                fed_back = _continued(feed, self.previous)
                self.states |= {o for _, o in fed_back}
                if fed_back:
                    feed = {**feed, **{inp: self.own[o] for inp, o in fed_back}}
                else:
                    self.stream += 1
                other = run(self.session, feed)
            except Exception as exc:
                self.stats.failed(f"{type(exc).__name__}: {exc}"[:300])
                self.previous, self.own = {}, {}
                return
            self.previous, self.own = dict(zip(names, out, strict=False)), dict(zip(names, other, strict=False))
            ref, got = (out, other) if self.original_first else (other, out)
            # A call that continues nothing starts a unit of its own (a stream of one call, for a
            # model without state); the steps that continue it belong to the same unit.
            self.stats.observe(names, list(ref), list(got), self.threshold, unit=f"{id(self)}:{self.stream}",
                               continued=bool(fed_back), states=frozenset(self.states))


def _continued(feed: Any, previous: dict[str, Any]) -> list[tuple[str, str]]:
    """(input, output) pairs where this call's input is bitwise the previous call's output."""
    import numpy as np

    if not previous:
        return []
    pairs = []
    try:
        items = list(feed.items())
    except AttributeError:
        return []
    for name, value in items:
        a = value if isinstance(value, np.ndarray) else None
        if a is None:
            continue
        for out_name, prev in previous.items():
            if isinstance(prev, np.ndarray) and prev.shape == a.shape and prev.dtype == a.dtype \
                    and np.array_equal(prev, a):
                pairs.append((name, out_name))
                break
    return pairs


def _watch(session: Any, target: swap.Target, check: swap.Instructions, other: Any,
           make_twin: Callable[[Any], Any]) -> None:
    """Count the session; for shadow runs, create the twin from ``other`` with the same options."""
    from hatch_shrinkray.capture.shadow import ModelStats

    seen = swap.seen(target)
    with _lock:
        seen.sessions += 1
        seen.swapped += check.load == "shrunk"
        if check.shadow and seen.stats is None:
            seen.stats = ModelStats()
    if not check.shadow or seen.stats is None:
        return
    try:
        twin = make_twin(other)
    except Exception as exc:
        with _lock:
            seen.shadow_errors.append(f"{type(exc).__name__}: {exc}"[:300])
        return
    with _lock:
        seen.shadowed += 1
    setattr(session, _TWIN, _Twin(twin, seen.stats, check.load == "original", check.threshold))


def _log_for(identity: tuple[str, str], inputs: tuple[str, ...]) -> ModelLog:
    sha, label = identity
    with _lock:
        log = _logs.get(sha)
        if log is None:
            if not _logs:
                atexit.register(flush)
            log = _logs[sha] = ModelLog(sha, label, inputs, _bound(env.RECORD_SAMPLES, MAX_SAMPLES),
                                        _bound(env.RECORD_BYTES, MAX_BYTES))
        elif log.model == "<bytes>" and label != "<bytes>":
            log.model = label  # a path is more use to people than "<bytes>"
        return log


def _bound(variable: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(variable, default)))
    except ValueError:
        return default


def flush() -> list[Path]:
    """Write this process's logs into the record directory (one part per model) and forget them."""
    target = os.environ.get(env.RECORD)
    with _lock:
        logs = list(_logs.values())
        _logs.clear()
    if not target or not logs:
        return []
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for log in logs:
        rec = log.recording()
        if rec.samples:
            name = f"{log.sha256[:SHA_DIGITS]}.{os.getpid()}.{next(_serial)}.npz"
            written.append(write_recording(directory, rec, name=name))
    return written


def _forget_in_child() -> None:
    """A forked child starts with the parent's logs; they are the parent's to write."""
    with _lock:
        _logs.clear()


os.register_at_fork(after_in_child=_forget_in_child)
