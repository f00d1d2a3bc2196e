"""Read a built wheel, check it, and write a changed copy the way the wheel spec asks.

The copy keeps every entry's permissions and compression, and every ``.dist-info`` file except
``RECORD``, which is written anew with the urlsafe-base64 sha256 (no padding) and size of every
file and an empty hash for its own line. Entries are sorted with the ``.dist-info`` directory last
and ``RECORD`` at the very end (the spec's recommendation), and every entry keeps the input's
timestamp unless ``SOURCE_DATE_EPOCH`` is set, so the same input and changes give the same bytes.
The file appears only when complete (temporary file beside it, then an atomic rename).
"""

from __future__ import annotations

import base64
import calendar
import csv
import hashlib
import io
import os
import shutil
import struct
import time
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from hatch_shrinkray.errors import ShrinkrayError, one_line, quoted
from hatch_shrinkray.files import replacing

SIGNATURES = ("RECORD.jws", "RECORD.p7s")
ZIP_EPOCH = 315532800  # 1980-01-01: the earliest time a zip entry can hold
NAME_MAX = 255
"""The longest file name (one path component) common file systems hold, in bytes."""
RECORD_MAX_BYTES = 64 << 20
"""RECORD lists a line per file: megabytes at most for the largest wheels."""
LOCAL_HEADER = struct.Struct("<4s5H3L2H")
"""A zip local file header: signature, version, flags, method, time, date, CRC, sizes, name and
extra field lengths."""


@dataclass(frozen=True)
class Wheel:
    """A checked wheel: its path, its ``.dist-info`` directory and its file entries (each name
    once: see ``duplicates``)."""

    path: Path
    dist_info: str
    entries: tuple[zipfile.ZipInfo, ...]
    duplicates: tuple[str, ...] = ()
    """Names the archive holds more than once, every copy with the same bytes: written once.
    Copies that differ are refused: which one an installer takes is up to the installer."""
    record_fields: Mapping[str, list[str]] = field(default_factory=dict)
    """By name: the sha256 and size fields RECORD gets for the entry's bytes as read and checked."""

    @property
    def record(self) -> str:
        return f"{self.dist_info}/RECORD"


def open_wheel(path: Path) -> Wheel:
    """Check that ``path`` is a wheel whose entries can be trusted, and list them.

    Refused: a file name that is not a wheel's, a damaged archive, absolute or ``..`` entry names,
    a missing ``.dist-info/RECORD``, a signed ``RECORD`` (a rewrite would void the signature) and
    files whose bytes differ from what ``RECORD`` says (the input is damaged; shipping it on
    would hide that).
    """
    label = str(path)
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise ShrinkrayError(f"not a wheel file name: {exc}", path=label,
                             hint="pass the .whl files a build wrote") from exc
    try:
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            _check_names(infos, label)
            _check_layout(zf, label)
            record_text = _read_record(zf, infos, label)
            dist_info = _dist_info(infos, label)
            fields = _check_record(zf, Wheel(path, dist_info, tuple(infos)), record_text)
            wheel = _unique(Wheel(path, dist_info, tuple(infos)), fields, label)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError, OverflowError) as exc:
        raise ShrinkrayError(f"cannot read the wheel: {one_line(exc, 200)}", path=label,
                             hint="rebuild it; the file is damaged or not a zip archive") from exc
    except NotImplementedError as exc:  # zipfile: "That compression method is not supported"
        raise ShrinkrayError(f"an entry uses a compression method wheels do not ({exc})", path=label,
                             hint="rebuild the wheel; wheels are stored or deflated zip archives") from exc
    expected = f"{name.replace('-', '_')}-{version}.dist-info".lower()
    if wheel.dist_info.lower() != expected:
        raise ShrinkrayError(f"its metadata directory is {wheel.dist_info}, the file name says {expected}",
                             path=label, hint="rebuild the wheel")
    return wheel


