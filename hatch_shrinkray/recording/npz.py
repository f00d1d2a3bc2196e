"""Reading ``.npz`` files without trusting them, and writing them byte for byte reproducibly.

A sample file comes from a user or a recording and may be anything: truncated, a string array, an
array whose header declares gigabytes. Each member's ``.npy`` header is read and checked before its
data is, so nothing is decompressed or allocated beyond a cap, pickles are refused, and every
problem is one :class:`ShrinkrayError` naming the file and the array.

``numpy.savez`` stamps members with the current time; :func:`write_arrays` uses a fixed timestamp and
order instead, so the same arrays always give the same bytes (recordings are committed to git).
"""

from __future__ import annotations

import errno
import io
import os
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import replacing

MAX_BYTES = 1_000_000_000
"""Largest total size of the arrays of one file once loaded (1 GB): a sample file holds a few
dozen model inputs; more is a mistake or a zip bomb."""
NUMERIC_KINDS = "biuf"
"""bool, signed and unsigned integers, floats: what a model input can be fed from."""
HINT = "write it with numpy.savez(path, input_name=array, ...) or record it with `hatch-shrinkray record`"


def read_arrays(path: Path, *, max_bytes: int = MAX_BYTES, text: frozenset[str] = frozenset(),
                only: frozenset[str] | None = None) -> dict[str, Any]:
    """Every member of ``path`` by name (or those in ``only``); numeric arrays only, except the 0-d
    string members in ``text``."""
    label = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ShrinkrayError(f"cannot read sample inputs: {_why(exc)}", path=label, hint=HINT) from exc
    arrays: dict[str, Any] = {}
    total = 0
    with archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if info.is_dir() or (only is not None and name not in only):
                continue
            try:
                with archive.open(info) as fh:
                    shape, _, dtype = _header(fh, np.lib.format.read_magic(fh))
                    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                    _check_member(name, dtype, nbytes, total=total, max_bytes=max_bytes, label=label, text=name in text)
                    if fh.tell() + nbytes > info.file_size:  # before allocating what the header claims
                        raise ShrinkrayError(f"array {name!r} is corrupt: its header declares {nbytes} bytes, more "
                                             "than the member holds", path=label, hint=HINT)
                    total += nbytes
                    fh.seek(0)
                    arrays[name] = np.lib.format.read_array(fh, allow_pickle=False)
            except ShrinkrayError:
                raise
            except (OSError, ValueError, EOFError, zipfile.BadZipFile, SyntaxError, tokenize.TokenError, TypeError,
                    OverflowError, RecursionError, MemoryError) as exc:  # numpy parses the header as Python
                why = f"its .npy header cannot be parsed ({exc.args[0] if exc.args else type(exc).__name__})" \
                    if isinstance(exc, (SyntaxError, tokenize.TokenError, RecursionError)) else _why(exc)
                raise ShrinkrayError(f"array {name!r} is corrupt: {why}", path=label, hint=HINT) from exc
    return arrays


def read_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    """The shape and dtype every member declares, by name, without reading any data; ShrinkrayError
    when the file or a header cannot be read."""
    label = str(path)
    headers: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                with archive.open(info) as fh:
                    shape, _, dtype = _header(fh, np.lib.format.read_magic(fh))
                headers[info.filename.removesuffix(".npy")] = (shape, dtype)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, SyntaxError, tokenize.TokenError, TypeError,
            OverflowError, RecursionError, MemoryError) as exc:
        raise ShrinkrayError(f"cannot read sample inputs: {_why(exc)}", path=label, hint=HINT) from exc
    return headers


