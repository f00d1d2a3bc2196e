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
  ``verification.compact``: ``values[index]``, or per channel for a 2-D table). Every sample has its
  own shapes (text lines of different widths, audio chunks of different lengths);
* a stream's first sample holds every input; its later samples lack the feedback inputs, which come
  from the previous step's outputs. A stream may be a prefix of what ran (``stream_steps`` in the
  metadata: how many steps each stream ran).
"""

from __future__ import annotations

import json
import math
import re
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.verification import compact
from hatch_shrinkray.verification.npz import (
    MAX_BYTES,
    Blob,
    member_overhead,
    pack,
    read_arrays,
    read_headers,
    write_blobs,
)

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
    return f"{_stem(model)}-{model_sha256[:SHA_DIGITS]}.npz"


def _stem(model: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).stem if model != BYTES_MODEL else "model")[:60]
    return stem or "model"


def member(sample: int, input_index: int) -> str:
    return f"s{sample:04d}_{input_index}"


def encode_feed(feed: Mapping[str, npt.NDArray[Any]], inputs: Sequence[str]) -> Stored:
    """The members of one sample (the inputs ``feed`` holds), each array compact when that is smaller."""
    stored: list[tuple[int, str, Blob]] = []
    for j, name in enumerate(inputs):
        if name not in feed:
            continue
        array = np.asarray(feed[name])
        if array.nbytes <= SMALL:  # a sample rate, a flag, a short id list: the same ones again and again
            key = (array.dtype.str, array.shape, array.tobytes())
            blob = _small.get(key)
            if blob is None:
                blob = pack(array, deflate=False)
                if len(_small) < 4096:
                    _small[key] = blob
            stored.append((j, "", blob))
            continue
        encoded = compact.encode(array)
        if encoded is None:
            stored.append((j, "", pack(array, deflate=_worth_deflating(array))))
        else:
            stored += [(j, TABLE, pack(encoded[0], deflate=_worth_deflating(encoded[0]))),
                       (j, INDEX, _packed_index(encoded[1]))]
    return tuple(stored)


def _packed_index(index: npt.NDArray[Any]) -> Blob:
    """Indices deflated at level 1 when that leaves more than half of them (noise in every pixel of
    a photograph, where level 6 costs several times as long and saves nothing), else at level 6 (a
    clean rendering, where it is fast and much smaller)."""
    fast = pack(index, level=1)
    return fast if len(fast.data) * 2 > index.nbytes else pack(index)


PROBE = 4096
SMALL = 64
_small: dict[tuple[str, tuple[int, ...], bytes], Blob] = {}


def _worth_deflating(array: npt.NDArray[Any]) -> bool:
    """Deflate pays off on integers, booleans and indices, not on small or continuous floats (a few
    percent at best, at the cost of compressing every kept feed while the program runs): floats are
    deflated when a level-1 probe of their first 4 KB shrinks by a sixth."""
    if array.nbytes < 1024:
        return False
    if array.dtype.kind != "f":
        return True
    if array.nbytes < PROBE:
        return False
    probe = np.ascontiguousarray(array).reshape(-1)[: PROBE // array.dtype.itemsize].tobytes()
    return len(zlib.compress(probe, 1)) < len(probe) * 5 // 6


NAME_ALLOWANCE = "s000000_00.v"
"""A member name at least as long as any the writer gives (below a million samples and 100 inputs)."""


_OVERHEAD = member_overhead(NAME_ALLOWANCE)


def stored_bytes(sample: Stored) -> int:
    """Bytes ``sample`` takes in a recording file at most: compressed members and their zip headers."""
    return sum(len(blob.data) for _, _, blob in sample) + _OVERHEAD * len(sample)


def meta_of(rec: Recording) -> dict[str, Any]:
    return {**rec.extra, "format": FORMAT, "version": VERSION, "model_sha256": rec.model_sha256,
            "model": rec.model, "inputs": list(rec.inputs), "samples": len(rec.samples), "calls": rec.calls,
            "picked": list(rec.picked), "units": list(rec.units), "feedback": [list(p) for p in rec.feedback],
            "streams": [list(s) for s in rec.streams], "skipped": [list(s) for s in rec.skipped]}


def write_stored(path: Path, meta: Mapping[str, Any], samples: Sequence[Stored]) -> None:
    """Write a recording whose samples are already encoded, atomically and reproducibly."""
    meta = {**meta, "format": FORMAT, "version": VERSION}
    members = [(META, pack(np.array(json.dumps(meta, sort_keys=True))))]
    members += [(member(i, j) + suffix, blob) for i, sample in enumerate(samples) for j, suffix, blob in sample]
    write_blobs(path, members)


def write_recording(directory: Path, rec: Recording, *, name: str | None = None) -> Path:
    """Write ``rec`` as ``directory/<file_name>`` (or ``name``), atomically and reproducibly."""
    path = directory / (name or file_name(rec.model_sha256, rec.model))
    write_stored(path, meta_of(rec), [encode_feed(s, rec.inputs) for s in rec.samples])
    return path


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a recording file (it has a ``__meta__`` member), without reading arrays."""
    try:
        with zipfile.ZipFile(path) as archive:
            return f"{META}.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def read_meta(path: Path) -> dict[str, Any]:
    """The checked metadata of a recording, without reading its samples."""
    arrays = _read(path, only_meta=True)
    return _checked_meta(arrays.get(META), str(path))


