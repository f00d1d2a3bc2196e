"""Lossless compact storage of arrays with few distinct values: a value table plus narrow indices.

Real inputs often hold far fewer distinct values than their dtype allows: pixels normalized from an
8-bit image (at most 256 values per channel), token ids, audio from 16-bit PCM (at most 65536).
Such an array is stored as ``values`` (the distinct values, in the array's dtype) and ``index``
(``uint8`` or ``uint16``, the array's shape), and deflate then compresses the narrow indices far
better than the floats they stand for (a float32 page from an 8-bit image becomes one byte per
value before deflate even starts).

Exact: values are told apart by their bit patterns (integer views), so ``-0.0`` and ``0.0`` and
every NaN payload come back as they were. Decoding needs numpy alone:

* ``values`` 1-D: ``array = values[index]``;
* ``values`` 2-D, shape ``(C, K)`` (one table per channel, axis 1 of ``index``):
  ``array[:, c] = values[c][index[:, c]]`` for each channel ``c``.

An array is stored compactly only when that takes fewer bytes than the array itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

MIN_ELEMENTS = 1024
"""Smaller arrays are stored as they are: their table would cost about what the indices save."""
SAMPLED_ABOVE = 1 << 18
"""Larger arrays are first tried on a sample of their values, so continuous data is given up on early."""
SAMPLE = 1 << 14
MAX_CHANNELS = 64
Encoded = tuple[npt.NDArray[Any], npt.NDArray[Any]] | None


def encode(array: npt.NDArray[Any]) -> Encoded:
    """``(values, index)`` for ``array``, or None when storing it as it is takes fewer bytes."""
    a = np.asarray(array)
    if a.dtype.kind not in "biuf" or a.dtype.itemsize < 2 or a.size < MIN_ELEMENTS:
        return None
    a = np.ascontiguousarray(a)
    found = _table(a.view(np.dtype(f"u{a.dtype.itemsize}")).reshape(-1))
    if found is None:
        return None
    table, index = found
    values: npt.NDArray[Any]
    if len(table) <= 256:
        values, narrow = table, index.astype(np.uint8)
    else:
        per_channel = _per_channel(table, index, a.shape)
        if per_channel is not None:
            values, narrow = per_channel
        elif len(table) <= 65536:
            values, narrow = table, index.astype(np.uint16)
        else:
            return None
    return None if values.nbytes + narrow.nbytes >= a.nbytes else (values.view(a.dtype), narrow.reshape(a.shape))


def decode(values: npt.NDArray[Any], index: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The array ``(values, index)`` stand for; ValueError when they do not fit together."""
    if index.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"its index is {index.dtype}, not uint8 or uint16")
    if values.ndim == 1:
        if index.size and int(index.max()) >= len(values):
            raise ValueError("its index points past its table")
        decoded: npt.NDArray[Any] = values[index]
        return decoded
    if values.ndim != 2 or index.ndim < 2 or index.shape[1] != values.shape[0]:
        raise ValueError(f"a table of shape {values.shape} does not fit an index of shape {index.shape}")
    if index.size and int(index.max()) >= values.shape[1]:
        raise ValueError("its index points past its table")
    out = np.empty(index.shape, values.dtype)
    for c in range(values.shape[0]):
        out[:, c] = values[c][index[:, c]]
    return out


def _table(bits: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """The sorted distinct bit patterns and each element's position among them (at most 65536)."""
    if bits.size <= SAMPLED_ABOVE:
        table, index = np.unique(bits, return_inverse=True)
        return (table, index.reshape(-1)) if len(table) <= 65536 else None
    table = np.unique(bits[:: bits.size // SAMPLE])
    if len(table) > SAMPLE // 2:  # continuous values: no small table
        return None
    index = _positions(table, bits)
    missing = table[index] != bits
    if not missing.any():
        return table, index
    whole = np.union1d(table, bits[missing])  # values the sample did not see
    if len(whole) > 65536:
        return None
    index = np.searchsorted(whole, table)[index]
    index[missing] = np.searchsorted(whole, bits[missing])
    return whole, index


HASHED_UP_TO = 1024
"""Tables up to this size are looked up through a collision-free hash (a remainder), far faster than
a binary search over millions of elements; larger ones are searched."""
MAX_SLOTS = 1 << 20


def _positions(table: npt.NDArray[Any], bits: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """For each element, the position of its value in ``table`` (sorted) where it is there; some
    position otherwise (the caller compares)."""
    if len(table) <= HASHED_UP_TO:
        modulus = 4 * len(table) + 1
        while modulus <= MAX_SLOTS:
            slots = table % modulus
            if len(np.unique(slots)) == len(table):
                lookup = np.zeros(modulus, np.intp)
                lookup[slots] = np.arange(len(table))
                found: npt.NDArray[Any] = lookup[bits % modulus]
                return found
            modulus = modulus * 5 // 4 | 1
    return np.minimum(np.searchsorted(table, bits), len(table) - 1)


def _per_channel(table: npt.NDArray[Any], index: npt.NDArray[Any],
                 shape: tuple[int, ...]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """One table of at most 256 values per channel (axis 1), when each channel has that few."""
    if len(shape) < 2 or not 2 <= shape[1] <= MAX_CHANNELS:
        return None
    by_channel = index.reshape(shape[0], shape[1], -1)
    tables, remaps = [], []
    for c in range(shape[1]):
        present = np.bincount(by_channel[:, c].reshape(-1), minlength=len(table)) > 0
        if int(present.sum()) > 256:
            return None
        tables.append(table[present])
        remaps.append((np.cumsum(present) - 1).astype(np.uint8))
    width = max(len(t) for t in tables)
    values = np.stack([np.concatenate([t, np.repeat(t[-1:], width - len(t))]) for t in tables])
    narrow = np.empty(by_channel.shape, np.uint8)
    for c, remap in enumerate(remaps):
        narrow[:, c] = remap[by_channel[:, c]]
    return values, narrow
