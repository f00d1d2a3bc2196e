"""Shadow statistics: on every ``run()`` of a configured model, the original's outputs against the
shrunk model's on the very same feeds, summed up per output over every call the workload made.

Per output: calls compared, worst and mean relative L2 and cosine, largest absolute difference,
and the discrete answers a caller takes from it (argmax of class scores, or ``> threshold`` of a
probability output, as ``verification.compare`` reads them): positions, flips, flips at near-ties
and calls with any flip. Plain data, so each process can write its part as JSON and ``check`` can
merge the parts.
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.verification.compare import compare

LOOSE = VerifyOptions(max_rel_l2=math.inf, min_cosine=-1.0, min_top1=0.0)


@dataclass
class OutputStats:
    calls: int = 0
    worst_rel_l2: float = 0.0
    sum_rel_l2: float = 0.0
    worst_cosine: float = 1.0
    sum_cosine: float = 0.0
    max_abs: float = 0.0
    nonfinite_calls: int = 0
    """Calls where NaN/inf appeared in one model's output and not at the same place in the other's."""
    kind: str = ""
    """``top-1``, ``decision`` or ``equal`` (integer outputs); empty for outputs without discrete answers."""
    positions: int = 0
    flips: int = 0
    near_ties: int = 0
    flipped_calls: int = 0

    def add(self, name: str, ref: Any, got: Any, threshold: float) -> None:
        c = compare(name, [np.asarray(ref)], [np.asarray(got)], LOOSE, threshold)
        self.calls += 1
        self.worst_rel_l2 = max(self.worst_rel_l2, c.rel_l2)
        self.sum_rel_l2 += c.rel_l2
        self.worst_cosine = min(self.worst_cosine, c.cosine)
        self.sum_cosine += c.cosine
        self.max_abs = max(self.max_abs, c.max_abs) if math.isfinite(c.max_abs) else self.max_abs
        self.nonfinite_calls += c.nonfinite_mismatch > 0
        if c.agreement_kind:
            self.kind = self.kind or c.agreement_kind
            self.positions += c.positions
            self.flips += c.flips
            self.near_ties += c.near_ties
            self.flipped_calls += c.flips > 0

    def merge(self, other: OutputStats) -> None:
        for f in ("calls", "sum_rel_l2", "sum_cosine", "nonfinite_calls", "positions", "flips", "near_ties",
                  "flipped_calls"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.worst_rel_l2 = max(self.worst_rel_l2, other.worst_rel_l2)
        self.worst_cosine = min(self.worst_cosine, other.worst_cosine)
        self.max_abs = max(self.max_abs, other.max_abs)
        self.kind = self.kind or other.kind

    @property
    def mean_rel_l2(self) -> float:
        return self.sum_rel_l2 / self.calls if self.calls else 0.0

    @property
    def mean_cosine(self) -> float:
        return self.sum_cosine / self.calls if self.calls else 1.0


@dataclass
class ModelStats:
    """One model's shadow runs in one process (or, merged, in the whole command)."""

    calls: int = 0
    errors: int = 0
    first_error: str = ""
    outputs: dict[str, OutputStats] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def observe(self, names: list[str], ref: list[Any], got: list[Any], threshold: float) -> None:
        with self.lock:
            self.calls += 1
            for name, r, g in zip(names, ref, got, strict=True):
                if isinstance(r, np.ndarray) and isinstance(g, np.ndarray):
                    self.outputs.setdefault(name, OutputStats()).add(name, r, g, threshold)

    def failed(self, message: str) -> None:
        with self.lock:
            self.calls += 1
            self.errors += 1
            self.first_error = self.first_error or message

    def merge(self, other: ModelStats) -> None:
        self.calls += other.calls
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        for name, stats in sorted(other.outputs.items()):
            self.outputs.setdefault(name, OutputStats()).merge(stats)

    @property
    def flips(self) -> int:
        """Changed answers, near-ties included: the program would have acted differently."""
        return sum(o.flips for o in self.outputs.values())

    @property
    def positions(self) -> int:
        return sum(o.positions for o in self.outputs.values())

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "errors": self.errors, "first_error": self.first_error,
                "outputs": {n: asdict(o) for n, o in sorted(self.outputs.items())}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelStats:
        return cls(int(data["calls"]), int(data["errors"]), str(data.get("first_error", "")),
                   {str(n): OutputStats(**o) for n, o in data.get("outputs", {}).items()})
