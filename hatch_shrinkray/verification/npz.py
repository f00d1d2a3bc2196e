"""Reading ``.npz`` files without trusting them, and writing them byte for byte reproducibly.

A sample file comes from a user or a recording and may be anything: truncated, a string array, an
array whose header declares gigabytes. Each member's ``.npy`` header is read and checked before its
data is, so nothing is decompressed or allocated beyond a cap, pickles are refused, and every
problem is one :class:`ShrinkrayError` naming the file and the array.

``numpy.savez`` stamps members with the current time; :func:`write_arrays` uses a fixed timestamp and
order instead, so the same arrays always give the same bytes (recordings are committed to git).
"""

from __future__ import annotations

import os
import tempfile
import tokenize
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.errors import ShrinkrayError

MAX_BYTES = 1_000_000_000
"""Largest total size of the arrays of one file once loaded (1 GB): a sample file holds a few
dozen model inputs; more is a mistake or a zip bomb."""
NUMERIC_KINDS = "biuf"
"""bool, signed and unsigned integers, floats: what a model input can be fed from."""
HINT = "write it with numpy.savez(path, input_name=array, ...) or record it with `hatch-shrinkray record`"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def read_arrays(path: Path, *, max_bytes: int = MAX_BYTES, text: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every member of ``path`` by name; numeric arrays only, except the 0-d string members in ``text``."""
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
            if info.is_dir():
                continue
            try:
                with archive.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    shape, _, dtype = _header(fh, version)
                    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                    _check_member(name, dtype, nbytes, total=total, max_bytes=max_bytes, label=label, text=name in text)
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


def _header(fh: Any, version: tuple[int, int]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    return np.lib.format.read_array_header_2_0(fh)


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
                for name, array in arrays.items():
                    info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o644 << 16
                    with archive.open(info, "w", force_zip64=True) as fh:
                        np.lib.format.write_array(fh, np.asarray(array, order="C"), allow_pickle=False)
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; recordings are shared and committed
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
