"""Telling recurrent (streaming) models apart at run time: an input of a call that is bitwise equal to
an output of an earlier call of the same session object is *fed back* (a VAD's ``stateN``
returns as ``state``). Calls chained that way form a *stream*; the first call of a stream holds every
input, the later ones are computed from the previous step's outputs. An output bitwise equal to an
input of its own call is a *pass-through* (an encoder handing its mask on), not state: it is never
taken for feedback, however often the next call gets the same values.

Per session object the tracker keeps the outputs of the last calls whose shape and dtype equal one of
that call's inputs (the only ones that can come back), by reference and with a CRC32 of their bytes
taken when they were returned (so an output the program changed in place is not mistaken for the
one the model computed). Several streams may run interleaved on one session (a server with one
session for many audio streams): each open stream end is remembered, the most recent
``OPEN_ENDS`` of them and at most ``OPEN_BYTES`` of outputs. A call continues the stream whose end it
matches; once a stream has fed something back, a call continues it only if it feeds back the same
inputs from the same outputs. Anything else starts a new stream (step 0).

Standard library and numpy only; thread-safe. Used by the recorder (``capture.recorder``) and, for
closed-loop comparisons, by the shadow twin.
"""

from __future__ import annotations

import itertools
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

OPEN_ENDS = 64
OPEN_BYTES = 64_000_000

Pairs = tuple[tuple[str, str], ...]


class Step(NamedTuple):
    stream: int
    """Number of the stream in this tracker, in the order streams started."""
    step: int
    """0 for the call that started the stream."""
    feedback: Pairs
    """(input, output) pairs this call was fed back through; empty at step 0."""


class _End:
    """The last call of one stream: its outputs that may come back, by their (dtype, shape)."""

    __slots__ = ("feedback", "nbytes", "outputs", "step", "stream")

    def __init__(self, step: Step, outputs: dict[tuple[Any, Any], list[tuple[str, Any, int]]], nbytes: int) -> None:
        self.stream, self.step, self.feedback = step
        self.outputs = outputs
        """(dtype, shape) -> [(output name, the array as returned, CRC32 of its bytes then)]."""
        self.nbytes = nbytes


class _Session:
    __slots__ = ("ends", "nbytes")

    def __init__(self) -> None:
        self.ends: OrderedDict[int, _End] = OrderedDict()
        self.nbytes = 0


class StreamTracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams = itertools.count()
        self._by_id: dict[int, _Session] = {}
        self._local = threading.local()
        self._attribute = f"_hatch_shrinkray_streams_{id(self)}"
        """Each session keeps its open stream ends on itself (one attribute per tracker)."""

    def _state(self, session: Any) -> _Session:
        state: _Session | None = getattr(session, self._attribute, None)
        if state is None:
            state = _Session()
            try:
                setattr(session, self._attribute, state)
            except (AttributeError, TypeError):  # no attributes: by id (kept for the process's life)
                state = self._by_id.setdefault(id(session), state)
        return state

    def before(self, session: Any, feed: Mapping[str, Any]) -> Step:
        """The step this call (about to run, or just run, with ``feed``) is of."""
        with self._lock:
            state = self._state(session)
            found = self._continued(state, feed) if state.ends else None
            if found is None:
                step = Step(next(self._streams), 0, ())
            else:
                end, pairs = found
                del state.ends[end.stream]
                state.nbytes -= end.nbytes
                step = Step(end.stream, end.step + 1, pairs)
        self._local.last = (session, step, feed)
        return step

    def after(self, session: Any, output_names: Sequence[str], outputs: Sequence[Any]) -> bool:
        """Remember the outputs of the call ``before`` was last told of in this thread; whether any
        of them could be fed back (it has the shape and dtype of one of the call's inputs)."""
        last = getattr(self._local, "last", None)
        self._local.last = None
        if last is None or last[0] is not session:
            return False
        _, step, feed = last
        inputs: dict[tuple[Any, Any], list[Any]] = {}
        for v in feed.values():
            if isinstance(v, np.ndarray):
                inputs.setdefault((v.dtype, v.shape), []).append(v)
        kept: dict[tuple[Any, Any], list[tuple[str, Any, int]]] = {}
        nbytes = 0
        for name, value in zip(output_names, outputs, strict=False):
            if isinstance(value, np.ndarray):
                signature = (value.dtype, value.shape)
                if signature in inputs and value.flags.c_contiguous and not _passed_through(value, inputs[signature]):
                    kept.setdefault(signature, []).append((name, value, _crc(value)))
                    nbytes += value.nbytes
        if not kept:
            return False
        with self._lock:
            state = self._state(session)
            state.ends[step.stream] = _End(step, kept, nbytes)
            state.nbytes += nbytes
            while len(state.ends) > 1 and (len(state.ends) > OPEN_ENDS or state.nbytes > OPEN_BYTES):
                _, dropped = state.ends.popitem(last=False)
                state.nbytes -= dropped.nbytes
        return True

    @staticmethod
    def _continued(state: _Session, feed: Mapping[str, Any]) -> tuple[_End, Pairs] | None:
        """The open stream end this feed continues (most recent first), with the pairs it feeds back."""
        crcs: dict[str, int] = {}
        for end in reversed(state.ends.values()):
            pairs: list[tuple[str, str]] = []
            for name, value in feed.items():
                candidates = end.outputs.get((value.dtype, value.shape)) if isinstance(value, np.ndarray) else None
                if not candidates or not value.flags.c_contiguous:
                    continue
                crc = crcs.get(name)
                if crc is None:
                    crc = crcs[name] = _crc(value)
                for out, array, remembered in candidates:
                    if crc == remembered and (value is array or _equal(value, array)):
                        pairs.append((name, out))
                        break
            if not pairs:
                continue
            if end.feedback:
                if set(end.feedback) <= set(pairs):
                    return end, end.feedback
                continue
            return end, tuple(sorted(pairs))
        return None


def _passed_through(output: Any, inputs: Sequence[Any]) -> bool:
    """Whether ``output`` is one of its call's ``inputs`` (same shape and dtype) handed back as it was."""
    return any(x is output or (x.flags.c_contiguous and _equal(x, output)) for x in inputs)


def _crc(array: Any) -> int:
    return zlib.crc32(memoryview(array).cast("B")) if array.size else 0


def _equal(a: Any, b: Any) -> bool:
    """Bitwise equality (NaN payloads and -0.0 included)."""
    return a.size == 0 or memoryview(a).cast("B") == memoryview(b).cast("B")
