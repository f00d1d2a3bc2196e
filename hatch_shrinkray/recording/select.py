"""Which recorded samples a recording keeps: enough independent evidence within hard bounds.

*Count first, spread over units.* A stateless model's samples are taken round-robin over its units
(the pytest tests that ran it, or each call outside tests): one sample of every unit before a second
of any, the units of a round in an order that spreads them (first, last, middle, quarters, ...), and
within a unit, calls spread the same way. So 64 calls of one test and 1 call of another keep both
tests, and 1000 standalone calls keep an even spread of them.

*Whole streams.* A recurrent model's units are its streams, and a stream counts as one sample for
``max_samples``. The first ``MIN_STREAMS`` streams (in the same spreading order) share the byte budget
evenly, each cut to a prefix at a common water level when they do not all fit; when they all fit
whole, further streams are added while the budget allows.

*Bounds* (``Caps``). A sample is taken only if the total stays within the byte bound of stored
bytes (its members' compressed data and zip headers, ``encode.stored_bytes``) and within the
memory bound of decoded bytes (what a build loads): a large feed never pushes out the small ones,
it is left out. The byte bound favours independent units over bytes per unit: by default it grows
(up to a ceiling) to what ``MIN_UNITS`` units take when the target alone holds fewer; a bound the
user gives is hard. A single feed may take at most a ``MIN_UNITS``-th of the memory bound.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.format import Stored

MIN_STREAMS = MIN_UNITS
"""Streams that share the byte budget before any further stream is added."""
SAMPLE_CAP = "over --max-samples"
BYTE_CAP = "over --max-bytes"
MEMORY_CAP = "over --max-memory"
"""Reasons a sample that fits alone was not chosen: the bound that was reached."""
REPEATED = "repeating a kept feed"
REJECTED = "rejected by onnxruntime"
NOT_CALLS = frozenset({REJECTED})
"""Reasons that count feeds ``run()`` refused: they are not among the model's calls."""

T = TypeVar("T")


@dataclass(frozen=True)
class Sample:
    call: int
    """Index of the call among all calls of the model (the processes' calls one after the other)."""
    stored: Stored
    digest: str
    nbytes: int
    """Stored bytes, headers included (``encode.stored_bytes``)."""
    decoded: int


@dataclass(frozen=True)
class Stream:
    group: str
    """The test it ran in (``test:<node id>``), or empty outside tests."""
    steps: tuple[Sample, ...]
    ran: int
    """Steps that ran (``steps`` may be a prefix)."""


def spreading(n: int) -> list[int]:
    """``range(n)`` in an order whose every prefix is spread evenly: first, last, middle, quarters, ..."""
    if n <= 0:
        return []
    order = [0] + ([n - 1] if n > 1 else [])
    queue = deque([(0, n - 1)])
    while queue:
        low, high = queue.popleft()
        if high - low < 2:
            continue
        middle = (low + high) // 2
        order.append(middle)
        queue += [(low, middle), (middle, high)]
    return order


def round_robin(groups: Sequence[Sequence[T]]) -> list[T]:
    """Every item, one of each group per round (groups in spreading order), each group's items in
    spreading order."""
    orders = [spreading(len(g)) for g in groups]
    visit = spreading(len(groups))
    out: list[T] = []
    for r in range(max((len(g) for g in groups), default=0)):
        out += [groups[g][orders[g][r]] for g in visit if r < len(orders[g])]
    return out


@dataclass(frozen=True)
class Chosen:
    """A stateless model's choice: the samples with their unit labels, in call order, and why the
    other candidates were not taken."""

    samples: list[tuple[str, Sample]]
    left_out: dict[str, int]
    """Reason (``SAMPLE_CAP``, ``BYTE_CAP``, ``MEMORY_CAP``) -> candidates not taken."""
    units: int
    """Units that had a candidate."""
    for_units: int
    """Stored bytes that ``MIN_UNITS`` units take (the first of the choice, one sample each; estimated
    from the average when fewer were candidates)."""
    memory_for_units: int = 0
    """The same, in bytes once loaded (what ``--max-memory`` bounds)."""

    @property
    def kept_units(self) -> int:
        return len({label for label, _ in self.samples})


