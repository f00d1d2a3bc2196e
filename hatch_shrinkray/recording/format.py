"""Recordings: the inputs a real workload fed to onnxruntime, one file per model.

Format, version 2 (``hatch-shrinkray record`` writes it; numpy alone reads it with
``np.load(path, allow_pickle=False)``; version 1 files are still read):

* the file is ``<model stem>-<first 16 hex digits of the model's sha256>.npz`` in the recording
  directory;
* ``__meta__`` is a 0-d string array holding JSON: ``format`` (``hatch-shrinkray-recording``),
  ``version`` (2), ``model_sha256`` (of the model bytes the session was given: the model's
  identity), ``model`` (for people: the path relative to the project root, else the file name, or
  ``<bytes>``; never absolute), ``inputs`` (input names in order), ``samples``, ``calls``
  (``run()`` calls seen), ``picked`` (which calls were kept, counting the calls of several
  processes one after the other), ``units`` (per sample, the independent unit it belongs to:
  ``test:<pytest node id>``, ``stream:<k>`` or ``call:<n>``), ``feedback`` (``[input, output]``
  pairs: the output of a step is fed back as that input at the next step of a stream; empty for
  stateless models), ``streams`` (with feedback: each stream's sample indices in step order) and
  ``skipped`` (``[reason, count]`` of feeds that were not kept, e.g. ``over the byte cap``);
* sample ``i``'s value for input ``inputs[j]`` is the member ``s<i>_<j>`` (``s0003_1``, the array as
  it is) or the pair ``s<i>_<j>.v`` / ``s<i>_<j>.i`` (a value table and narrow indices,
  ``recording.compact``: ``values[index]``, or per channel for a 2-D table). Every sample has its
  own shapes (text lines of different widths, audio chunks of different lengths);
* a stream's first sample holds every input; its later samples lack the feedback inputs, which come
  from the previous step's outputs. A stream may be a prefix of what ran (``stream_steps`` in the
  metadata: how many steps each stream ran).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

import numpy.typing as npt

from hatch_shrinkray.codec import AT_LEAST_0, SHA256, Format, Invalid, decode, opened
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording.npz import Blob

FORMAT = "hatch-shrinkray-recording"
VERSION = 2
READS = (1, 2)
META = "__meta__"
SHA_DIGITS = 16
TABLE, INDEX = ".v", ".i"
BYTES_MODEL = "<bytes>"
AGAIN = "record it again with `hatch-shrinkray record`"

Feed = dict[str, npt.NDArray[Any]]
Stored = tuple[tuple[int, str, Blob], ...]
"""One sample as stored: (input index, member suffix, deflated member) for each input it holds."""


@dataclass(frozen=True)
class Recording:
    model_sha256: str
    model: str
    """Never absolute: project-relative POSIX path, else the file name, or ``<bytes>``."""
    inputs: tuple[str, ...]
    samples: tuple[Feed, ...]
    calls: int
    picked: tuple[int, ...]
    units: tuple[str, ...] = ()
    """Per sample: the independent unit it belongs to; empty (version 1): one unit per sample."""
    feedback: tuple[tuple[str, str], ...] = ()
    """(input, output): the output of step t is fed back as that input at step t+1."""
    streams: tuple[tuple[int, ...], ...] = ()
    """With feedback: the sample indices of each stream, in step order; every sample is in one."""
    skipped: tuple[tuple[str, int], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    """Other metadata (how many steps each stream ran, who recorded it), kept as written."""

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for feed in self.samples for a in feed.values())


def file_name(model_sha256: str, model: str) -> str:
    """``<stem>-<sha16>.npz``: the stem for people, the digest so that two models never share a file."""
    return f"{stem(model)}-{model_sha256[:SHA_DIGITS]}.npz"


def stem(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).stem if model != BYTES_MODEL else "model")[:60] or "model"


def member(sample: int, input_index: int) -> str:
    return f"s{sample:04d}_{input_index}"


@dataclass(frozen=True)
class Meta:
    """A recording's ``__meta__`` (and a part's header): the fields above, and any other key kept as
    written in ``extra``. A file without ``calls`` or ``picked`` has one call per sample."""

    model_sha256: Annotated[str, SHA256]
    inputs: tuple[str, ...]
    samples: Annotated[int, AT_LEAST_0]
    model: str = BYTES_MODEL
    calls: Annotated[int, AT_LEAST_0] = 0
    picked: tuple[Annotated[int, AT_LEAST_0], ...] = ()
    units: tuple[str, ...] = ()
    feedback: tuple[tuple[str, str], ...] = ()
    streams: tuple[tuple[Annotated[int, AT_LEAST_0], ...], ...] = ()
    skipped: tuple[tuple[str, Annotated[int, AT_LEAST_0]], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body.pop("extra"), "format": FORMAT, "version": VERSION, **body}

    @classmethod
    def json_in(cls, body: dict[str, Any]) -> dict[str, Any]:
        count = body.get("samples")
        count = count if type(count) is int and count >= 0 else 0
        known = {f.name for f in fields(cls)} - {"extra"}
        return {"calls": count, "picked": list(range(count)), **{k: v for k, v in body.items() if k in known},
                "extra": {k: v for k, v in body.items() if k not in known}}

    def mismatches(self) -> list[str]:
        """What its fields say against one another."""
        problems = []
        if not self.inputs or len(set(self.inputs)) != len(self.inputs):
            problems.append("inputs: must name each input once")
        if len(self.picked) != self.samples or (self.units and len(self.units) != self.samples):
            problems.append("picked, units: must have one entry per sample")
        if any(a not in self.inputs for a, _ in self.feedback):
            problems.append("feedback: must hold [input, output] pairs naming the model's inputs")
        members = [i for s in self.streams for i in s]
        if any(not s for s in self.streams) or len(set(members)) != len(members) or \
                any(i >= self.samples for i in members) or (self.feedback and len(members) != self.samples):
            problems.append("streams: must list every sample once, in streams of at least one step")
        return problems


RECORDING = Format(FORMAT, VERSION, READS)


def meta_of(rec: Recording) -> Meta:
    return Meta(rec.model_sha256, rec.inputs, len(rec.samples), rec.model, rec.calls, rec.picked, rec.units,
                rec.feedback, rec.streams, rec.skipped, rec.extra)


def check_meta(data: Any, label: str) -> Meta:
    """A recording's metadata (decoded JSON) checked, or one ShrinkrayError naming every problem."""
    try:
        meta: Meta = decode(Meta, opened(data, RECORDING))
        problems = meta.mismatches()
    except Invalid as exc:
        problems = list(exc.problems)
    if problems:
        raise ShrinkrayError(f"not a readable recording: {'; '.join(problems)}", path=label, hint=AGAIN)
    return meta
