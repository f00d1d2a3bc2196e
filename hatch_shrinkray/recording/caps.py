"""The bounds of one model's recording and their defaults (``record --max-samples``, ``--max-bytes``,
``--max-memory``)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from hatch_shrinkray.evidence import MIN_UNITS

MAX_SAMPLES = 256
"""Default samples kept per model. The bytes bound (``MAX_BYTES``) decides for large inputs; small
ones need many samples: with a few dozen short audio chunks, ``auto`` fitted on too few failed its
own verification on the ones held out; this many leave enough to fit and to hold out."""
MAX_BYTES = 8_000_000
"""Default bytes of samples kept per model, in the file."""
MAX_BYTES_FOR_UNITS = 64_000_000
"""With the default byte bound, how far it grows when 16 independent units need more (a text
detector's pages from photographs, whose noise does not compress)."""
MAX_MEMORY = 512_000_000
"""Default bytes of a model's samples once loaded (the arrays a build decodes); a single feed may
take a sixteenth of it, so that 16 units always fit."""


@dataclass(frozen=True)
class Caps:
    """The bounds of one model's recording."""

    samples: int = MAX_SAMPLES
    bytes: int = MAX_BYTES
    """Stored bytes the samples take in the file: the target."""
    ceiling: int = MAX_BYTES_FOR_UNITS
    """How far the byte bound grows so that ``MIN_UNITS`` units fit; ``bytes`` makes it hard."""
    memory: int = MAX_MEMORY
    """Bytes of the samples' arrays once loaded."""

    @classmethod
    def hard(cls, samples: int = MAX_SAMPLES, max_bytes: int = MAX_BYTES, memory: int = MAX_MEMORY) -> Caps:
        return cls(samples, max_bytes, max_bytes, memory)

    @classmethod
    def given(cls, samples: int = MAX_SAMPLES, max_bytes: int | None = None, memory: int = MAX_MEMORY) -> Caps:
        """The bounds a user gave: a byte bound given is hard (it does not grow for ``MIN_UNITS``)."""
        return cls(samples, memory=memory) if max_bytes is None else cls.hard(samples, max_bytes, memory)

    @property
    def feed_bytes(self) -> int:
        """Stored bytes one feed may take."""
        return max(self.bytes, self.ceiling // MIN_UNITS)

    @property
    def feed_memory(self) -> int:
        """Decoded bytes one feed may take."""
        return self.memory // MIN_UNITS

    def byte_bound(self, unit_sizes: Iterable[int]) -> int:
        """The byte bound for units whose samples take ``unit_sizes`` (one each): the target, or what
        ``MIN_UNITS`` of them take (the smallest), up to the ceiling."""
        return max(self.bytes, min(self.ceiling, sum(heapq.nsmallest(MIN_UNITS, unit_sizes))))