def choose_samples(units: Sequence[tuple[str, Sequence[Sample]]], caps: Caps) -> Chosen:
    """A stateless model's samples. ``units``: labelled groups in the order they first ran; the
    label ``""`` holds standalone calls, each its own unit."""
    groups: list[list[tuple[str, Sample]]] = []
    for label, samples in units:
        if label:
            groups.append([(label, s) for s in samples])
        else:
            groups += [[(f"call:{s.call}", s)] for s in samples]
    groups = [g for g in groups if g]
    groups.sort(key=lambda g: g[0][1].call)
    ordered = round_robin(groups)
    first = [s for _, s in ordered[:min(MIN_UNITS, len(groups))]]  # one of each unit
    first_round = [s.nbytes for s in first]
    bound = caps.byte_bound(first_round)
    chosen: list[tuple[str, Sample]] = []
    left_out = {SAMPLE_CAP: 0, BYTE_CAP: 0, MEMORY_CAP: 0}
    stored = decoded = 0
    for label, s in ordered:
        if len(chosen) >= caps.samples:
            left_out[SAMPLE_CAP] += 1
        elif stored + s.nbytes > bound:
            left_out[BYTE_CAP] += 1
        elif decoded + s.decoded > caps.memory:
            left_out[MEMORY_CAP] += 1
        else:
            chosen.append((label, s))
            stored += s.nbytes
            decoded += s.decoded
    # fewer candidates than MIN_UNITS (the processes thinned them under a hard bound): as many more alike
    needed = -(-sum(first_round) * MIN_UNITS // len(first_round)) if first_round else 0
    loaded = -(-sum(s.decoded for s in first) * MIN_UNITS // len(first)) if first else 0
    return Chosen(sorted(chosen, key=lambda c: c[1].call), {k: v for k, v in left_out.items() if v}, len(groups),
                  needed, loaded)


def choose_streams(streams: Sequence[Stream], caps: Caps) -> list[Stream]:
    """A recurrent model's streams (prefixes where the budget runs out), in the order they started.
    The byte bound is the target alone: the first ``MIN_STREAMS`` streams share it."""
    max_samples, max_bytes, memory = caps.samples, caps.bytes, caps.memory
    by_group: dict[str, list[Stream]] = {}
    singles: list[list[Stream]] = []
    for s in sorted(streams, key=lambda s: s.steps[0].call):
        if s.group:
            by_group.setdefault(s.group, []).append(s)
        else:
            singles.append([s])
    ordered = round_robin(sorted([*by_group.values(), *singles], key=lambda g: g[0].steps[0].call))
    first = ordered[:min(MIN_STREAMS, max_samples)]
    level = _water_level(first, max_bytes, memory)
    chosen: list[Stream] = []
    stored = decoded = 0
    for index, stream in enumerate(ordered):
        if len(chosen) >= max_samples:
            break
        cap = level if index < len(first) else min(level, max_bytes - stored)
        steps = prefix(stream.steps, min(cap, max_bytes - stored), memory - decoded)
        if steps:
            chosen.append(Stream(stream.group, steps, stream.ran))
            stored += sum(s.nbytes for s in steps)
            decoded += sum(s.decoded for s in steps)
    return sorted(chosen, key=lambda s: s.steps[0].call)


def prefix(steps: Sequence[Sample], max_bytes: int, max_decoded: int = sys.maxsize) -> tuple[Sample, ...]:
    """The first of ``steps`` that take at most ``max_bytes`` stored and ``max_decoded`` loaded."""
    stored = decoded = 0
    for k, step in enumerate(steps):
        stored += step.nbytes
        decoded += step.decoded
        if stored > max_bytes or decoded > max_decoded:
            return tuple(steps[:k])
    return tuple(steps)


def _water_level(streams: Sequence[Stream], max_bytes: int, memory: int) -> int:
    """The largest per-stream byte cap at which the streams' prefixes fit in ``max_bytes`` together
    (``max_bytes`` when they all fit whole)."""
    def total(cap: int) -> int:
        return sum(sum(s.nbytes for s in prefix(stream.steps, cap, memory)) for stream in streams)

    if total(max_bytes) <= max_bytes:
        return max_bytes
    levels = sorted({sum(s.nbytes for s in stream.steps[:k + 1]) for stream in streams
                     for k in range(len(stream.steps))})
    low, high = 0, len(levels) - 1  # levels[low - 1] fits; find the last that does
    best = 0
    while low <= high:
        middle = (low + high) // 2
        if total(levels[middle]) <= max_bytes:
            best, low = levels[middle], middle + 1
        else:
            high = middle - 1
    return best
