"""One recording per model from the parts the processes of a run wrote (``capture.recorder.part_of``)
and, when the run adds to it (``mode``), the model's earlier recording as one more part.

Parts are ordered by their content, never by process id or finishing order, and calls are numbered
across them in that order, so the same run gives the same file, byte for byte. Repeated feeds are
kept once, and so are repeated streams (a stream equal to another, or to the start of a longer one).
The model's path becomes relative to the project root (its file name when outside it): recordings
are committed and shared, and name no directory of the machine that made them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from hatch_shrinkray.codec import decode, encode
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.recording import select
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.encode import digest, encode_feed, stored_bytes
from hatch_shrinkray.recording.format import BYTES_MODEL, Meta, Recording, Stored, meta_of
from hatch_shrinkray.recording.matching import named_for
from hatch_shrinkray.recording.storage import read_recording

OTHER_FEEDBACK = "later steps of streams that fed back other outputs"
REPEATED_STREAM = "steps of streams that repeat a kept one"


@dataclass(frozen=True)
class Part:
    meta: Meta
    samples: list[select.Sample]
    """Calls numbered within the part."""

    @property
    def content(self) -> str:
        body = {k: v for k, v in encode(self.meta).items() if k != "model"}
        h = hashlib.sha256(json.dumps(body, sort_keys=True).encode())
        for sample in self.samples:
            h.update(sample.digest.encode())
        return h.hexdigest()


@dataclass(frozen=True)
class Merged:
    meta: Meta
    samples: list[Stored]
    seen: str
    """What ran, for the summary: ``12 tests``, ``64 calls``, ``40 streams``."""
    kept: str
    short: tuple[int, int, str, int] | None = None
    """When a bound kept fewer than ``MIN_UNITS`` units of more that ran: (kept, ran, the bound's flag,
    the value of it that keeps ``MIN_UNITS``), for the summary."""
    source: str = ""
    """The absolute path the model was loaded from (empty: from bytes), never written to the file:
    for the coverage table, which finds the other installed models of a wheel-path table there."""
    repeated_streams: int = 0
    """Streams with the very feeds of another (or of its start), kept once, for the coverage table:
    a test suite that runs the same clip ten times ran one stream ten times."""
    repeats: tuple[int, int] | None = None
    """When fewer than ``MIN_UNITS`` units were kept of more that ran and no bound left any out (the
    other calls repeated feeds already kept, which count once): (kept, ran)."""


def merge(parts: Sequence[Part], caps: Caps, root: Path) -> Merged:
    """One recording of the model of ``parts``. Every call that is not a sample is counted in
    ``skipped`` under the reason it was left out, so that the counts add up to the calls."""
    ordered = sorted(parts, key=lambda p: p.content)
    offsets, total = [], 0
    for p in ordered:
        offsets.append(total)
        total += p.meta.calls
    skipped: Counter[str] = Counter()
    for p in ordered:
        skipped.update(dict(p.meta.skipped))
    feedbacks = Counter(tuple(tuple(pair) for pair in p.meta.feedback) for p in ordered if p.meta.feedback)
    feedback = max(feedbacks, key=lambda f: (feedbacks[f], -_first(ordered, f))) if feedbacks else ()
    meta: dict[str, Any] = {"model_sha256": ordered[0].meta.model_sha256, "model": _model(ordered, root),
                            "inputs": ordered[0].meta.inputs, "calls": total,
                            "feedback": [list(p) for p in feedback]}
    if feedback:
        kept = _merge_streams(ordered, offsets, feedback, caps, meta=meta, skipped=skipped)
    else:
        kept = _merge_stateless(ordered, offsets, caps, meta=meta, skipped=skipped)
    meta["skipped"] = sorted([k, v] for k, v in skipped.items() if v)
    paths = sorted({p.meta.model for p in ordered if p.meta.model != BYTES_MODEL})
    return Merged(decode(Meta, encode(meta)), kept.samples, kept.seen, kept.kept, kept.short,
                  paths[0] if paths else "", kept.repeated, repeats=kept.repeats)


class _Kept(NamedTuple):
    samples: list[Stored]
    seen: str
    kept: str
    short: tuple[int, int, str, int] | None
    repeated: int = 0
    """Streams kept once because another (or its start) had the very same feeds."""
    repeats: tuple[int, int] | None = None
    """(units kept, units that ran) when fewer than the evidence needs were kept only because the
    other calls repeated feeds already kept (no cap left anything out)."""


def _merge_stateless(ordered: Sequence[Part], offsets: Sequence[int], caps: Caps, *, meta: dict[str, Any],
                     skipped: Counter[str]) -> _Kept:
    """The samples of a stateless model, chosen over its units (``choose_samples``); ``meta`` gets
    the choice, ``skipped`` the calls left out."""
    total = meta["calls"]
    tests = sorted({t for p in ordered for t in p.meta.extra.get("tests", [])})
    rows = sorted((("" if label.startswith("call:") else label, sample)
                   for p, offset in zip(ordered, offsets, strict=True)
                   for label, sample in zip(p.meta.units, _samples(p, offset), strict=True)),
                  key=lambda r: r[1].call)
    units: dict[str, list[select.Sample]] = {}
    first: dict[str, int] = {}
    seen_feeds: set[str] = set()
    for label, sample in rows:  # repeated feeds: the first call keeps it
        units.setdefault(label, [])
        first.setdefault(label, sample.call)
        if sample.digest not in seen_feeds:
            seen_feeds.add(sample.digest)
            units[label].append(sample)
        else:
            skipped[select.REPEATED] += 1
    choice = select.choose_samples([(k, units[k]) for k in sorted(units, key=first.__getitem__)], caps)
    chosen = choice.samples
    meta.update(units=[label for label, _ in chosen], picked=[s.call for _, s in chosen], streams=[],
                samples=len(chosen))
    samples = [s.stored for _, s in chosen]
    seen = f"{len(tests)} test{'s' * (len(tests) != 1)}" if tests else f"{total} calls"
    groups = {label for label, _ in chosen if label.startswith("test:")}
    others = sum(not label.startswith("test:") for label, _ in chosen)  # calls outside tests: a unit each
    kept_text = f"{len(chosen)} sample{'s' * (len(chosen) != 1)}" + (
        f" from {len(groups)} test{'s' * (len(groups) != 1)}" if groups else "") + (
        f" and {others} other call{'s' * (others != 1)}" if groups and others else "")
    skipped.update(choice.left_out)
    ran = max(choice.units, len(tests) if tests else total)
    _account(skipped, total, len(samples), select.SAMPLE_CAP if len(samples) >= caps.samples else select.BYTE_CAP)
    few = choice.kept_units < min(MIN_UNITS, ran)
    capped = any(skipped[reason] for reason in (select.SAMPLE_CAP, select.BYTE_CAP, select.MEMORY_CAP))
    short = None
    if few and capped:  # the bound that stopped it, and the value that keeps MIN_UNITS
        memory = choice.left_out.get(select.MEMORY_CAP, 0) > 0 and choice.memory_for_units > caps.memory
        short = (choice.kept_units, ran, "--max-memory", choice.memory_for_units) if memory else \
            (choice.kept_units, ran, "--max-bytes", choice.for_units)
    repeats = (choice.kept_units, ran) if few and not capped and skipped[select.REPEATED] else None
    return _Kept(samples, seen, kept_text, short, repeats=repeats)


def _merge_streams(ordered: Sequence[Part], offsets: Sequence[int], feedback: tuple[tuple[str, ...], ...],
                   caps: Caps, *, meta: dict[str, Any], skipped: Counter[str]) -> _Kept:
    """The streams of a recurrent model that fed back ``feedback`` (``choose_streams``); ``meta`` gets
    the choice, ``skipped`` the calls left out."""
    streams, repeated = _streams(ordered, offsets, feedback, skipped)
    chosen_streams = select.choose_streams(streams, caps)
    steps = sorted((s.call, k) for k, stream in enumerate(chosen_streams) for s in stream.steps)
    position = {call: i for i, (call, _) in enumerate(steps)}
    by_call = {s.call: s for stream in chosen_streams for s in stream.steps}
    meta.update(units=[f"stream:{k}" for _, k in steps], picked=[c for c, _ in steps], samples=len(steps),
                streams=[[position[s.call] for s in stream.steps] for stream in chosen_streams],
                stream_steps=[stream.ran for stream in chosen_streams])
    samples = [by_call[c].stored for c, _ in steps]
    ran = sum(p.meta.extra.get("streams_ran", 0) for p in ordered) or len(streams)
    seen = f"{ran} stream{'s' * (ran != 1)}"
    cut = sum(len(s.steps) < s.ran for s in chosen_streams)
    kept_text = (f"{len(chosen_streams)} stream{'s' * (len(chosen_streams) != 1)}, {len(steps)} steps"
                 + (f" ({cut} cut to a prefix)" if cut else ""))
    _account(skipped, meta["calls"], len(samples),
             select.SAMPLE_CAP if len(chosen_streams) >= caps.samples else select.BYTE_CAP)
    return _Kept(samples, seen, kept_text, None, repeated)


def _account(skipped: Counter[str], calls: int, kept: int, bound: str) -> None:
    """Calls neither kept nor counted under a reason were thinned out while the processes ran, to
    stay within the bounds: they count under the bound that the choice reached."""
    counted = sum(n for reason, n in skipped.items() if reason not in select.NOT_CALLS)
    if calls - kept - counted > 0:
        skipped[bound] += calls - kept - counted


def _first(parts: Sequence[Part], feedback: tuple[tuple[str, ...], ...]) -> int:
    return next(i for i, p in enumerate(parts) if tuple(tuple(x) for x in p.meta.feedback) == feedback)


def _samples(part: Part, offset: int) -> list[select.Sample]:
    return [dataclasses.replace(s, call=offset + s.call) for s in part.samples]


def _streams(parts: Sequence[Part], offsets: Sequence[int], feedback: tuple[tuple[str, ...], ...],
             skipped: Counter[str]) -> tuple[list[select.Stream], int]:
    """Every stream of every part (samples of stateless parts as one-step streams), repeats dropped;
    and how many were dropped."""
    streams: list[select.Stream] = []
    for p, offset in zip(parts, offsets, strict=True):
        samples = _samples(p, offset)
        same = tuple(tuple(x) for x in p.meta.feedback) == feedback
        if not p.meta.feedback:
            streams += [select.Stream(label if label.startswith("test:") else "", (s,), 1)
                        for label, s in zip(p.meta.units, samples, strict=True)]
            continue
        groups = p.meta.extra.get("stream_groups") or [""] * len(p.meta.streams)
        ran = p.meta.extra.get("stream_steps") or [len(s) for s in p.meta.streams]
        for indices, group, steps_ran in zip(p.meta.streams, groups, ran, strict=True):
            steps = tuple(samples[i] for i in indices)
            if not same:
                skipped[OTHER_FEEDBACK] += len(steps) - 1
            streams.append(select.Stream(group, steps, steps_ran) if same else select.Stream(group, steps[:1], 1))
    streams.sort(key=lambda s: s.steps[0].call)
    prefixes: set[tuple[int, str]] = set()
    for stream in streams:
        h = hashlib.sha256()
        for k, step in enumerate(stream.steps[:-1]):
            h.update(step.digest.encode())
            prefixes.add((k + 1, h.hexdigest()))
    kept, whole = [], set()
    for stream in streams:
        h = hashlib.sha256()
        for step in stream.steps:
            h.update(step.digest.encode())
        key = (len(stream.steps), h.hexdigest())
        if key in prefixes or key in whole:
            skipped[REPEATED_STREAM] += len(stream.steps)
            continue  # the same feeds as (the start of) another stream
        whole.add(key)
        kept.append(stream)
    return kept, len(streams) - len(kept)


def _model(parts: Sequence[Part], root: Path) -> str:
    """The model's path relative to ``root`` (POSIX), else its file name, else ``<bytes>``."""
    paths = sorted({p.meta.model for p in parts if p.meta.model != BYTES_MODEL})
    if not paths:
        return BYTES_MODEL
    path = Path(paths[0])
    try:
        relative = Path(os.path.relpath(os.path.realpath(path), os.path.realpath(root)))
    except ValueError:  # another drive
        return path.name
    if relative.parts and relative.parts[0] != os.pardir and not relative.is_absolute():
        return PurePosixPath(*relative.parts).as_posix()
    return path.name


