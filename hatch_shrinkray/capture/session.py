"""Instrumenting ``onnxruntime.InferenceSession`` (the class itself, so every reference to it, old
or new, is covered): each session learns which model it runs (sha256 of the bytes it was given) and
each ``run()`` that succeeded is shown to that model's log, with the stream step ``StreamTracker``
sees and the unit (test) it ran in; a ``run()`` that raised is only counted. At process exit this
process's logs are written into the run directory, one part per model, for ``run.finish`` to merge,
then the process's report (``capture.process``). Nothing here may break the program: a failure to
observe or to write is counted or reported in one line, never raised.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hatch_shrinkray.capture import env, process, swap, units
from hatch_shrinkray.capture.parts import write_part
from hatch_shrinkray.capture.recorder import ModelLog, part_of
from hatch_shrinkray.capture.streams import Step, StreamTracker
from hatch_shrinkray.errors import one_line
from hatch_shrinkray.recording.caps import MAX_BYTES, MAX_MEMORY, MAX_SAMPLES, Caps
from hatch_shrinkray.recording.format import BYTES_MODEL, SHA_DIGITS

if TYPE_CHECKING:
    from hatch_shrinkray.capture.shadow import ModelStats

_ATTR = "_hatch_shrinkray_model"
_OUTPUTS = "_hatch_shrinkray_outputs"
_TWIN = "_hatch_shrinkray_twin"
_logs: dict[str, ModelLog] = {}
_lock = threading.Lock()
_serial = itertools.count()
_instrumented: set[int] = set()
_tracker = StreamTracker()


def model_identity(path_or_bytes: Any) -> tuple[str, str] | None:
    """(sha256, label) of what a session is created from: a path (read here) or serialized bytes."""
    try:
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            return hashlib.sha256(path_or_bytes).hexdigest(), BYTES_MODEL
        path = os.fspath(path_or_bytes)
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest(), os.path.abspath(path)  # made project-relative when the parts are merged
    except (OSError, TypeError, ValueError):
        return None


def instrument(module: ModuleType) -> None:
    cls = module.InferenceSession
    if id(cls) in _instrumented:
        return
    _instrumented.add(id(cls))
    process.onnxruntime_imported()
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
        given = target.shrunk if target is not None and check is not None and check.load == "shrunk" else path_or_bytes
        init(self, given, *args, **kwargs)
        if target is not None and check is not None:
            def make_twin(other: Any) -> Any:  # the unpatched __init__: the twin is neither swapped nor recorded
                twin = cls.__new__(cls)
                init(twin, other, *args, **kwargs)
                return twin

            _watch(self, target, check, path_or_bytes if given is not path_or_bytes else target.shrunk, make_twin)
        if os.environ.get(env.RECORD):
            _record_session(self, identity)

    @functools.wraps(run)
    def run_(self: Any, output_names: Any, input_feed: Any, *args: Any, **kwargs: Any) -> Any:
        log = getattr(self, _ATTR, None)
        if log is None:
            out = run(self, output_names, input_feed, *args, **kwargs)
        else:
            try:
                out = run(self, output_names, input_feed, *args, **kwargs)
            except Exception:
                log.rejected()
                raise
            _observe(self, log, output_names, input_feed, out)
        twin = getattr(self, _TWIN, None)
        if twin is not None:
            twin.compare(self, output_names, input_feed, out,
                         lambda other, feed: run(other, output_names, feed, *args, **kwargs))
        return out

    cls.__init__ = __init__
    cls.run = run_


class _Twin:
    """The other model of a shadowed session, and where its comparisons go.

    Closed loop: when a call continues a stream (``StreamTracker``: an input is bitwise an output the
    session returned, a recurrent state fed back), the twin is fed *its own* output of that stream's
    last step there instead, so it runs the whole stream on its own state, as the program would run
    it. Each stream is one unit of the evidence; a call of a model without state is a unit of its own."""

    OPEN = 64
    """Streams whose last outputs the twin remembers at once (interleaved streams on one session)."""

    def __init__(self, session: Any, stats: ModelStats, original_first: bool, threshold: float,
                 judges: tuple[tuple[str, str], ...] = ()) -> None:
        self.session = session
        self.stats = stats
        self.original_first = original_first
        self.threshold = threshold
        self.judges = dict(judges)
        self.lock = threading.Lock()
        self.tracker = StreamTracker()
        self.own: dict[int, dict[str, Any]] = {}
        """By stream: the twin's outputs at the stream's last step."""
        self.states: set[str] = set()
        """Outputs seen fed back as inputs: recurrent state, judged by its numbers only."""

    def compare(self, primary: Any, output_names: Any, feed: Any, out: Any, run: Callable[[Any, Any], Any]) -> None:
        """Run the twin on the same feed (its own state where the feed continues a stream) and
        compare, the original's outputs as the reference. A twin that fails is counted, never
        raised: the program under check must not notice."""
        with self.lock:
            try:
                names = list(output_names) if output_names else [o.name for o in primary.get_outputs()]
                step = self.tracker.before(primary, feed)
                own = self.own.pop(step.stream, None)
                if step.feedback and own is not None:
                    self.states |= {o for _, o in step.feedback}
                    feed = {**feed, **{inp: own[o] for inp, o in step.feedback if o in own}}
                other = run(self.session, feed)
                self.tracker.after(primary, names, out)
            except Exception as exc:
                self.stats.failed(f"{type(exc).__name__}: {exc}"[:300])
                return
            self.own[step.stream] = dict(zip(names, other, strict=False))
            while len(self.own) > self.OPEN:
                del self.own[next(iter(self.own))]
            ref, got = (out, other) if self.original_first else (other, out)
            self.stats.observe(names, list(ref), list(got), self.threshold, unit=f"{id(self)}:{step.stream}",
                               continued=step.step > 0, states=frozenset(self.states), judges=self.judges,
                               feed=feed)


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
    setattr(session, _TWIN, _Twin(twin, seen.stats, check.load == "original", check.threshold, target.judges))


def _record_session(session: Any, identity: Callable[[], tuple[str, str] | None]) -> None:
    try:
        known = identity()
        if known is None:
            return
        inputs = session.get_inputs()
        outputs = session.get_outputs()
        recurrent = any(_may_feed(o, i) for o in outputs for i in inputs)
    except Exception:
        return
    process.stats["sessions"] += 1
    setattr(session, _ATTR, _log_for(known, tuple(i.name for i in inputs)))
    setattr(session, _OUTPUTS, tuple(o.name for o in outputs) if recurrent else None)


def _may_feed(output: Any, given: Any) -> bool:
    """Whether ``output`` could come back as ``given`` by its declared type and shape (symbolic
    dimensions match anything): a classifier's ``[batch, 10]`` scores never become its ``[batch, 256]``
    input, so its calls skip stream detection."""
    if output.type != given.type or len(output.shape) != len(given.shape):
        return False
    return all(not isinstance(a, int) or not isinstance(b, int) or a == b for a, b in zip(output.shape, given.shape,
                                                                                          strict=True))


_ALONE = Step(-1, 0, ())
"""The step of every call of a model whose outputs can never be fed back."""


def _observe(session: Any, log: ModelLog, output_names: Any, feed: Any, outputs: Any) -> None:
    """Show a successful call to its model's log; a failure here is counted, never raised."""
    try:
        process.called()
        names = getattr(session, _OUTPUTS, None)
        if names is None:
            log.observe(feed, _ALONE, units.current(), False)
            return
        step = _tracker.before(session, feed)
        candidate = _tracker.after(session, output_names or names, outputs)
        log.observe(feed, step, units.current(), candidate)
    except Exception as exc:
        log.failed(exc)