def _header(fh: Any, version: tuple[int, int]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    return np.lib.format.read_array_header_1_0(fh) if version == (1, 0) else np.lib.format.read_array_header_2_0(fh)


def _check_member(name: str, dtype: np.dtype[Any], nbytes: int, *, total: int, max_bytes: int, label: str,
                  text: bool) -> None:
    if dtype.hasobject:
        raise ShrinkrayError(f"array {name!r} holds Python objects (a pickle); refused", path=label, hint=HINT)
    if dtype.kind not in NUMERIC_KINDS and not (text and dtype.kind == "U"):
        raise ShrinkrayError(f"array {name!r} has dtype {dtype}, which no model input takes", path=label,
                             hint="model inputs are numbers or booleans; " + HINT)
    if total + nbytes > max_bytes:
        raise ShrinkrayError(f"array {name!r} would take {nbytes / 1e6:.1f} MB when loaded, over the "
                             f"{max_bytes / 1e6:.0f} MB limit for one sample file", path=label,
                             hint="keep a few dozen samples per model (hatch-shrinkray record bounds this)")


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def write_arrays(path: Path, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
    """Write ``arrays`` (in the given order) as a deflated ``.npz``, atomically and reproducibly."""
    write_blobs(path, [(name, pack(array)) for name, array in arrays.items()])


class Blob(NamedTuple):
    """One ``.npy`` member as a zip file stores it (deflated, or as it is): what it takes in the file
    is known before it is written."""

    crc: int
    size: int
    """Bytes of the ``.npy`` (header and data) before compression."""
    data: bytes
    """Raw deflate stream, or the ``.npy`` itself (``method`` stored)."""
    method: int = zipfile.ZIP_DEFLATED

    def stored(self, name: str) -> int:
        """Bytes this member takes in the file under ``name`` (without ``.npy``): its local header,
        its compressed data and its central-directory entry."""
        return member_overhead(name) + len(self.data)


def member_overhead(name: str) -> int:
    """Bytes of the zip headers of a member called ``name`` (without ``.npy``)."""
    return _LOCAL.size + _CENTRAL.size + 2 * len(f"{name}.npy".encode())


_headers: dict[tuple[str, tuple[int, ...]], bytes] = {}


def pack(array: npt.NDArray[Any], *, deflate: bool = True, level: int = 6) -> Blob:
    """``array`` as a ``.npy`` member, deflated (level 6 by default, as ``zipfile`` writes) or stored
    as it is: the same array always gives the same bytes."""
    a = c_order(array)
    key = (a.dtype.str, a.shape)
    header = _headers.get(key)
    if header is None:
        buffer = io.BytesIO()
        fields = {"descr": np.lib.format.dtype_to_descr(a.dtype), "fortran_order": False, "shape": a.shape}
        try:
            np.lib.format.write_array_header_1_0(buffer, fields)
        except ValueError:  # a header over 64 KB
            buffer = io.BytesIO()
            np.lib.format.write_array_header_2_0(buffer, fields)
        header = buffer.getvalue()
        if len(_headers) < 4096:
            _headers[key] = header
    if not deflate:
        raw = header + a.tobytes()
        return Blob(zlib.crc32(raw), len(raw), raw, zipfile.ZIP_STORED)
    data = memoryview(a).cast("B") if a.size else b""  # type: ignore[arg-type]
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    blob = compressor.compress(header) + compressor.compress(data) + compressor.flush()
    return Blob(zlib.crc32(data, zlib.crc32(header)), len(header) + a.nbytes, blob)


def c_order(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``array`` in C order, 0-d arrays kept 0-d (``np.ascontiguousarray`` makes them 1-d)."""
    a = np.asarray(array)
    return a if a.flags.c_contiguous else a.copy(order="C")


_LOCAL = struct.Struct("<4s5H3L2H")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01: no time stamp, so the same arrays give the same file
_ZIP32 = 0xFFFFFFFF


def write_blobs(path: Path, members: Sequence[tuple[str, Blob]]) -> None:
    """A zip file of ``members`` (``name`` -> ``name.npy``), as ``numpy.savez_compressed`` readers
    expect, written atomically: readers see the old file or the new one. The file gets the mode new
    files get (the user's umask), like any file the user writes."""
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        central, offset = [], 0
        for name, blob in members:
            encoded = f"{name}.npy".encode()
            if offset + len(blob.data) >= _ZIP32 or blob.size >= _ZIP32:
                raise OSError(errno.EFBIG, "over 4 GB; record with a smaller --max-bytes")
            fh.write(_LOCAL.pack(b"PK\x03\x04", 20, 0, blob.method, 0, _DOS_DATE, blob.crc,
                                 len(blob.data), blob.size, len(encoded), 0))
            fh.write(encoded)
            fh.write(blob.data)
            central.append(_CENTRAL.pack(b"PK\x01\x02", (3 << 8) | 20, 20, 0, blob.method, 0,
                                         _DOS_DATE, blob.crc, len(blob.data), blob.size, len(encoded), 0, 0,
                                         0, 0, 0o100644 << 16, offset) + encoded)
            offset += _LOCAL.size + len(encoded) + len(blob.data)
        directory = b"".join(central)
        if len(central) > 0xFFFF or offset + len(directory) >= _ZIP32:
            raise OSError(errno.EFBIG, "too many arrays for one file; record with a smaller --max-samples")
        fh.write(directory)
        fh.write(_END.pack(b"PK\x05\x06", 0, 0, len(central), len(central), len(directory), offset, 0))
        fh.flush()
        os.fsync(fh.fileno())
