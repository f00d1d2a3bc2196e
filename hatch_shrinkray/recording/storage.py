"""Recording files on disk: written atomically and reproducibly, read back checked and bounded."""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.codec import encode
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording import compact
from hatch_shrinkray.recording.encode import encode_feed
from hatch_shrinkray.recording.format import (
    AGAIN,
    INDEX,
    META,
    TABLE,
    Meta,
    Recording,
    Stored,
    check_meta,
    file_name,
    member,
    meta_of,
)
from hatch_shrinkray.recording.npz import MAX_BYTES, pack, read_arrays, read_headers, write_blobs


def write_stored(path: Path, meta: Mapping[str, Any], samples: Sequence[Stored]) -> None:
    """Write a recording whose samples are already encoded (``meta``: ``codec.encode`` of a ``Meta``),
    atomically and reproducibly."""
    members = [(META, pack(np.array(json.dumps(meta, sort_keys=True))))]
    members += [(member(i, j) + suffix, blob) for i, sample in enumerate(samples) for j, suffix, blob in sample]
    write_blobs(path, members)


def write_recording(directory: Path, rec: Recording, *, name: str | None = None) -> Path:
    """Write ``rec`` as ``directory/<file_name>`` (or ``name``), atomically and reproducibly."""
    path = directory / (name or file_name(rec.model_sha256, rec.model))
    write_stored(path, encode(meta_of(rec)), [encode_feed(s, rec.inputs) for s in rec.samples])
    return path


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a recording file (it has a ``__meta__`` member), without reading arrays."""
    try:
        with zipfile.ZipFile(path) as archive:
            return f"{META}.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def read_meta(path: Path) -> Meta:
    """The checked metadata of a recording, without reading its samples."""
    return _checked_meta(_read(path, only_meta=True).get(META), str(path))


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
    inputs = meta.inputs
    later = {i for stream in meta.streams for i in stream[1:]}
    fed_back = {inputs.index(a) for a, _ in meta.feedback}
    decoded = 0
    pairs: list[dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]] | npt.NDArray[Any]]] = []
    for i in range(meta.samples):
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
    return Recording(meta.model_sha256, meta.model, inputs, samples, meta.calls, meta.picked, meta.units,
                     meta.feedback, meta.streams, meta.skipped, meta.extra)


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


def _checked_meta(raw: Any, label: str) -> Meta:
    """The metadata checked, or one ShrinkrayError naming every problem."""
    if raw is None:
        raise ShrinkrayError("not a readable recording: it has no __meta__ array", path=label, hint=AGAIN)
    try:
        meta = json.loads(str(raw[()]))
    except (ValueError, RecursionError, IndexError, TypeError) as exc:
        raise ShrinkrayError("not a readable recording: its __meta__ is not JSON", path=label, hint=AGAIN) from exc
    return check_meta(meta, label)