def _check_names(infos: list[zipfile.ZipInfo], label: str) -> None:
    """Refuse entry names that escape the install directory, that name one file two ways
    (``a//b``, ``a/./b``), that are a file and a directory at once, and encrypted entries."""
    files = {i.filename for i in infos}
    for info in infos:
        name = info.filename
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or "\\" in name or not name:
            raise ShrinkrayError(f"unsafe entry name {quoted(name)}", path=label,
                                 hint="this wheel would write outside site-packages; do not install it")
        if pure.as_posix() != name or "." in pure.parts or "\0" in name:
            raise ShrinkrayError(f"entry name {quoted(name)} is not a plain relative path", path=label,
                                 hint="rebuild the wheel")
        if any(len(part.encode()) > NAME_MAX for part in pure.parts):
            raise ShrinkrayError(f"entry name {quoted(name)} has a part longer than {NAME_MAX} bytes, which no file "
                                 "system holds", path=label, hint="rebuild the wheel; it cannot be installed")
        parent = next((p.as_posix() for p in pure.parents if p.as_posix() in files), None)
        if parent is not None:
            raise ShrinkrayError(f"{quoted(parent)} is both a file and the directory of {quoted(name)}", path=label,
                                 hint="rebuild the wheel; no installer can unpack it")
        if info.flag_bits & 0x1:
            raise ShrinkrayError(f"entry {quoted(name)} is encrypted", path=label, hint="rebuild the wheel")


def _check_layout(zf: zipfile.ZipFile, label: str) -> None:
    """Refuse entries whose stored bytes overlap: the zip-bomb layout, where many entries point into
    the same compressed data and reading them all (as the RECORD check must) would never end.
    Without overlap, what is read is bounded by deflate's ratio (about 1000:1) times the file."""
    assert zf.fp is not None
    end, previous = 0, ""
    for info in sorted(zf.infolist(), key=lambda i: i.header_offset):
        if info.header_offset < end:
            raise ShrinkrayError(f"entries {quoted(previous)} and {quoted(info.filename)} overlap in the archive",
                                 path=label, hint="this is how zip bombs are made; do not install it")
        zf.fp.seek(info.header_offset)
        header = zf.fp.read(LOCAL_HEADER.size)
        if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header for {info.filename}")
        name_length, extra_length = LOCAL_HEADER.unpack(header)[-2:]
        end = info.header_offset + LOCAL_HEADER.size + name_length + extra_length + info.compress_size
        previous = info.filename


def _unique(wheel: Wheel, fields: list[list[str]], label: str) -> Wheel:
    """``wheel`` with each name once and RECORD's fields of each entry. Copies of one name with
    the same bytes are kept once; copies that differ (or of RECORD itself) are refused."""
    by_name: dict[str, zipfile.ZipInfo] = {}
    record: dict[str, list[str]] = {}
    duplicates: list[str] = []
    for info, entry_fields in zip(wheel.entries, fields, strict=True):
        name = info.filename
        if name in by_name:
            if record[name] != entry_fields or name == wheel.record:
                raise ShrinkrayError(f"the archive holds {quoted(name)} more than once, with different bytes",
                                     path=label, hint="rebuild the wheel; which copy counts is up to each installer")
            if name not in duplicates:
                duplicates.append(name)
        by_name[name], record[name] = info, entry_fields
    return Wheel(wheel.path, wheel.dist_info, tuple(by_name.values()), tuple(sorted(duplicates)), record)


def _dist_info(infos: list[zipfile.ZipInfo], label: str) -> str:
    tops = {PurePosixPath(i.filename).parts[0] for i in infos if len(PurePosixPath(i.filename).parts) == 2
            and i.filename.endswith("/RECORD")}
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        raise ShrinkrayError(f"expected one .dist-info directory with a RECORD, found {len(dist_infos)}",
                             path=label, hint="rebuild the wheel")
    return dist_infos[0]


def _read_record(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], label: str) -> str:
    records = [i for i in infos if i.filename.endswith(".dist-info/RECORD") and i.filename.count("/") == 1]
    signed = [i.filename for i in infos if i.filename.endswith(SIGNATURES) and i.filename.count("/") == 1]
    if signed:
        raise ShrinkrayError(f"the wheel is signed ({signed[0]}); rewriting it would void the signature",
                             path=label, hint="rewrite the wheel before signing it")
    if not records:
        raise ShrinkrayError("the wheel has no .dist-info/RECORD", path=label, hint="rebuild the wheel")
    with zf.open(records[0]) as fh:
        data = fh.read(RECORD_MAX_BYTES + 1)
    if len(data) > RECORD_MAX_BYTES:
        raise ShrinkrayError(f"its RECORD is over {RECORD_MAX_BYTES >> 20} MB", path=label, hint="rebuild the wheel")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ShrinkrayError(f"its RECORD is not UTF-8 text ({exc.reason} at byte {exc.start})", path=label,
                             hint="rebuild the wheel; the wheel spec requires a UTF-8 RECORD") from exc


