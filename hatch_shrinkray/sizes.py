"""What a model costs the people who download it: bytes on disk, in a wheel, and over the web.

* ``disk``: the raw file.
* ``wheel``: the zip member as hatchling writes it. Hatchling (1.21-1.33, ``builders/wheel.py``)
  opens its ``ZipFile`` with ``compression=ZIP_DEFLATED`` and no ``compresslevel``, so ``zipfile``
  asks zlib for ``Z_DEFAULT_COMPRESSION`` (level 6), raw deflate (``wbits=-15``), memLevel 8, the
  default strategy; hatchling feeds it 16 KiB reads, which gives the same stream as one call. The
  member's compressed bytes are counted, not its local and central headers. Another
  zlib build (zlib-ng) may deflate a little differently; this is the running Python's zlib.
* ``web``: brotli at quality 11 with the default window (lgwin 22): what a CDN serving
  ``Content-Encoding: br`` from precompressed files sends. Quality 11 is slow on weight data
  (minutes on a large model), so it is measured only when it decides something (target ``web``) or
  is asked for; otherwise the figure is an estimate, and says so (:attr:`Sizes.web_estimated`).

The estimate needs no brotli: LZMA (the standard library's ``lzma``, ``ESTIMATOR``) of the data, or
of 8 evenly spread 512 KiB slices of anything over 4 MiB, scaled to the whole. It tracks brotli 11
closely across float, fp16, level and codebook encodings (its error band: ``ESTIMATE_HIGH``).
With target ``web`` brotli 11 decides which file ships, so it measures the shrunk file
where the two estimates are close enough for their error to matter (:func:`clearly_apart`), and the
original where the shrunk file's measured bytes still cannot settle the never-larger rule
(:func:`clearly_below`): brotli 11 of a large model can take longer than the rest of the build.

Nothing here imports beyond the standard library (``brotli`` when installed), ``errors`` and ``codec``, so the
build hook's light path can report archive sizes without the engine.
"""

from __future__ import annotations

import lzma
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from hatch_shrinkray.codec import AT_LEAST_0
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.pool import checkpoint
from hatch_shrinkray.signals import stop_request

TARGETS = ("wheel", "web", "disk", "memory")
"""What ``target`` may name: the size that the never-larger rule and the methods' choices minimise.
``memory`` is the weights' bytes in a running process (``methods.resident``), which only a session
measures (``verification.memory``): its never-larger rule counts the wheel's bytes (``COUNTED``)."""
COUNTED = {"memory": "wheel"}
"""The size the never-larger rule counts for a target that is not a file's size."""
DEFAULT_TARGET = "wheel"

WHEEL_LEVEL = 6
"""``zlib.Z_DEFAULT_COMPRESSION``: what ``zipfile`` uses when hatchling gives no level."""
BROTLI_QUALITY = 11
BROTLI_LGWIN = 22
COMPRESS_EXTRA = "hatch-shrinkray-core[compress]"
BROTLI_HINT = f"pip install '{COMPRESS_EXTRA}'"

CHUNK = 1 << 20
ESTIMATE_WHOLE = 4 << 20
"""Inputs up to this size are estimated whole; above it, from ``ESTIMATE_SLICES`` slices."""
ESTIMATE_SLICES = 8
ESTIMATE_SLICE = 512 << 10
ESTIMATE_HIGH = 1.5
"""The most the estimate is taken to overstate brotli 11: well above the largest ratio measured on
the benchmark corpus, with room for the slices of a large file missing a stretch that brotli
compresses far better than the rest."""
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 0, "mode": lzma.MODE_NORMAL, "mf": lzma.MF_BT2, "nice_len": 32}]
"""LZMA's optimal parsing (normal mode) with the cheapest binary-tree match finder: its fast mode took short
matches that cost more than the literals on int8 codes with few levels, overestimating brotli 11 there."""
ESTIMATOR = "lzma2 preset 0, normal mode, bt2, nice_len 32"