EXPANDS = ("its samples would take {mb:.1f} MB once loaded, over the {limit:.0f} MB that a recording may take; "
           "record it again with `hatch-shrinkray record` (its --max-memory keeps a recording within this)")


def read_recording(path: Path) -> Recording:
    """The recording at ``path``, checked. What its samples take once loaded is bounded twice: as
    their headers declare it (before any data is read) and as decoded (``npz.MAX_BYTES`` both)."""
    label = str(path)
    declared = _declared(path)
    if declared > MAX_BYTES:
        raise ShrinkrayError(EXPANDS.format(mb=declared / 1e6, limit=MAX_BYTES / 1e6), path=label)
    arrays = _read(path)
    meta = _checked_meta(arrays.pop(META, None), label)
    inputs = tuple(meta["inputs"])
    feedback = tuple((a, b) for a, b in meta["feedback"])
    later = {i for stream in meta["streams"] for i in stream[1:]}
    fed_back = {inputs.index(a) for a, _ in feedback}
    decoded = 0
    pairs: list[dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]] | npt.NDArray[Any]]] = []
    for i in range(meta["samples"]):
        sample: dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]] | npt.NDArray[Any]] = {}
        for j, name in enumerate(inputs):
            key = member(i, j)
            if key in arrays:
                value = arrays.pop(key)
                sample[name] = value
                decoded += int(value.nbytes)
            elif key + TABLE in arrays and key + INDEX in arrays:
                table, index = arrays.pop(key + TABLE), arrays.pop(key + INDEX)
                sample[name] = (table, index)
                decoded += int(index.size) * table.dtype.itemsize
            elif i in later and j in fed_back:
                continue
            else:
                raise ShrinkrayError(f"not a readable recording: sample {i} lacks input {name!r} (array {key})",
                                     path=label, hint=AGAIN)
        pairs.append(sample)
    if arrays:
        raise ShrinkrayError(f"not a readable recording: unexpected arrays {', '.join(sorted(arrays)[:5])}",
                             path=label, hint=AGAIN)
    if decoded > MAX_BYTES:
        raise ShrinkrayError(EXPANDS.format(mb=decoded / 1e6, limit=MAX_BYTES / 1e6), path=label)
    samples = tuple({name: _decoded(value, name, i, label) for name, value in s.items()} for i, s in enumerate(pairs))
    known = {"format", "version", "model_sha256", "model", "inputs", "samples", "calls", "picked", "units",
             "feedback", "streams", "skipped"}
    return Recording(meta["model_sha256"], meta["model"], inputs, samples, meta["calls"], tuple(meta["picked"]),
                     tuple(meta["units"]), feedback, tuple(tuple(s) for s in meta["streams"]),
                     tuple((r, n) for r, n in meta["skipped"]), {k: v for k, v in meta.items() if k not in known})