def earlier_parts(directory: Path, model_sha256: str, root: Path) -> list[Part]:
    """This model's recordings in ``directory`` as parts of a run that adds to them; a file named as
    one that cannot be read is a ``ShrinkrayError`` (adding must not drop what it holds)."""
    recordings = (read_recording(path) for path in named_for(directory, model_sha256))
    return [as_part(rec, root) for rec in recordings if rec.model_sha256 == model_sha256]


def as_part(rec: Recording, root: Path) -> Part:
    """``rec`` as a part a process wrote: its samples encoded again (encoding is deterministic), its
    calls and skipped feeds counted with the run's, its model's path absolute again (under ``root``)."""
    stored = [encode_feed(feed, rec.inputs) for feed in rec.samples]
    samples = [select.Sample(call, s, digest(s), stored_bytes(s), sum(int(a.nbytes) for a in feed.values()))
               for call, s, feed in zip(rec.picked, stored, rec.samples, strict=True)]
    units = list(rec.units) or [f"call:{call}" for call in rec.picked]
    model = rec.model if rec.model == BYTES_MODEL else str(root / rec.model)
    extra = {**rec.extra, "streams_ran": len(rec.streams), "tests": sorted({u for u in units if u.startswith("test:")})}
    return Part(dataclasses.replace(meta_of(rec), model=model, units=tuple(units), extra=extra), samples)
