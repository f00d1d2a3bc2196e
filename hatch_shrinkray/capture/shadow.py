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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hatch_shrinkray.codec import SKIP
from hatch_shrinkray.evidence import Evidence
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.verification.compare import compare, expect
from hatch_shrinkray.verification.judges import UNKNOWN, Calls, Judge, calls_of, judge_for, per_character
from hatch_shrinkray.verification.judges.labels import Values

LOOSE = VerifyOptions(max_rel_l2=math.inf, min_cosine=-1.0, min_agreement=0.0)


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
    judge: str = ""
    """What judged the output's answers (``verification.judges``: ``boxes``, ``tags``, ``map``, ...)."""
    describes: str = ""
    answers: int = 0
    """Answers its judge compared (an image's boxes, a text's tags, a map's regions), over every call."""
    changed_answers: int = 0

    def add(self, name: str, ref: Any, got: Any, threshold: float, *, state: bool = False,
            judge_name: str = "auto", feed: Mapping[str, Any] | None = None, calls: Calls = UNKNOWN) -> None:
        """One call's values; ``state``: the output is fed back as an input (a recurrent state), whose
        error shows in the outputs it feeds: numbers only, no decisions. ``judge_name``: the judge
        the ``judges`` key names for this output (``auto``: detected, ``feed`` telling a tagger's
        per-character scores from a CTC recogniser's; ``calls``: what the call's inputs and outputs tell,
        a streaming detector's state or a recogniser's image)."""
        if state and self.kind:
            self.kind, self.positions, self.flips, self.near_ties, self.flipped_calls = "", 0, 0, 0, 0
        r = np.asarray(ref)
        judge: Judge = Values()
        if not state:
            judge = judge_for(judge_name, [r], characters=feed is not None and per_character([r], [feed]),
                              calls=calls) or Values()
        c = compare(name, expect([r], threshold, judge), [np.asarray(got)], LOOSE, threshold)
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
        self.judge, self.describes = self.judge or c.judge, self.describes or c.describes
        self.answers += c.answers
        self.changed_answers += c.changed_answers

    def merge(self, other: OutputStats) -> None:
        for f in ("calls", "sum_rel_l2", "sum_cosine", "nonfinite_calls", "positions", "flips", "near_ties",
                  "flipped_calls", "answers", "changed_answers"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.judge, self.describes = self.judge or other.judge, self.describes or other.describes
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
    """One model's shadow runs in one process (or, merged, in the whole command).

    Units: each stream a recurrent model ran (closed loop: the shrunk model on its own state), and
    each call of a model without state. A unit changed when any decision in it flipped."""

    calls: int = 0
    errors: int = 0
    first_error: str = ""
    outputs: dict[str, OutputStats] = field(default_factory=dict)
    units: int = 0
    changed_units: int = 0
    streams: int = 0
    """Units of more than one step (a state fed back from call to call)."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False, metadata=SKIP)
    _open: dict[str, bool] = field(default_factory=dict, repr=False, compare=False, metadata=SKIP)
    """This process's units by key: changed so far (keys are process-local; counts are merged)."""

    def observe(self, names: list[str], ref: list[Any], got: list[Any], threshold: float, *,
                unit: str | None = None, continued: bool = False, states: frozenset[str] = frozenset(),
                judges: Mapping[str, str] | None = None, feed: Mapping[str, Any] | None = None) -> None:
        with self.lock:
            self.calls += 1
            flips = 0
            calls = calls_of([ref], [feed] if feed is not None else [], recurrent=bool(states))
            for name, r, g in zip(names, ref, got, strict=True):
                if (judges or {}).get(name) == "off":
                    continue  # switched off: not compared, so no figure either
                if isinstance(r, np.ndarray) and isinstance(g, np.ndarray):
                    stats = self.outputs.setdefault(name, OutputStats())
                    flipped, changed = stats.flips, stats.changed_answers
                    stats.add(name, r, g, threshold, state=name in states,
                              judge_name=(judges or {}).get(name, "auto"), feed=feed, calls=calls)
                    # a changed answer where the judge compares answers (a flipped pixel of a map whose
                    # regions hold changes nothing, as ``gated`` counts), else a flipped decision
                    flips += stats.changed_answers - changed if stats.answers else stats.flips - flipped
            key = unit if unit is not None else f"call{self.calls}"
            if key not in self._open:
                self._open[key] = False
                self.units += 1
            elif continued and not self._open.get(f"{key}\0stepped", False):
                self.streams += 1
                self._open[f"{key}\0stepped"] = True
            if flips and not self._open[key]:
                self._open[key] = True
                self.changed_units += 1

    def failed(self, message: str) -> None:
        with self.lock:
            self.calls += 1
            self.errors += 1
            self.first_error = self.first_error or message

    def merge(self, other: ModelStats) -> None:
        self.calls += other.calls
        self.units += other.units
        self.changed_units += other.changed_units
        self.streams += other.streams
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

    @property
    def answers(self) -> int:
        return sum(o.answers for o in self.outputs.values())

    def gated(self) -> tuple[int, int, str]:
        """What ``check --shadow``'s gate counts, ``(changed, judged, what)``: the answers the outputs'
        judges compared (an image's boxes, a text's tags, a map's regions: what the package takes
        from them, as the build's verification counts them), and only for an output whose judge
        compares no answers, its decisions. A pixel of a map or a frame of a line that flips while
        every region and every line holds changes nothing the package returns."""
        judged = [o for o in self.outputs.values() if o.answers]
        rows = [o for o in self.outputs.values() if not o.answers and o.positions]
        changed = sum(o.changed_answers for o in judged) + sum(o.flips for o in rows)
        counted = sum(o.answers for o in judged) + sum(o.positions for o in rows)
        words = {o.describes for o in judged} | ({"decisions"} if rows else set())
        return changed, counted, words.pop() if len(words) == 1 else "answers"

    def evidence(self) -> Evidence:
        """The decisions, answers and units compared, with the bound on the share of units that changed."""
        kind = "streams" if self.streams else "calls"
        describes = {o.describes for o in self.outputs.values() if o.answers}
        return Evidence(self.units, self.changed_units, kind, answers=self.answers,
                        changed_answers=sum(o.changed_answers for o in self.outputs.values()),
                        decisions=self.positions, flips=self.flips,
                        describes=describes.pop() if len(describes) == 1 else "answers")
