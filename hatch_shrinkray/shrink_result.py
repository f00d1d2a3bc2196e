"""What a shrink returns: the model's sizes, every tensor's encoding, the verification, and the
float weights that stayed as they were (JSON through ``codec``: ``shrink --json``'s report)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hatch_shrinkray.codec import encode
from hatch_shrinkray.result import TensorRecord, VerifyResult, human, size_change
from hatch_shrinkray.sizes import Sizes


@dataclass(frozen=True)
class Failed:
    """A choice that failed its limits on the recording, and why in a few words: the model fell back."""

    label: str
    why: str


@dataclass(frozen=True)
class KeptFloat:
    """Float weights that stayed as they were, for one reason."""

    reason: str
    """``below min-elements``, ``excluded by exclude-ops``, ``would not be smaller``, ..."""
    count: int
    bytes: int


def kept_reason(note: str) -> str:
    """A kept tensor's note without its particulars (sizes, patterns, op names), for grouping."""
    reason = re.split(r" \(| pattern |[;:]", note, maxsplit=1)[0]
    return "would not be smaller" if reason.endswith("would not be smaller") else reason


NOT_WEIGHTS_SHOWN = 0.1
"""Name the bytes that are not weights once they are this share of the input: then they, not the
encoding, bound the ratio (some exports carry node metadata comparable to their weights)."""


@dataclass(frozen=True)
class ShrinkResult:
    source: str
    destination: str | None
    method: str
    original_size: int
    shrunk_size: int
    tensors: tuple[TensorRecord, ...]
    seconds: float
    verification: VerifyResult | None
    options: dict[str, Any] = field(default_factory=dict)
    external_data: tuple[str, ...] = ()
    """Names of data files written beside ``destination`` (only for outputs over 2 GB)."""
    kept_original: str | None = None
    """Why the original was written instead of the shrunk model (it would not have been smaller, or
    generated inputs could not verify it: ``unverified``)."""
    unverified: bool = False
    """The original was written because generated inputs could not verify the shrunk model (it
    failed on them, the original's outputs carry no signal there, or it does not run on them)."""
    kept_float: tuple[KeptFloat, ...] = ()
    not_weights: int = 0
    """Bytes of the input that are not float weights: graph, names, metadata, integer tensors."""
    source_sha256: dict[str, str] = field(default_factory=dict)
    """sha256 of every file that was read and shrunk, the model file first (the digests a cache
    or a manifest must use: a file rewritten meanwhile is refused, never mixed in)."""
    original_sizes: Sizes | None = None
    """Raw, wheel and web bytes of the input (``sizes``)."""
    shrunk_sizes: Sizes | None = None
    """The same for what was written (the original again when ``kept_original``)."""
    label: str = ""
    """What shipped, as the line names it (``int8 round-to-nearest`` after a fallback); empty: ``method``."""
    fell_back: tuple[Failed, ...] = ()
    """The choices that failed their limits on the recording before the one that shipped, cheapest first."""

    @property
    def target(self) -> str:
        return str(self.options.get("target", "wheel"))

    def size_text(self) -> str:
        """``wheel 6.08 MB -> 1.45 MB (23.8%), web ~5.90 MB -> ~1.40 MB (~23.7%, estimated)``;
        empty without sizes."""
        if self.original_sizes is None or self.shrunk_sizes is None:
            return ""
        return size_change(self.original_sizes, self.shrunk_sizes)

    def fallback_text(self) -> str:
        """``int4 failed: top-1 93.3% (152/163) < 95% on y; int8 round-to-nearest shipped``: the choices
        that failed their limits before the one that shipped (empty without a fallback)."""
        if not self.fell_back:
            return ""
        return "; ".join(f"{f.label} failed: {f.why}" for f in self.fell_back) + f"; {self.label} shipped"

    @property
    def ratio(self) -> float:
        return self.shrunk_size / self.original_size if self.original_size else 1.0

    @property
    def encoded(self) -> tuple[TensorRecord, ...]:
        return tuple(t for t in self.tensors if t.encoding != "kept")

    def kept_summary(self) -> str:
        """``kept float: 21 tensors below min-elements (113.96 KB), 2 excluded by exclude-ops (...)``,
        plus the bytes that are not weights when they matter; empty when there is nothing to say."""
        parts = []
        if self.kept_float:
            groups = [f"{k.count} {k.reason} ({human(k.bytes)})" for k in self.kept_float]
            first = self.kept_float[0]
            groups[0] = f"{first.count} tensor{'s' if first.count != 1 else ''} {groups[0].split(' ', 1)[1]}"
            parts.append("kept float: " + ", ".join(groups))
        if self.original_size and self.not_weights >= NOT_WEIGHTS_SHOWN * self.original_size:
            parts.append(f"{human(self.not_weights)} of the input is not weights (graph, names, metadata)")
        return "; ".join(parts)

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        """The report: both sizes under one key, what shipped, and the ratio and target for people."""
        sizes = {"original": body.pop("original_sizes"), "shrunk": body.pop("shrunk_sizes")}
        shipped = body.pop("label") or self.method
        body["verification"] = None if self.verification is None else encode(self.verification.record())
        return {**body, "ratio": round(self.ratio, 6), "seconds": round(self.seconds, 3), "target": self.target,
                "sizes": None if None in sizes.values() else sizes, "shipped": shipped}