Source = bytes | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""Bytes, a file, or several files (a model and its external-data files: one zip member and one
download each, so their sizes add up)."""


@dataclass(frozen=True)
class Sizes:
    """The three sizes of one model (all its files)."""

    raw: Annotated[int, AT_LEAST_0]
    wheel: Annotated[int, AT_LEAST_0]
    web: Annotated[int, AT_LEAST_0]
    web_estimated: bool = False
    """``web`` is the LZMA estimate, not brotli 11 measured."""

    def of(self, target: str) -> int:
        """The size ``target`` counts (``memory``: the wheel's, ``COUNTED``)."""
        return {"disk": self.raw, "wheel": self.wheel, "web": self.web}[COUNTED.get(target, target)]


def measure(source: Source, *, exact_web: bool = False) -> Sizes:
    """Raw and wheel bytes, and web bytes: brotli 11 with ``exact_web`` (brotli must be installed:
    :func:`brotli_problem`), else the estimate."""
    web = web_bytes(source) if exact_web else web_estimate(source)
    return Sizes(raw_bytes(source), wheel_bytes(source), web, web_estimated=not exact_web)


def target_bytes(source: Source, target: str) -> int:
    """Exactly the bytes ``target`` counts (``web``: brotli 11, which must be installed)."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return {"disk": raw_bytes, "wheel": wheel_bytes, "web": web_bytes}[COUNTED.get(target, target)](source)


def clearly_below(web: int, estimate: int) -> bool:
    """``web`` (brotli 11 bytes) is below the brotli 11 bytes that ``estimate`` (:func:`web_estimate`)
    stands for, whatever the estimate's error (``ESTIMATE_HIGH``): only then may those be left unmeasured."""
    return web * ESTIMATE_HIGH < estimate


def clearly_apart(shrunk: int, original: int) -> bool:
    """Both LZMA estimates (:func:`web_estimate`), ``shrunk``'s brotli 11 bytes are below ``original``'s
    whatever the error of either estimate (``ESTIMATE_HIGH``, taken both ways: it
    bounds the understatement too, always the smaller error where measured)."""
    return shrunk * ESTIMATE_HIGH * ESTIMATE_HIGH < original


def raw_bytes(source: Source) -> int:
    return sum(part.size() for part in _inputs(source))


def wheel_bytes(source: Source) -> int:
    """The deflated size of each file as a wheel member, summed."""
    total = 0
    for one in _inputs(source):
        deflate = zlib.compressobj(WHEEL_LEVEL, zlib.DEFLATED, -15)
        total += sum(len(deflate.compress(chunk)) for chunk in one.chunks()) + len(deflate.flush())
    return total


def web_bytes(source: Source) -> int:
    """Brotli quality 11 (lgwin 22) of each file, summed; streamed, so memory stays flat."""
    problem = brotli_problem()
    if problem:
        raise ShrinkrayError(f"the web size is brotli quality 11 bytes, and {problem}", hint=BROTLI_HINT)
    import brotli

    total = 0
    for one in _inputs(source):
        encoder = brotli.Compressor(quality=BROTLI_QUALITY, lgwin=BROTLI_LGWIN)
        total += sum(len(encoder.process(chunk)) for chunk in one.chunks()) + len(encoder.finish())
    return total


def web_estimate(source: Source) -> int:
    """The LZMA estimate of :func:`web_bytes` (module docstring), summed over the files."""
    total = 0
    for one in _inputs(source):
        size = one.size()
        slices = one.slices()
        taken = sum(len(s) for s in slices)
        packed = 0
        for piece in slices:
            checkpoint()
            packed += len(lzma.compress(piece, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS))
        total += round(packed * size / taken) if taken else 0
    return total


def brotli_problem() -> str | None:
    """Why brotli 11 cannot be measured here, or None."""
    try:
        import brotli  # noqa: F401
    except ImportError as exc:
        stop = stop_request(exc)  # Ctrl-C while the extension initialised: still a request to stop
        if stop is not None:
            raise stop from None
        return "brotli is not installed"
    return None


class _Input:
    """One file, or bytes: its size, its chunks, and the slices the estimate reads."""

    def __init__(self, data: bytes | Path) -> None:
        self.data = data

    def size(self) -> int:
        return len(self.data) if isinstance(self.data, bytes) else self.data.stat().st_size

    def chunks(self) -> Iterator[bytes]:
        if isinstance(self.data, bytes):
            view = memoryview(self.data)
            for i in range(0, len(view), CHUNK):
                checkpoint()
                yield bytes(view[i:i + CHUNK])
            return
        with open(self.data, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                checkpoint()
                yield chunk

    def slices(self) -> list[bytes]:
        """The whole input up to ``ESTIMATE_WHOLE``, else evenly spread slices of it."""
        size = self.size()
        starts = [0] if size <= ESTIMATE_WHOLE else [
            round(i * (size - ESTIMATE_SLICE) / (ESTIMATE_SLICES - 1)) for i in range(ESTIMATE_SLICES)]
        length = size if size <= ESTIMATE_WHOLE else ESTIMATE_SLICE
        if isinstance(self.data, bytes):
            return [self.data[s:s + length] for s in starts]
        with open(self.data, "rb") as fh:
            out = []
            for s in starts:
                fh.seek(s)
                out.append(fh.read(length))
            return out


def _inputs(source: Source) -> list[_Input]:
    if isinstance(source, bytes):
        return [_Input(source)]
    return [_Input(Path(source))] if isinstance(source, (str, os.PathLike)) else [_Input(Path(p)) for p in source]