def _check_record(zf: zipfile.ZipFile, wheel: Wheel, record_text: str) -> list[list[str]]:
    """Every entry read through (zipfile checks its CRC) and hashed; refused when RECORD leaves it
    out or lists another hash. RECORD's sha256 and size fields of each entry, in entry order."""
    try:
        listed = {row[0]: row for row in csv.reader(io.StringIO(record_text)) if row}
    except csv.Error as exc:
        raise ShrinkrayError(f"its RECORD is not a CSV file ({exc})", path=str(wheel.path),
                             hint="rebuild the wheel") from exc
    fields = []
    for info in wheel.entries:
        row = listed.get(info.filename)
        if row is None and info.filename != wheel.record:
            raise ShrinkrayError(f"{info.filename} is in the archive but not in RECORD", path=str(wheel.path),
                                 hint="rebuild the wheel")
        algorithm, _, expected = row[1].partition("=") if row is not None and len(row) >= 2 else ("", "", "")
        with zf.open(info) as fh:
            digest, size, other = _read_digests(fh, algorithm if algorithm in RECORD_HASHES else None)
        fields.append([digest, str(size)])
        if expected and (other if algorithm != "sha256" else digest.partition("=")[2]) != expected:
            raise ShrinkrayError(f"{info.filename} does not match its RECORD hash", path=str(wheel.path),
                                 hint="the wheel is damaged; rebuild it")
    return fields


RECORD_HASHES = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
"""RECORD hash algorithms checked (the wheel spec allows any of hashlib's guaranteed ones but md5
and sha1); an entry under another name is still read through and CRC-checked."""


def _read_digests(fh: IO[bytes], other: str | None) -> tuple[str, int, str]:
    """RECORD's sha256 field and the size of a stream, and its digest under ``other`` (urlsafe
    base64, no padding)."""
    digest = hashlib.sha256()
    extra = hashlib.new(other) if other is not None and other != "sha256" else None
    size = 0
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        digest.update(chunk)
        if extra is not None:
            extra.update(chunk)
        size += len(chunk)
    return f"sha256={_b64(digest.digest())}", size, "" if extra is None else _b64(extra.digest())


def record_fields(path: Path) -> list[str]:
    """RECORD's hash and size fields of the file at ``path`` (an installed distribution's RECORD
    takes the same fields as a wheel's)."""
    with open(path, "rb") as fh:
        digest, size, _ = _read_digests(fh, None)
    return [digest, str(size)]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> None:
    """One entry's bytes into ``target`` (names were checked by :func:`open_wheel`)."""
    with zf.open(info) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def head(zf: zipfile.ZipFile, info: zipfile.ZipInfo, size: int) -> bytes:
    """The first ``size`` bytes of an entry (decompressing no more than that)."""
    with zf.open(info) as src:
        return src.read(size)


