"""Plain records of what was encoded and how verification judged it (JSON through ``codec``); what a
whole shrink returns is ``shrink_result``, and the words of the one line per model are ``verdict``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hatch_shrinkray.codec import OMIT, SKIP
from hatch_shrinkray.evidence import Evidence
from hatch_shrinkray.footprint import Memory
from hatch_shrinkray.sizes import Sizes


@dataclass(frozen=True)
class TensorRecord:
    """What happened to one weight tensor."""

    name: str
    scope: str
    """``main`` or the path of the subgraph (``node If_0/then_branch``)."""
    location: str
    """``initializer`` or ``constant`` (a ``Constant`` node's ``value``)."""
    shape: tuple[int, ...]
    dtype: str
    original_bytes: int
    stored_bytes: int
    encoding: str
    """E.g. ``int8 symmetric axis=0``, ``fp16``, ``kept``, ``dedup -> W1``."""
    note: str = ""
    max_abs_error: float = 0.0
    rel_rms_error: float = 0.0


@dataclass(frozen=True)
class OutputComparison:
    name: str
    max_abs: float
    rel_l2: float
    cosine: float
    top1: float | None
    """Share of unchanged discrete answers (``agreement_kind``), or None for outputs without any."""
    nonfinite_mismatch: int
    failures: tuple[str, ...] = ()
    agreement_kind: str = ""
    """``top-1`` (argmax of class scores), ``decision`` (``> 0.5`` of a probability), ``equal``
    (integer outputs) or empty."""
    positions: int = 0
    flips: int = 0
    near_ties: int = 0
    """Flips where the original was nearly tied; reported, not counted against the model."""
    unchecked: str = ""
    """Why this output of the original cannot show a difference on these inputs (constant, NaN)."""
    judge: str = ""
    """What judged its answers (``verification.judges``: ``map``, ``sequence``, ``segments``, ...)."""
    describes: str = ""
    """What one answer is (``lines``, ``maps``, ``streams``, ``labels``)."""
    answers: int = 0
    changed_answers: int = 0
    changed: tuple[bool, ...] = field(default=(), repr=False, metadata=SKIP)
    """Per sample (or stream) judged: did an answer change? For counting units; not reported."""
    detail: str = ""
    waived: tuple[str, ...] = ()
    """Numeric tolerances over their limit that did not count: the judge compared every answer of the
    output and each one held (``verification.compare.tolerance_applies``)."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        """An output that was never compared (judge ``off``) has no figures."""
        return {**body, "max_abs": None, "rel_l2": None, "cosine": None} if self.judge == "off" else body

    @classmethod
    def json_in(cls, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, **{k: "nan" for k in ("max_abs", "rel_l2", "cosine") if k in body and body[k] is None}}

    def answers_text(self) -> str:
        """``sequence 171/200 lines (CTC greedy, blank 0)``: what the judge compared; ``-`` without answers."""
        if not self.answers:
            return self.judge or "-"
        text = f"{self.judge} {self.answers - self.changed_answers}/{self.answers} {self.describes} same"
        return f"{text} ({self.detail})" if self.detail else text

    def agreement_text(self) -> str:
        """``99.0% (198/200)``, with the near-tie flips when there are any."""
        if self.top1 is None:
            return "-"
        text = f"{100 * self.top1:.1f}% ({self.positions - self.flips}/{self.positions})"
        return text[:-1] + (f"; {self.near_ties} at near-ties)" if self.near_ties else ")")


class Fit(Enum):
    """What became of a model's data-fitted choices (output-aware rounding, a plan)."""

    KEPT = "kept"
    """Fitted, and at least as good as round-to-nearest on units it was not fitted on: it ships."""
    NOT_KEPT = "not kept"
    """Fitted, and worse there: round-to-nearest ships."""
    NOT_FITTED = "not fitted"
    """Nothing was fitted, for a reason found before any comparison."""


class FitReason(Enum):
    """Why a fitted choice does not ship."""

    WORSE_HELD_OUT = "worse held out"
    FEW_UNITS = "too few independent units"
    FEW_ROWS = "too few rows"
    NO_ACTIVATIONS = "activations not visible"
    NO_RECORDING = "no recording of this model"
    NOTHING_SMALLER = "nothing smaller kept the answers"
    OVER_LIMITS = "its plan was over the limits"


@dataclass(frozen=True)
class FitNote:
    """What became of the data-fitted choices, as facts: the line a build prints words them
    (``verdict.fit_words``), and the manifest records :attr:`fit`."""

    fit: Fit
    subject: str
    """What was fitted: ``output-aware rounding``, ``auto's plan``, ``the plan``; ``rounding`` or
    ``auto`` for ``auto`` shipping int8 instead of a plan (``KEPT`` when that int8's rounding
    was fitted and kept)."""
    reason: FitReason | None = None
    units: int = 0
    """The independent units there were (``FEW_UNITS``)."""
    kind: str = ""
    """What those units are (``calls``, ``streams``, ...)."""
    instead: Fit | None = None
    """What ships where ``auto``'s plan does not: int8 as method ``int8`` writes it, its output-aware
    rounding ``KEPT`` (the fitted codes ship), ``NOT_KEPT`` or ``NOT_FITTED`` (round-to-nearest codes);
    None where no plan was at stake (method ``int8``, or a kept plan)."""


@dataclass(frozen=True)
class VerificationRecord:
    """A verification as the manifest and the cache keep it (:meth:`VerifyResult.record`); the fields a
    later version added have defaults, so what an earlier one wrote still reads."""

    passed: bool
    outputs: tuple[OutputComparison, ...] = ()
    samples: int = 0
    inputs: str = ""
    real_inputs: bool = True
    calibration_samples: int = 0
    notes: tuple[str, ...] = ()
    checker: str = "full"
    streams: int = 0
    fitting: str = ""
    fit: Fit | None = None
    floor: str = ""
    symbolic_dims: dict[str, int] = field(default_factory=dict)
    runtime: str = ""
    evidence: Evidence | None = None
    memory: Memory | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class VerifyResult:
    outputs: tuple[OutputComparison, ...]
    samples: int
    input_source: str
    """``recording tests/inputs/x-1234.npz (32 of 310 calls)``, ``data.npz`` or ``generated (...)``."""
    checker: str = "full"
    real: bool = True
    """False when the inputs were generated from the signature: a smoke check, not evidence."""
    calibration: int = 0
    """Real samples held apart to fit data-dependent choices (``auto``); the figures are on the
    other, held-out ``samples``. 0 when nothing was fitted or the fit was cross-fitted."""
    notes: tuple[str, ...] = ()
    evidence: Evidence | None = None
    """What the verdict rests on, counted over independent units (``evidence``)."""
    fitting: str = ""
    """What became of the data-fitted choices (kept, or fallen back to round-to-nearest, and why)."""
    fit: FitNote | None = None
    """The same as facts, for the one line a build prints per model (None: nothing to say)."""
    streams: int = 0
    """Streams of a recurrent model run in closed loop (0: calls judged one by one)."""
    symbols: tuple[tuple[str, int], ...] = ()
    """Generated inputs: the size each named symbolic dimension got, by name."""
    floor: str = ""
    """What a choice narrower than int8 was held to (decision 3): ``round-to-nearest`` (round-to-nearest int8's
    whole answers on the same units), ``budget`` (the accuracy budget the user set), or empty (not a
    narrower choice, or no whole answer changed)."""
    memory: Memory | None = None
    """Target ``memory``: both models' footprints, measured in fresh processes (``verification.memory``)."""
    runtime: str = ""
    """Where the shrunk model ran: ``onnxruntime 1.23.2 (CPU, ORT_ENABLE_ALL)``, the runtime and its
    graph optimization level (an encoding must compute the same at every level; tests/test_levels.py)."""

    @property
    def passed(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def compared(self) -> tuple[OutputComparison, ...]:
        """The outputs that were compared (an output whose judge is ``off`` has no figure)."""
        return tuple(o for o in self.outputs if o.judge != "off")

    @property
    def worst_cosine(self) -> float:
        return min((o.cosine for o in self.compared), default=1.0)

    @property
    def worst_rel_l2(self) -> float:
        return max((o.rel_l2 for o in self.compared), default=0.0)

    @property
    def weak(self) -> bool:
        return self.evidence is None or self.evidence.weak

    def breach(self) -> str:
        """The first limit broken, the output first (``probabilities: top-1 93.3% (152/163) < 95% (...)``);
        empty when verification passed."""
        failed = next((o for o in self.outputs if not o.ok), None)
        return "" if failed is None else f"{failed.name}: {failed.failures[0]}"

    def basis(self, symbols: bool = True) -> str:
        """What the figures rest on: ``8 held-out recorded samples (24 others fitted on)``, ``24
        recorded streams (7620 steps) in closed loop``; generated samples name the sizes their
        symbolic dimensions got (``symbols``: the short verdict leaves them to ``-v``)."""
        kind = "recorded" if self.real else "generated"
        held = "held-out " if self.calibration else ""
        ev = self.evidence
        if self.streams:
            text = f"{self.streams} {held}{kind} stream{'s' if self.streams != 1 else ''} ({self.samples} steps) " \
                   "in closed loop"
        elif self.real and ev is not None and ev.unit_kind not in ("samples", "units"):
            units = ev.unit_kind.replace("test cases", "tests")
            text = f"{ev.units} {held}{kind} {units if ev.units != 1 else units[:-1]}"
            if ev.units != self.samples:
                text += f" ({self.samples} calls)"
        else:
            text = f"{self.samples} {held}{kind} sample{'s' if self.samples != 1 else ''}"
        if symbols and self.symbols and not self.real:
            text += f" ({', '.join(f'{name}={size}' for name, size in self.symbols)})"
        return text + (f" ({self.calibration} others fitted on)" if self.calibration else "")

    def summary(self) -> str:
        """One line for ``-v`` and the reports: the worst output, what it rests on and how sure it is."""
        if not self.compared:
            text = f"no output compared (every judge is off) on {self.basis()}"
        else:
            text = f"cos {self.worst_cosine:.6f}, rel-L2 {self.worst_rel_l2:.2e}"
            agreeing = [o for o in self.compared if o.top1 is not None and o.agreement_kind != "equal"]
            if agreeing and (self.evidence is None or not self.real):
                worst = min(agreeing, key=lambda o: o.top1 if o.top1 is not None else 1.0)
                text += f", {worst.agreement_kind} {worst.agreement_text()}"
            text += f" on {self.basis()}"
            waived = [f"{w} ({o.name})" for o in self.compared if o.ok for w in o.waived]
            if waived:
                text += f"; {', '.join(waived)}: not counted: every answer held"
        if self.evidence is not None and self.real and self.compared:
            text += f"; {self.evidence.text()}"
        if self.fitting:
            text += f"; {self.fitting}"
        if self.memory is not None:
            text += f"; {self.memory.text()}"
        if self.runtime:
            text += f"; ran in {self.runtime}"
        return text

    def table(self, limits: dict[str, float] | None = None) -> str:
        rows = [["output", "max abs", "rel L2", "cosine", "decisions", "answers", "status"]]
        for o in self.outputs:
            status = "ok" if o.ok else "FAIL (below)"
            if o.unchecked and o.ok:
                status = f"not checked: the original is {o.unchecked}"
            elif o.waived and o.ok:
                status = f"ok: every answer held ({'; '.join(o.waived)}: not counted)"
            if o.judge == "off":
                rows.append([o.name, "-", "-", "-", "-", "judge off", "not judged"])
                continue
            rows.append([o.name, _fmt(o.max_abs), _fmt(o.rel_l2), f"{o.cosine:.6f}",
                         (f"{o.agreement_kind} " if o.agreement_kind else "") + o.agreement_text(),
                         o.answers_text(), status])
        text = render_table(rows)
        text += "".join(f"\n{o.name}: {failure}" for o in self.outputs for failure in o.failures)
        if limits:
            text += "\nlimits: " + ", ".join(f"{k} {v:g}" for k, v in limits.items())
        return text

    def record(self) -> VerificationRecord:
        return VerificationRecord(
            self.passed, self.outputs, self.samples, self.input_source, self.real, self.calibration, self.notes,
            self.checker, self.streams, self.fitting, None if self.fit is None else self.fit.fit, self.floor,
            dict(self.symbols), self.runtime, self.evidence, self.memory)


def size_change(before: Sizes, after: Sizes) -> str:
    """``wheel 6.08 MB -> 1.45 MB (23.8%), web ~5.90 MB -> ~1.40 MB (~23.7%, estimated)``: the
    compressed sizes (reports say the raw sizes first); ``~`` marks the web estimate."""
    def ratio(a: int, b: int) -> str:
        return f"{100 * b / a:.1f}%" if a else "-"

    def web(s: Sizes) -> str:
        return f"~{human(s.web)}" if s.web_estimated else human(s.web)

    web_ratio = ratio(before.web, after.web)
    if before.web_estimated or after.web_estimated:
        web_ratio = f"~{web_ratio}, estimated"
    return (f"wheel {human(before.wheel)} -> {human(after.wheel)} ({ratio(before.wheel, after.wheel)}), "
            f"web {web(before)} -> {web(after)} ({web_ratio})")


def human(n: float) -> str:
    """Byte counts for people: ``6.59 MB`` (decimal units, as PyPI and file managers show them)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


def render_table(rows: list[list[str]]) -> str:
    """Plain left-aligned columns (build logs are not terminals: no box drawing, no colour)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _fmt(x: float) -> str:
    return f"{x:.3e}" if math.isfinite(x) else str(x)
