"""Samples as the program made them: which independent unit each belongs to, and recurrent models
run in closed loop, stream by stream.

A streaming model (a voice-activity detector) feeds an output back as an input of its next call (``stateN`` ->
``state``). Run on the original's recorded states, a shrunk model's error never accumulates, so
every step looks fine while the real program, which feeds the shrunk model its *own* state, moves
a segment boundary. Here each stream runs from its recorded first step on, every later step taking
the model's own previous outputs: the original's for the reference, the shrunk model's for the
shrunk model (closed loop). Samples outside streams run one by one, as before.

Pure Python: ``run`` is any callable that runs one complete feed (an onnxruntime session, ``auto``'s
probe session with candidate weights).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.pool import thread_pool

Feed = dict[str, npt.NDArray[Any]]
Outputs = list[npt.NDArray[Any]]
Run = Callable[[Feed], Outputs]


@dataclass(frozen=True)
class Sequencing:
    """How a list of feeds was made: the independent unit of each feed, and for a recurrent model
    which outputs feed which inputs and which feeds form each stream (in step order)."""

    units: tuple[str, ...]
    """Per feed; ``sample:<i>`` labels when nothing better is known."""
    feedback: tuple[tuple[str, str], ...] = ()
    """(input, output) pairs: the output of step t is the input at step t + 1."""
    streams: tuple[tuple[int, ...], ...] = ()
    """Indices of the feeds of each stream, in step order (empty for stateless models)."""

    @staticmethod
    def plain(count: int) -> Sequencing:
        return Sequencing(tuple(f"sample:{i}" for i in range(count)))

    @property
    def recurrent(self) -> bool:
        return bool(self.feedback and self.streams)

    def subset(self, indices: Sequence[int]) -> Sequencing:
        """The sequencing of ``[feeds[i] for i in indices]`` (streams are kept whole or dropped)."""
        where = {i: k for k, i in enumerate(indices)}
        streams = tuple(tuple(where[i] for i in s) for s in self.streams if all(i in where for i in s))
        return Sequencing(tuple(self.units[i] for i in indices), self.feedback, streams)

    def groups(self) -> list[tuple[int, ...]]:
        """What is judged as one sample: each stream, and each feed outside streams, in feed order."""
        first = {s[0]: s for s in self.streams}
        inside = {i for s in self.streams for i in s}
        return [first.get(i, (i,)) for i in range(len(self.units)) if i in first or i not in inside]

    def folds(self, k: int = 2) -> list[list[int]]:
        """Feed indices split into ``k`` folds by unit (units in order of first appearance, dealt
        round-robin), so no unit is on both sides: neighbouring calls of one stream or one test
        case never judge each other."""
        fold_of = {u: n % k for n, u in enumerate(dict.fromkeys(self.units))}
        return [[i for i, u in enumerate(self.units) if fold_of[u] == f] for f in range(k)]

    def unit_count(self) -> int:
        return len(set(self.units))

    def spread(self, wanted: int) -> list[int]:
        """The feeds of ``wanted`` judged samples (single feeds, or whole streams) evenly spread
        over all of them, in feed order."""
        groups = self.groups()
        n, m = len(groups), min(len(groups), wanted)
        picked = sorted({round(k * (n - 1) / max(m - 1, 1)) for k in range(m)}) if m else []
        return sorted(i for g in picked for i in groups[g])


@dataclass(frozen=True)
class Calibration:
    """Real samples a data-fitted method fits on, as recorded (a stream's later steps lack their
    fed-back inputs: ``seq`` says which, and ``run_in_order`` supplies them)."""

    feeds: list[Feed]
    seq: Sequencing
    index: tuple[int, ...] = ()
    """Where each feed was in the recording (empty: not known), so two parts of one recording can be
    put back in its order (``joined``)."""

    def __len__(self) -> int:
        return len(self.feeds)


def joined(a: Calibration, b: Calibration) -> Calibration:
    """Two parts of one recording (``auto``'s fitting and held-out halves) as the whole, in the
    recording's order where both know it: what a method fitted on every unit is fitted on."""
    parts = [(i, a, k) for k, i in enumerate(a.index or range(len(a)))]
    if a.index and b.index:
        parts += [(i, b, k) for k, i in enumerate(b.index)]
        parts.sort(key=lambda part: part[0])
    else:
        parts += [(len(a) + k, b, k) for k in range(len(b))]
    where = {(id(c), k): n for n, (_, c, k) in enumerate(parts)}
    streams = tuple(tuple(where[(id(c), k)] for k in stream) for c in (a, b) for stream in c.seq.streams)
    seq = Sequencing(tuple(c.seq.units[k] for _, c, k in parts), a.seq.feedback or b.seq.feedback,
                     tuple(sorted(streams)))
    return Calibration([c.feeds[k] for _, c, k in parts], seq,
                       tuple(i for i, _, _ in parts) if a.index and b.index else ())


def as_calibration(samples: Calibration | Sequence[Feed]) -> Calibration:
    """``samples`` as a Calibration (a plain list of feeds: one unit per feed, no streams)."""
    if isinstance(samples, Calibration):
        return samples
    feeds = list(samples)
    return Calibration(feeds, Sequencing.plain(len(feeds)))


def run_in_order(run: Run, feeds: Sequence[Feed], seq: Sequencing, names: Sequence[str],
                 workers: int = 1) -> list[Outputs]:
    """Every feed's outputs (in ``names`` order); streams in closed loop on ``run``'s own outputs.
    ``workers`` > 1 runs that many streams or lone feeds at once (``run`` must be thread-safe, as an
    onnxruntime session's ``run`` is); each stream still runs step after step, so the outputs are
    the same whatever the number of workers."""
    index = {n: k for k, n in enumerate(names)}
    jobs: list[Sequence[int]] = list(seq.streams) if seq.feedback else []
    inside = {i for stream in jobs for i in stream}
    jobs += [(i,) for i in range(len(feeds)) if i not in inside]
    out: list[Outputs | None] = [None] * len(feeds)

    def job(stream: Sequence[int]) -> None:
        previous: Outputs | None = None
        for i in stream:
            feed = feeds[i] if previous is None else {
                **feeds[i], **{inp: previous[index[o]] for inp, o in seq.feedback}}
            previous = run(feed)
            out[i] = previous

    if workers > 1 and len(jobs) > 1:
        with thread_pool(min(workers, len(jobs))) as pool:  # a failed run or Ctrl-C drops the jobs not started
            for _ in pool.map(job, jobs):
                pass
    else:
        for stream in jobs:
            job(stream)
    return [o for o in out if o is not None]


def completed(feeds: Sequence[Feed], seq: Sequencing, outputs: Sequence[Sequence[npt.NDArray[Any]]],
              names: Sequence[str]) -> list[Feed]:
    """The feeds with every stream step's fed-back inputs filled in from ``outputs`` of the step
    before (the original's, for calibration: what its activations were in the real program)."""
    index = {n: k for k, n in enumerate(names)}
    full = [dict(f) for f in feeds]
    for stream in seq.streams if seq.feedback else ():
        for before, i in itertools.pairwise(stream):
            for inp, o in seq.feedback:
                full[i][inp] = outputs[before][index[o]]
    return full


def grouped(outputs: Sequence[Sequence[npt.NDArray[Any]]], seq: Sequencing, output: int) -> list[npt.NDArray[Any]]:
    """One output's values per judged sample: a stream's steps stacked on a leading time axis."""
    out = []
    streams = set(seq.streams)
    for group in seq.groups():
        if group not in streams:
            out.append(outputs[group[0]][output])
        else:
            out.append(np.stack([np.asarray(outputs[i][output]) for i in group]))
    return out


def group_units(seq: Sequencing) -> list[str]:
    """The unit of each judged sample (``groups``)."""
    return [seq.units[g[0]] for g in seq.groups()]
