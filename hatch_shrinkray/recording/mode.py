"""What a run does with an earlier recording of the same model (``record --mode``): ``replace`` it, or
``add`` to it: its samples join the run's parts before the merge, so the bounds and the choice of
units apply to the whole, and repeated feeds count once."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.recording.encode import digest, encode_feed, stored_bytes
from hatch_shrinkray.recording.format import BYTES_MODEL, Recording, meta_of
from hatch_shrinkray.recording.matching import named_for
from hatch_shrinkray.recording.merge import Part
from hatch_shrinkray.recording.select import Sample
from hatch_shrinkray.recording.storage import read_recording

REPLACE, ADD = "replace", "add"
MODES = (REPLACE, ADD)


def earlier_parts(directory: Path, model_sha256: str, root: Path) -> list[Part]:
    """This model's recordings in ``directory`` as parts of a run that adds to them; a file named as
    one that cannot be read is a ``ShrinkrayError`` (adding must not drop what it holds)."""
    recordings = (read_recording(path) for path in named_for(directory, model_sha256))
    return [as_part(rec, root) for rec in recordings if rec.model_sha256 == model_sha256]


def as_part(rec: Recording, root: Path) -> Part:
    """``rec`` as a part a process wrote: its samples encoded again (encoding is deterministic), its
    calls and skipped feeds counted with the run's, its model's path absolute again (under ``root``)."""
    stored = [encode_feed(feed, rec.inputs) for feed in rec.samples]
    samples = [Sample(call, s, digest(s), stored_bytes(s), sum(int(a.nbytes) for a in feed.values()))
               for call, s, feed in zip(rec.picked, stored, rec.samples, strict=True)]
    units = list(rec.units) or [f"call:{call}" for call in rec.picked]
    model = rec.model if rec.model == BYTES_MODEL else str(root / rec.model)
    return Part({**meta_of(rec), "model": model, "units": units, "streams_ran": len(rec.streams),
                 "tests": sorted({u for u in units if u.startswith("test:")})}, samples)