def _log_for(identity: tuple[str, str], inputs: tuple[str, ...]) -> ModelLog:
    sha, label = identity
    with _lock:
        log = _logs.get(sha)
        if log is None:
            log = _logs[sha] = ModelLog(sha, label, inputs, caps())
        elif log.model == BYTES_MODEL and label != BYTES_MODEL:
            log.model = label  # a path is more use to people than "<bytes>"
        return log


def caps() -> Caps:
    """The bounds ``record`` set for this run (its defaults where a variable is missing or wrong)."""
    max_bytes = _bound(env.RECORD_BYTES, MAX_BYTES)
    return Caps(_bound(env.RECORD_SAMPLES, MAX_SAMPLES), max_bytes,
                max(max_bytes, _bound(env.RECORD_CEILING, max_bytes)), _bound(env.RECORD_MEMORY, MAX_MEMORY))


def _bound(variable: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(variable, default)))
    except ValueError:
        return default


def flush() -> list[Path]:
    """Write this process's logs into the run directory (one part per model), forget them, and
    report. Never raises: a failed write (a full disk) is one line on stderr and in the report."""
    directory = process.directory()
    with _lock:
        logs = list(_logs.values())
        _logs.clear()
    if directory is None:
        return []
    written: list[Path] = []
    errors: list[str] = []
    for log in logs:
        try:
            meta, samples = part_of(log)
            if not meta.calls and not meta.skipped:
                continue
            path = directory / f"{log.sha256[:SHA_DIGITS]}.{os.getpid()}.{next(_serial)}.part"
            write_part(path, meta, samples)
            written.append(path)
        except Exception as exc:
            why = one_line(exc) if not isinstance(exc, OSError) else (exc.strerror or one_line(exc))
            errors.append(f"{Path(log.model).name}: {why}")
            with contextlib.suppress(Exception):
                sys.stderr.write(f"hatch-shrinkray: could not write the recording of {Path(log.model).name}: "
                                 f"{why}\n")
    process.report([p.name for p in written], errors)
    return written


def _forget_in_child() -> None:
    """A forked child starts with the parent's logs; they are the parent's to write."""
    with _lock:
        _logs.clear()


os.register_at_fork(after_in_child=_forget_in_child)
