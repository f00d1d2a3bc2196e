"""What one process keeps of the calls of one model: a bounded candidate set for ``recording.select``.

A call is offered only after ``run()`` succeeded (a feed onnxruntime rejects is counted, never kept).
Each kept feed is encoded at once (``recording.encode.encode_feed``: compact and deflated), so memory and the
byte bounds both count stored bytes, and a feed whose stored size or loaded size alone exceeds what
one feed may take (``select.Caps``) is skipped (and counted) instead of pushing out the others.

The number of calls is unknown until the process ends, so memory is held to about twice the bounds:

* *stateless* models keep, per unit (a pytest test, or the standalone calls), the calls on a stride;
  when too much is held, the test holding most halves (its stride doubles), then the standalone calls
  (each a unit), and when every unit holds one sample, every other unit is dropped (units on a
  stride); thinning that drops units stops at ``UNIT_FLOOR`` of them unless the memory held passes
  twice the largest byte bound;
* *recurrent* models (``capture.streams`` saw an output fed back) keep whole streams: the first step
  with every input, later steps without the fed-back ones. When more than the byte bound is held,
  streams are cut to a common prefix length (water-filling) while that leaves each at least 1/32 of
  the budget, and thinned (streams on a stride) otherwise.

Until a model feeds something back it is treated as stateless; the step-0 feeds whose outputs could
come back are kept aside (the last ``OPEN_ENDS``), so the stream that turns out to be one keeps its
first step. The same sequence of calls always keeps the same samples.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hatch_shrinkray.capture.streams import OPEN_ENDS, Pairs, Step
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.encode import digest, encode_feed, stored_bytes
from hatch_shrinkray.recording.format import Meta
from hatch_shrinkray.recording.select import REJECTED, REPEATED, Sample, prefix

OVER_CAP = "over the byte cap"
"""A feed that alone takes more stored bytes than one feed may."""
TOO_LARGE = "over the memory cap"
"""A feed whose arrays alone take more than one feed may once loaded (a sixteenth of --max-memory)."""
NOT_NUMERIC = "not numeric arrays"
OTHER_NAMES = "not naming exactly the model's inputs"
START_LOST = "later steps of a stream whose first step was not kept"
UNIT_FLOOR = 2 * MIN_UNITS
"""Units the candidates keep while the bounds allow: twice what evidence needs, so that feeds left out
later (a bound, a repeat across processes) still leave enough."""


@dataclass
class Unit:
    label: str
    ordinal: int
    calls: int = 0
    stride: int = 1
    kept: list[tuple[int, Sample]] = field(default_factory=list)
    """(index of the call within the unit, sample)."""


@dataclass
class Stream:
    ordinal: int
    group: str
    steps: list[Sample]
    ran: int = 1
    truncated: bool = False


@dataclass
class ModelLog:
    sha256: str
    model: str
    """The absolute path the session was given, or ``<bytes>`` (made project-relative when merged)."""
    inputs: tuple[str, ...]
    caps: Caps = field(default_factory=Caps)
    calls: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    feedback: Pairs | None = None
    units: dict[str, Unit] = field(default_factory=dict)
    unit_stride: int = 1
    digests: set[str] = field(default_factory=set)
    pending: OrderedDict[int, tuple[int, str, dict[str, Any]]] = field(default_factory=OrderedDict)
    streams: list[Stream] = field(default_factory=list)
    open: OrderedDict[int, Stream | None] = field(default_factory=OrderedDict)
    started: int = 0
    stream_stride: int = 1
    tests: set[str] = field(default_factory=set)
    held: int = 0
    """Stored bytes of the samples held."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def rejected(self) -> None:
        with self.lock:
            self.skipped[REJECTED] += 1

    def failed(self, exc: BaseException) -> None:
        """Observing a call failed (it is not recorded; the program goes on)."""
        with self.lock:
            self.skipped[f"not recorded ({type(exc).__name__})"] += 1

    def observe(self, feed: Mapping[str, Any], step: Step, unit: str, candidate: bool) -> None:
        """A call that succeeded: ``step`` as ``StreamTracker`` saw it, ``unit`` the test it ran in
        (empty outside tests), ``candidate`` whether its outputs may come back as inputs."""
        with self.lock:
            call = self.calls
            self.calls += 1
            if unit:
                self.tests.add(unit)
            if step.step > 0 and (self.feedback is None or step.feedback == self.feedback):
                if self.feedback is None:
                    self._become_recurrent(step)
                self._continue(step, feed, call)
            elif self.feedback is not None:
                self._start(step.stream, feed, call, unit)
            else:
                if candidate:
                    self._set_aside(step.stream, feed, call, unit)
                self._stateless(feed, call, unit)

    # -- stateless ---------------------------------------------------------------------------------

    def _stateless(self, feed: Mapping[str, Any], call: int, label: str) -> None:
        unit = self.units.get(label)
        if unit is None:
            unit = self.units[label] = Unit(label, len(self.units))
        index = unit.calls
        unit.calls += 1
        if unit.ordinal % self.unit_stride or index % unit.stride:
            return
        sample = self._sample(feed, call)
        if sample is None:
            return
        if sample.digest in self.digests:
            self.skipped[REPEATED] += 1
            return
        self.digests.add(sample.digest)
        unit.kept.append((index, sample))
        self.held += sample.nbytes
        if len(self.digests) > 2 * self.caps.samples or self.held > 2 * self.caps.bytes:
            self._relieve_units()

    def _relieve_units(self) -> None:
        """Thin the units down to 1.5 times the bounds (room for more before the next thinning); the
        byte bound as ``select`` will apply it, so that enough units stay: thinning within a test
        costs no unit and goes first; thinning that drops units (standalone calls on a stride, tests
        on a stride) stops at ``UNIT_FLOOR`` units, unless what is held passes twice the largest
        byte bound there can be (``Caps.ceiling``): halving the candidates must never leave fewer
        units than the recording needs while the bounds could still keep them."""
        bound = self.caps.byte_bound(size for u in self.units.values() for size in _unit_sizes(u))
        if self.held <= 2 * bound and len(self.digests) <= 2 * self.caps.samples:
            return
        hard = 2 * max(self.caps.bytes, self.caps.ceiling)
        while len(self.digests) > 3 * self.caps.samples // 2 or self.held > 3 * bound // 2:
            over = self.held > hard or len(self.digests) > 2 * self.caps.samples
            within = [u for u in self.units.values() if u.label and len(u.kept) >= 2]
            calls = self.units.get("")
            if within:  # a test's calls on a stride: every test keeps a sample
                biggest = max(within, key=lambda u: (len(u.kept), -u.ordinal))
                biggest.stride *= 2
                biggest.kept = [(i, s) for i, s in biggest.kept if i % biggest.stride == 0]
            elif calls is not None and len(calls.kept) >= 2 and (over or self._kept_units() - len(calls.kept) // 2
                                                                >= UNIT_FLOOR):
                calls.stride *= 2  # standalone calls on a stride: each is a unit
                calls.kept = [(i, s) for i, s in calls.kept if i % calls.stride == 0]
            elif over or self._kept_units() // 2 >= UNIT_FLOOR:
                self.unit_stride *= 2
                for u in self.units.values():
                    if u.ordinal % self.unit_stride:
                        u.kept = []
            else:
                return
            self.digests = {s.digest for u in self.units.values() for _, s in u.kept}
            self.held = sum(s.nbytes for u in self.units.values() for _, s in u.kept)

    def _kept_units(self) -> int:
        """Independent units among the samples held: each test that has one, each standalone call."""
        return sum(len(u.kept) if not u.label else bool(u.kept) for u in self.units.values())

    def _set_aside(self, stream: int, feed: Mapping[str, Any], call: int, unit: str) -> None:
        try:
            copy = {k: np.array(v, copy=True) for k, v in feed.items()}
        except (TypeError, ValueError):
            return
        self.pending[stream] = (call, unit, copy)
        while len(self.pending) > OPEN_ENDS:
            self.pending.popitem(last=False)

    # -- recurrent ---------------------------------------------------------------------------------

    def _become_recurrent(self, step: Step) -> None:
        """The first fed-back call: what was kept as stateless samples becomes one-step streams, and
        the feeds set aside become the first steps of streams that may go on."""
        self.feedback = step.feedback
        firsts: dict[int, tuple[int | None, str, Sample | None]] = {}
        for u in self.units.values():
            for _, kept in u.kept:
                firsts[kept.call] = (None, u.label, kept)
        for stream, (call, unit, feed) in self.pending.items():
            known = firsts.get(call)
            firsts[call] = (stream, unit, known[2] if known is not None else self._sample(feed, call))
        self.units.clear()
        self.digests.clear()
        self.pending.clear()
        self.held = 0
        for call in sorted(firsts):
            self._add_stream(*firsts[call])
        self._relieve_streams()

    def _start(self, stream: int, feed: Mapping[str, Any], call: int, unit: str) -> None:
        ordinal = self.started
        if ordinal % self.stream_stride:
            self.started += 1
            self._track(stream, None)
            return
        self._add_stream(stream, unit, self._sample(feed, call))
        self._relieve_streams()

    def _add_stream(self, stream: int | None, unit: str, sample: Sample | None) -> None:
        ordinal = self.started
        self.started += 1
        record = None if sample is None else Stream(ordinal, unit, [sample])
        if record is not None:
            self.streams.append(record)
            self.held += record.steps[0].nbytes
        if stream is not None:
            self._track(stream, record)

    def _track(self, stream: int, record: Stream | None) -> None:
        self.open[stream] = record
        self.open.move_to_end(stream)
        while len(self.open) > OPEN_ENDS:
            self.open.popitem(last=False)

    def _continue(self, step: Step, feed: Mapping[str, Any], call: int) -> None:
        if step.stream not in self.open:
            self.skipped[START_LOST] += 1
            return
        record = self.open[step.stream]
        self.open.move_to_end(step.stream)
        if record is None:
            return
        record.ran += 1
        if record.truncated:
            return
        fed = {name for name, _ in step.feedback}
        sample = self._sample({k: v for k, v in feed.items() if k not in fed}, call, expected=fed)
        if sample is None:
            record.truncated = True  # a later step could not be computed without the missing one
            return
        record.steps.append(sample)
        self.held += sample.nbytes
        self._relieve_streams()

    def _relieve_streams(self) -> None:
        """Above the bounds (twice the count, a quarter more bytes), cut or thin the streams down to
        1.5 times the count and to the byte bound: every step held was encoded while the program
        ran, and steps beyond the byte bound ``select`` would cut anyway."""
        if len(self.streams) <= 2 * self.caps.samples and self.held <= 5 * self.caps.bytes // 4:
            return
        count, budget = 3 * self.caps.samples // 2, self.caps.bytes
        while True:
            self.held = sum(s.nbytes for r in self.streams for s in r.steps)
            if len(self.streams) <= count and self.held <= budget:
                return
            if len(self.streams) <= count:
                level = _level([r.steps for r in self.streams], budget)
                if level >= budget // 32 or len(self.streams) <= 32:
                    for r in self.streams:
                        kept = list(prefix(r.steps, level))
                        if len(kept) < len(r.steps):
                            r.steps, r.truncated = kept, True
                    self.streams = [r for r in self.streams if r.steps]
                    self.held = sum(s.nbytes for r in self.streams for s in r.steps)
                    return
            self.stream_stride *= 2
            dropped = {id(r) for r in self.streams if r.ordinal % self.stream_stride}
            self.streams = [r for r in self.streams if id(r) not in dropped]
            for key, value in self.open.items():
                if value is not None and id(value) in dropped:
                    self.open[key] = None

    # -- samples -----------------------------------------------------------------------------------

    def _sample(self, feed: Mapping[str, Any], call: int, expected: Collection[str] = ()) -> Sample | None:
        """The feed encoded, or None (counted in ``skipped``) when it cannot or may not be kept."""
        if len(feed) + len(expected) != len(self.inputs) or not all(
                name in feed or name in expected for name in self.inputs):
            self.skipped[OTHER_NAMES] += 1
            return None
        arrays = {}
        decoded = 0
        for name, given in feed.items():
            value = given if isinstance(given, np.ndarray) else _as_array(given)
            if value.dtype.kind not in "biuf":
                self.skipped[NOT_NUMERIC] += 1
                return None
            arrays[name] = value
            decoded += value.nbytes
        if decoded > self.caps.feed_memory:
            self.skipped[TOO_LARGE] += 1
            return None
        stored = encode_feed(arrays, self.inputs)
        nbytes = stored_bytes(stored)
        if nbytes > self.caps.feed_bytes:
            self.skipped[OVER_CAP] += 1
            return None
        return Sample(call, stored, digest(stored), nbytes, decoded)