def _declared(path: Path) -> int:
    """Bytes the members of ``path`` declare they take once loaded, a compact pair as the array it
    stands for (its index's elements times its table's item size). When the sizes the zip directory
    declares cannot add up to the bound (an index expands at most eightfold), the members' own
    headers are not read here: ``read_arrays`` checks each before allocating it."""
    try:
        with zipfile.ZipFile(path) as archive:
            upper = sum(i.file_size * (8 if i.filename.endswith(INDEX + ".npy") else 1) for i in archive.infolist())
    except (OSError, zipfile.BadZipFile, ValueError):
        upper = MAX_BYTES + 1  # read_headers says what is wrong
    if upper <= MAX_BYTES:
        return upper
    headers = read_headers(path)
    total = 0
    for name, (shape, dtype) in headers.items():
        elements = math.prod(shape)
        if name.endswith(INDEX) and name[:-len(INDEX)] + TABLE in headers:
            total += elements * headers[name[:-len(INDEX)] + TABLE][1].itemsize
        elif not name.endswith(TABLE) and name != META:
            total += elements * dtype.itemsize
    return total


def _read(path: Path, *, only_meta: bool = False) -> dict[str, Any]:
    return read_arrays(path, text=frozenset({META}), only=frozenset({META}) if only_meta else None)


def _decoded(value: Any, name: str, index: int, label: str) -> npt.NDArray[Any]:
    if not isinstance(value, tuple):
        return np.asarray(value)
    try:
        return compact.decode(*value)
    except ValueError as exc:
        raise ShrinkrayError(f"not a readable recording: sample {index}'s {name!r}: {exc}", path=label,
                             hint=AGAIN) from exc


def _checked_meta(raw: Any, label: str) -> dict[str, Any]:
    """The metadata with every field of the right type, or one ShrinkrayError saying which is not."""
    if raw is None:
        raise ShrinkrayError("not a readable recording: it has no __meta__ array", path=label, hint=AGAIN)
    try:
        meta = json.loads(str(raw[()]))
    except (ValueError, RecursionError, IndexError, TypeError) as exc:
        raise ShrinkrayError("not a readable recording: its __meta__ is not JSON", path=label, hint=AGAIN) from exc
    return check_meta(meta, label)


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


class NoRecording(ShrinkrayError):
    """A recording directory holds nothing for this model (by content or by name)."""


def find_recording(directory: Path, model_sha256: str, model_name: str) -> tuple[Path, str]:
    """The recording of the model with these bytes, or of the same file name (with a note saying so);
    :class:`NoRecording` when there is neither."""
    label = str(directory)
    files = sorted(p for p in directory.glob("*.npz") if p.is_file())
    exact = [p for p in files if p.name.endswith(f"-{model_sha256[:SHA_DIGITS]}.npz")]
    for path in exact:
        if read_meta(path)["model_sha256"] == model_sha256:
            return path, ""
    stem = _stem(Path(model_name).name)
    named = [p for p in files if p.name.rsplit("-", 1)[0] == stem]
    if len(named) == 1:
        return named[0], (f"matched {named[0].name} by file name, not by content: {model_name} changed since it "
                          "was recorded; record again to verify on inputs of this exact model")
    from hatch_shrinkray.hints import current, record_command, relative  # not in the recorded processes

    have = ", ".join(p.name for p in files[:6]) or "no recordings"
    more = " (several by that name)" if named else ""
    raise NoRecording(f"holds no recording of {model_name} (sha256 {model_sha256[:SHA_DIGITS]}...){more}; it has: "
                      f"{have}", path=label,
                      hint=f"record it: `{record_command(current().root, relative(directory, current().root))}`")


def spread(total: int, wanted: int) -> list[int]:
    """``wanted`` indices evenly spread over ``range(total)``, first and last included."""
    if total <= wanted:
        return list(range(total))
    if wanted <= 1:
        return [0][:wanted]
    return sorted({round(k * (total - 1) / (wanted - 1)) for k in range(wanted)})
