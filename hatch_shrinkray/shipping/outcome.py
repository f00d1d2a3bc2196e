"""What shipping decided for one model, as types: each line a build prints is worded from these
(``wording``), and nothing reads a decision back out of a sentence.

Six decisions are possible: *pass-through* (the bytes are what a manifest says we shipped, or the
sdist carries originals), *shrunk* or *cached* (new bytes ship), *unchanged* (nothing to shrink, or
not smaller), *kept-original* (generated inputs could not verify the shrunk model, or a plan
ships the original), and *already quantized* (the engine refused it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from hatch_shrinkray.shipping.cache import CachedShrink
from hatch_shrinkray.shipping.manifest import ManifestEntry
from hatch_shrinkray.shipping.plan import PlanEntry


@dataclass(frozen=True)
class PassThrough:
    """The file ships as it is: a manifest says we shipped these bytes (``entry``), or the sdist is
    configured to carry originals (``entry`` is None)."""

    entry: ManifestEntry | None
    outcome: ClassVar[str] = "pass-through"


@dataclass(frozen=True)
class PlannedOriginal:
    """``check --fix`` chose to ship this model's original bytes."""

    plan: PlanEntry
    outcome: ClassVar[str] = "kept-original"


@dataclass(frozen=True)
class Shrunk:
    """New bytes ship: shrunk now, or copied out of the cache (``cached``)."""

    record: CachedShrink
    cached: bool

    @property
    def outcome(self) -> str:
        return "cached" if self.cached else "shrunk"


@dataclass(frozen=True)
class Unchanged:
    """The original ships: no weight qualified, or the result would not have been smaller (``why``)."""

    record: CachedShrink
    why: str
    outcome: ClassVar[str] = "unchanged"


@dataclass(frozen=True)
class KeptOriginal:
    """The original ships: generated inputs could not verify the shrunk model (``why``)."""

    record: CachedShrink
    why: str
    outcome: ClassVar[str] = "kept-original"


@dataclass(frozen=True)
class AlreadyQuantized:
    """The engine refused the model (``message``); it ships unchanged, with nothing claimed about it."""

    message: str
    outcome: ClassVar[str] = "already-quantized"


Decision = PassThrough | PlannedOriginal | Shrunk | Unchanged | KeptOriginal | AlreadyQuantized
Shrinking = Shrunk | Unchanged | KeptOriginal | AlreadyQuantized
"""What a shrink (or the cache) decides."""


@dataclass(frozen=True)
class Shipped:
    """What one model contributed to the archive (for the total line and for tests)."""

    relpath: str
    outcome: str
    """``shrunk``, ``cached``, ``pass-through``, ``unchanged``, ``kept-original`` or ``already-quantized``."""
    original_size: int
    shipped_size: int
    files: tuple[tuple[str, Path], ...] = ()
    """``(relative path in the archive, file whose bytes go there)``: the model and, for outputs
    over 2 GB, its data file."""
    obsolete: tuple[str, ...] = ()
    """Relative external-data files of the original that the shrunk model no longer reads; they
    leave the archive."""
    entry: ManifestEntry | None = None
    """The manifest record (``None`` for an already-quantized model)."""

    @property
    def new_bytes(self) -> bool:
        """Whether what ships differs from the model's own bytes (shrunk or cached); otherwise the
        files are the original, or a copy of it made while it was hashed."""
        return self.outcome in ("shrunk", "cached")