ZIP_END = calendar.timegm((2107, 12, 31, 23, 59, 59))
"""The last second a zip entry can hold (its year is stored as 7 bits from 1980)."""


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` as a zip-representable time, or ``None`` when unset. Earlier than 1980
    becomes 1980 (as hatchling does); past 2107 cannot be written and is an error."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if not value:
        return None
    try:
        seconds = int(value)
    except ValueError as exc:
        raise ShrinkrayError(f"SOURCE_DATE_EPOCH must be an integer number of seconds; got {quoted(value)}",
                             hint="set it to a time from 1980 to 2107, e.g. `git log -1 --format=%ct`, "
                                  "or unset it") from exc
    if seconds > ZIP_END:
        raise ShrinkrayError(f"SOURCE_DATE_EPOCH is {quoted(value)}, past 2107-12-31 23:59:59, the last time a zip "
                             "entry can hold", hint="set it to a time from 1980 to 2107, or unset it")
    return max(seconds, ZIP_EPOCH)


def write_wheel(wheel: Wheel, destination: Path, replace: Mapping[str, Path], drop: frozenset[str]) -> None:
    """Write ``wheel`` to ``destination`` with the entries in ``replace`` taking the given files'
    bytes and the entries in ``drop`` left out; ``RECORD`` is rebuilt. Atomic.

    Entries that keep their bytes are copied as they are stored, compressed bytes and CRC
    included (never unpacked to disk or memory, never compressed again); only replaced entries
    are compressed, with their original's method. A full or read-only destination is one
    ShrinkrayError, and nothing is left there."""
    epoch = source_date_epoch()
    with written_beside(destination) as tmp:
        with zipfile.ZipFile(wheel.path) as src, zipfile.ZipFile(tmp, "w") as out:
            rows: list[list[str]] = []
            for info in _ordered(wheel, drop):
                entry = _entry(info, epoch)
                if info.filename in replace:
                    with open(replace[info.filename], "rb") as fh, out.open(entry, "w", force_zip64=True) as dst:
                        rows.append([info.filename, *_copy(fh, dst)])
                else:
                    rows.append([info.filename, *_copy_stored(src, info, out, entry, wheel.record_fields)])
            rows.append([wheel.record, "", ""])
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(rows)
            record = next(i for i in wheel.entries if i.filename == wheel.record)
            out.writestr(_entry(record, epoch), text.getvalue().encode("utf-8"))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, wheel.path.stat().st_mode & 0o777)


@contextmanager
def written_beside(destination: Path) -> Iterator[str]:
    """``files.replacing`` for a wheel: an OSError becomes one ShrinkrayError."""
    try:
        with replacing(destination) as tmp:
            yield str(tmp)
    except OSError as exc:
        raise ShrinkrayError(f"cannot write the wheel: {exc.strerror or exc}", path=str(destination),
                             hint="free some space there or choose another -o directory") from exc


def _copy_stored(src: zipfile.ZipFile, info: zipfile.ZipInfo, out: zipfile.ZipFile, entry: zipfile.ZipInfo,
                 wheel_fields: Mapping[str, list[str]]) -> list[str]:
    """Append ``info``'s stored (compressed) bytes to ``out`` under ``entry``; RECORD's fields.

    zipfile has no public call for this, so the entry is written the way ``ZipFile.open(..., "w")``
    writes one (local header at the current position, then the data; ``filelist`` and
    ``start_dir`` for the central directory), with the sizes and CRC known up front. The bytes
    copied are the ones :func:`open_wheel` decompressed, CRC-checked and hashed against RECORD.
    """
    assert src.fp is not None and out.fp is not None
    src.fp.seek(info.header_offset)
    header = src.fp.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_length, extra_length = LOCAL_HEADER.unpack(header)[-2:]
    src.fp.seek(info.header_offset + LOCAL_HEADER.size + name_length + extra_length)
    entry.CRC, entry.compress_size, entry.file_size = info.CRC, info.compress_size, info.file_size
    entry.header_offset = out.fp.tell()
    out.fp.write(entry.FileHeader(max(info.file_size, info.compress_size) > zipfile.ZIP64_LIMIT))
    remaining = info.compress_size
    while remaining:
        chunk = src.fp.read(min(remaining, 1 << 20))
        if not chunk:
            raise zipfile.BadZipFile(f"{info.filename} is truncated")
        out.fp.write(chunk)
        remaining -= len(chunk)
    out.filelist.append(entry)
    out.NameToInfo[entry.filename] = entry
    out.start_dir = out.fp.tell()
    return list(wheel_fields[info.filename])


def _ordered(wheel: Wheel, drop: frozenset[str]) -> Iterator[zipfile.ZipInfo]:
    """Files first, then ``.dist-info`` (both sorted), ``RECORD`` left for the caller."""
    kept = [i for i in wheel.entries if i.filename not in drop and i.filename != wheel.record]
    yield from sorted(kept, key=lambda i: (i.filename.startswith(f"{wheel.dist_info}/"), i.filename))


def _entry(info: zipfile.ZipInfo, epoch: int | None) -> zipfile.ZipInfo:
    """A fresh entry with ``info``'s name, permissions and compression, and the fixed time."""
    entry = zipfile.ZipInfo(info.filename, date_time=info.date_time if epoch is None else time.gmtime(epoch)[:6])
    entry.external_attr = info.external_attr
    entry.create_system = info.create_system
    entry.compress_type = info.compress_type
    return entry


def _copy(src: IO[bytes], dst: IO[bytes]) -> list[str]:
    """Copy ``src`` to ``dst``; RECORD's hash and size fields for its bytes."""
    digest = hashlib.sha256()
    size = 0
    for chunk in iter(lambda: src.read(1 << 20), b""):
        digest.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    return [f"sha256={_b64(digest.digest())}", str(size)]
