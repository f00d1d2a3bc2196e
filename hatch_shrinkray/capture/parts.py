"""The file each process leaves per model at exit (a *part*), read back by ``run.finish`` moments later.

Not a recording: a private, temporary file in the run directory, laid out to be written and read
in one go (a part of a long stream holds thousands of arrays, and a zip member each would cost
more to write and read than the recording itself). ``HSRPART1``, the length of a JSON header, the
header (the part's metadata as a recording's ``__meta__``, and per sample its digest, stored and
decoded bytes and its members: input index, suffix, CRC, size, method, length and the CRC32 of the
stored bytes), then every member's stored bytes in that order. A part that is cut short or
damaged is refused as a whole (``ShrinkrayError``), and the others are merged without it.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray.codec import encode, loads
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording.format import Meta, check_meta
from hatch_shrinkray.recording.npz import Blob
from hatch_shrinkray.recording.select import Sample

MAGIC = b"HSRPART1"
_LENGTH = struct.Struct("<Q")


Member = tuple[int, str, int, int, int, int, int]
"""Input index, suffix, CRC, size, method, length and CRC32 of the stored bytes."""


@dataclass(frozen=True)
class Header:
    meta: Any
    """A ``Meta`` as written; read as JSON and checked by ``check_meta`` (naming the part)."""
    samples: tuple[tuple[int, str, int, int, tuple[Member, ...]], ...]
    """Per sample: its call, digest, stored and decoded bytes, and its members."""


def write_part(path: Path, meta: Meta, samples: list[Sample]) -> None:
    """Write a part (created with the umask's mode; complete under ``path`` or not there at all)."""
    rows = tuple((s.call, s.digest, s.nbytes, s.decoded, tuple((j, suffix, b.crc, b.size, b.method, len(b.data),
                                                                zlib.crc32(b.data)) for j, suffix, b in s.stored))
                 for s in samples)
    header = json.dumps(encode(Header(meta, rows)), sort_keys=True).encode()
    tmp = path.with_name(f".{path.name}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666), "wb") as fh:
        fh.write(MAGIC + _LENGTH.pack(len(header)) + header)
        for s in samples:
            for _, _, blob in s.stored:
                fh.write(blob.data)
    os.replace(tmp, path)


def read_part(path: Path) -> tuple[Meta, list[Sample]]:
    """A part's checked metadata and samples (calls numbered within the part)."""
    label = str(path)
    try:
        data = path.read_bytes()
        if data[:len(MAGIC)] != MAGIC:
            raise ValueError("not a part")
        (length,) = _LENGTH.unpack_from(data, len(MAGIC))
        start = len(MAGIC) + _LENGTH.size
        header: Header = loads(Header, data[start:start + length])
        meta = check_meta(header.meta, label)
        offset = start + length
        samples = []
        for call, digest, nbytes, decoded, members in header.samples:
            stored = []
            for j, suffix, crc, size, method, size_stored, data_crc in members:
                chunk = data[offset:offset + size_stored]
                offset += size_stored
                if len(chunk) != size_stored or zlib.crc32(chunk) != data_crc:
                    raise ValueError("cut short or damaged")
                stored.append((j, suffix, Blob(crc, size, chunk, method)))
            samples.append(Sample(call, tuple(stored), digest, nbytes, decoded))
        if offset != len(data) or len(samples) != meta.samples:
            raise ValueError("its samples do not match its header")
    except (OSError, ValueError, struct.error) as exc:  # codec.Invalid too
        raise ShrinkrayError(f"unreadable part: {exc}", path=label) from exc
    return meta, samples