def _unit_sizes(unit: Unit) -> list[int]:
    """The stored bytes of a unit's smallest sample; standalone calls (label ``""``) are a unit each."""
    sizes = [s.nbytes for _, s in unit.kept]
    return sizes if not unit.label or not sizes else [min(sizes)]


def _as_array(value: Any) -> np.ndarray[Any, Any]:
    """A feed value that is not an array (a list, an OrtValue) as one; a 0-d object array if not numeric."""
    try:
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    except (TypeError, ValueError):
        return np.asarray(None)


def _level(streams: list[list[Sample]], budget: int) -> int:
    """The largest per-stream cap at which all prefixes fit in ``budget`` together."""
    low, high = 0, budget
    while low < high:
        middle = (low + high + 1) // 2
        if sum(sum(s.nbytes for s in prefix(steps, middle)) for steps in streams) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def part_of(log: ModelLog) -> tuple[Meta, list[Sample]]:
    """What this process keeps of ``log``, as the metadata and samples of a recording (a *part*, merged
    by ``run.finish``): stateless samples labelled by test (``call:<n>`` outside tests), or streams."""
    with log.lock:
        extra: dict[str, Any] = {"tests": sorted(log.tests), "streams_ran": log.started}
        if log.feedback is None:
            rows = sorted(((u.label or f"call:{s.call}", s) for u in log.units.values() for _, s in u.kept),
                          key=lambda r: r[1].call)
            units = [label for label, _ in rows]
            samples = [s for _, s in rows]
            streams: list[tuple[int, ...]] = []
        else:
            ordered = sorted(log.streams, key=lambda r: r.steps[0].call)
            flat = sorted(((s.call, k) for k, r in enumerate(ordered) for s in r.steps))
            position = {call: i for i, (call, _) in enumerate(flat)}
            by_call = {s.call: s for r in ordered for s in r.steps}
            samples = [by_call[call] for call, _ in flat]
            units = [f"stream:{k}" for _, k in flat]
            streams = [tuple(position[s.call] for s in r.steps) for r in ordered]
            extra.update(stream_groups=[r.group for r in ordered], stream_steps=[r.ran for r in ordered])
        meta = Meta(log.sha256, tuple(log.inputs), len(samples), log.model, log.calls, tuple(s.call for s in samples),
                    tuple(units), tuple(log.feedback or ()), tuple(streams), tuple(sorted(log.skipped.items())), extra)
        return meta, samples
