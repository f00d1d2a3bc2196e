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
import csv
import hashlib
import io
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from hatch_shrinkray.errors import ShrinkrayError

SIGNATURES = ("RECORD.jws", "RECORD.p7s")
ZIP_EPOCH = 315532800  # 1980-01-01: the earliest time a zip entry can hold


@dataclass(frozen=True)
class Wheel:
    """A checked wheel: its path, its ``.dist-info`` directory and its file entries."""

    path: Path
    dist_info: str
    entries: tuple[zipfile.ZipInfo, ...]

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
            record_text = _read_record(zf, infos, label)
            wheel = Wheel(path, _dist_info(infos, label), tuple(infos))
            _check_record(zf, wheel, record_text)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShrinkrayError(f"cannot read the wheel: {exc}", path=label,
                             hint="rebuild it; the file is damaged or not a zip archive") from exc
    expected = f"{name.replace('-', '_')}-{version}.dist-info".lower()
    if wheel.dist_info.lower() != expected:
        raise ShrinkrayError(f"its metadata directory is {wheel.dist_info}, the file name says {expected}",
                             path=label, hint="rebuild the wheel")
    return wheel


def _dist_info(infos: list[zipfile.ZipInfo], label: str) -> str:
    for info in infos:
        pure = PurePosixPath(info.filename)
        if pure.is_absolute() or ".." in pure.parts or "\\" in info.filename or not info.filename:
            raise ShrinkrayError(f"unsafe entry name {info.filename!r}", path=label,
                                 hint="this wheel would write outside site-packages; do not install it")
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
    return zf.read(records[0]).decode("utf-8")


def _check_record(zf: zipfile.ZipFile, wheel: Wheel, record_text: str) -> None:
    listed = {row[0]: row for row in csv.reader(io.StringIO(record_text)) if row}
    for info in wheel.entries:
        if info.filename == wheel.record:
            continue
        row = listed.get(info.filename)
        if row is None:
            raise ShrinkrayError(f"{info.filename} is in the archive but not in RECORD", path=str(wheel.path),
                                 hint="rebuild the wheel")
        if len(row) >= 2 and row[1].startswith("sha256="):
            with zf.open(info) as fh:
                actual = _copy(fh, None)[0]
            if actual != row[1]:
                raise ShrinkrayError(f"{info.filename} does not match its RECORD hash", path=str(wheel.path),
                                     hint="the wheel is damaged; rebuild it")


def extract(wheel: Wheel, directory: Path) -> None:
    """Every file of the wheel under ``directory`` (names were checked by :func:`open_wheel`)."""
    with zipfile.ZipFile(wheel.path) as zf:
        for info in wheel.entries:
            target = directory / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` as a zip-representable time, or ``None`` when unset."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if not value:
        return None
    try:
        return max(int(value), ZIP_EPOCH)
    except ValueError as exc:
        raise ShrinkrayError(f"SOURCE_DATE_EPOCH must be an integer number of seconds; got {value!r}") from exc


def write_wheel(wheel: Wheel, destination: Path, replace: Mapping[str, Path], drop: frozenset[str]) -> None:
    """Write ``wheel`` to ``destination`` with the entries in ``replace`` taking the given files'
    bytes and the entries in ``drop`` left out; ``RECORD`` is rebuilt. Atomic."""
    epoch = source_date_epoch()
    fd, tmp = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(wheel.path) as src, zipfile.ZipFile(tmp, "w") as out:
            rows: list[list[str]] = []
            for info in _ordered(wheel, drop):
                entry = _entry(info, epoch)
                with (open(replace[info.filename], "rb") if info.filename in replace else src.open(info)) as fh, \
                        out.open(entry, "w", force_zip64=True) as dst:
                    rows.append([info.filename, *_copy(fh, dst)])
            rows.append([wheel.record, "", ""])
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(rows)
            record = next(i for i in wheel.entries if i.filename == wheel.record)
            out.writestr(_entry(record, epoch), text.getvalue().encode("utf-8"))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_of(wheel.path))
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _ordered(wheel: Wheel, drop: frozenset[str]) -> Iterator[zipfile.ZipInfo]:
    """Files first, then ``.dist-info`` (both sorted), ``RECORD`` left for the caller."""
    kept = [i for i in wheel.entries if i.filename not in drop and i.filename != wheel.record]
    yield from sorted(kept, key=lambda i: (i.filename.startswith(f"{wheel.dist_info}/"), i.filename))


def _entry(info: zipfile.ZipInfo, epoch: int | None) -> zipfile.ZipInfo:
    """A fresh entry with ``info``'s name, permissions and compression, and the fixed time."""
    stamp = info.date_time if epoch is None else time.gmtime(epoch)[:6]
    entry = zipfile.ZipInfo(info.filename, date_time=stamp)
    entry.external_attr = info.external_attr
    entry.create_system = info.create_system
    entry.compress_type = info.compress_type
    return entry


def _copy(src: IO[bytes], dst: IO[bytes] | None) -> list[str]:
    """Copy ``src`` to ``dst`` (or just read it); RECORD's hash and size fields for its bytes."""
    digest = hashlib.sha256()
    size = 0
    for chunk in iter(lambda: src.read(1 << 20), b""):
        digest.update(chunk)
        if dst is not None:
            dst.write(chunk)
        size += len(chunk)
    return ["sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii"), str(size)]


def _mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777
