"""One sample's feed as the members of a recording file: each array compact when that is smaller,
deflated when that pays, and what those members take in the file."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.recording import compact
from hatch_shrinkray.recording.format import INDEX, TABLE, Stored
from hatch_shrinkray.recording.npz import Blob, member_overhead, pack


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



def digest(stored: Stored) -> str:
    """Identity of a stored sample: equal feeds give equal members (encoding is deterministic)."""
    h = hashlib.blake2b(digest_size=20)
    for j, suffix, blob in stored:
        h.update(b"%d%s:%d:%d:" % (j, suffix.encode(), blob.size, len(blob.data)))
        h.update(blob.data)
    return h.hexdigest()
