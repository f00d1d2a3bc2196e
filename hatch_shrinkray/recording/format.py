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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy.typing as npt

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
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).stem if model != BYTES_MODEL else "model")[:60]
    return name or "model"


def member(sample: int, input_index: int) -> str:
    return f"s{sample:04d}_{input_index}"



def meta_of(rec: Recording) -> dict[str, Any]:
    return {**rec.extra, "format": FORMAT, "version": VERSION, "model_sha256": rec.model_sha256,
            "model": rec.model, "inputs": list(rec.inputs), "samples": len(rec.samples), "calls": rec.calls,
            "picked": list(rec.picked), "units": list(rec.units), "feedback": [list(p) for p in rec.feedback],
            "streams": [list(s) for s in rec.streams], "skipped": [list(s) for s in rec.skipped]}



def check_meta(meta: Any, label: str) -> dict[str, Any]:
    """A recording's decoded metadata with every field of the right type, or one ShrinkrayError."""
    def bad(why: str) -> ShrinkrayError:
        return ShrinkrayError(f"not a readable recording: {why}", path=label, hint=AGAIN)

    if not isinstance(meta, dict):
        raise bad("its __meta__ is not a JSON object")
    if meta.get("format") != FORMAT:
        raise bad(f"format is {_shown(meta.get('format'))}")
    version = meta.get("version")
    if version not in READS or isinstance(version, bool):
        raise bad(f"version {_shown(version)}; this hatch-shrinkray reads versions {', '.join(map(str, READS))}")
    for key in ("model_sha256", "inputs", "samples"):
        if key not in meta:
            raise bad(f"its metadata lacks {key!r}")
    count = _int(meta["samples"], "samples", bad)
    inputs = _strings(meta["inputs"], "inputs", bad)
    if not inputs or len(set(inputs)) != len(inputs):
        raise bad("'inputs' must name each input once")
    sha = meta["model_sha256"]
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise bad("'model_sha256' must be 64 hex digits")
    model = meta.get("model", BYTES_MODEL)
    if not isinstance(model, str):
        raise bad("'model' must be a string")
    calls = _int(meta.get("calls", count), "calls", bad)
    picked = [_int(p, "picked", bad) for p in _list(meta.get("picked", list(range(count))), "picked", bad)]
    units = _strings(meta.get("units", []), "units", bad)
    if len(picked) != count or (units and len(units) != count):
        raise bad("'picked' and 'units' must have one entry per sample")
    feedback = []
    for pair in _list(meta.get("feedback", []), "feedback", bad):
        names = _strings(pair, "feedback", bad)
        if len(names) != 2 or names[0] not in inputs:
            raise bad("'feedback' must hold [input, output] pairs naming the model's inputs")
        feedback.append(names)
    streams = [[_int(i, "streams", bad) for i in _list(s, "streams", bad)] for s in _list(meta.get("streams", []),
                                                                                        "streams", bad)]
    members = [i for s in streams for i in s]
    if any(not s for s in streams) or len(set(members)) != len(members) or any(i >= count for i in members) \
            or (feedback and len(members) != count):
        raise bad("'streams' must list every sample once, in streams of at least one step")
    skipped = []
    for entry in _list(meta.get("skipped", []), "skipped", bad):
        pair = _list(entry, "skipped", bad)
        if len(pair) != 2 or not isinstance(pair[0], str):
            raise bad("'skipped' must hold [reason, count] pairs")
        skipped.append([pair[0], _int(pair[1], "skipped", bad)])
    return {**meta, "model_sha256": sha, "model": model, "inputs": inputs, "samples": count, "calls": calls,
            "picked": picked, "units": units, "feedback": feedback, "streams": streams, "skipped": skipped}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(value: Any, key: str, bad: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad(f"{key!r} must hold non-negative integers; got {_shown(value)}")
    return value


def _list(value: Any, key: str, bad: Any) -> list[Any]:
    if not isinstance(value, list):
        raise bad(f"{key!r} must be a list; got {_shown(value)}")
    return value


def _strings(value: Any, key: str, bad: Any) -> list[str]:
    items = _list(value, key, bad)
    if not all(isinstance(v, str) for v in items):
        raise bad(f"{key!r} must hold strings")
    return items
