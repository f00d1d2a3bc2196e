"""Plain result records returned by the engine, verification and the report (JSON-ready)."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from hatch_shrinkray.evidence import Evidence
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
    changed: tuple[bool, ...] = field(default=(), repr=False)
    """Per sample (or stream) judged: did an answer change? For counting units; not reported."""
    detail: str = ""
    waived: tuple[str, ...] = ()
    """Numeric tolerances over their limit that did not count: the judge compared every answer of the
    output and each one held (``verification.compare.tolerance_applies``)."""

    @property
    def ok(self) -> bool:
        return not self.failures

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
    fitting_brief: str = ""
    """The same in a few words, for the one line a build prints per model (empty: nothing to say)."""
    streams: int = 0
    """Streams of a recurrent model run in closed loop (0: calls judged one by one)."""
    symbols: tuple[tuple[str, int], ...] = ()
    """Generated inputs: the size each named symbolic dimension got, by name."""

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

    def basis(self, symbols: bool = True) -> str:
        """What the figures rest on: ``8 held-out recorded samples (24 others fitted on)``, ``24
        recorded streams (7620 steps) in closed loop``; generated samples name the sizes their
        symbolic dimensions got (``symbols``: the short verdict leaves them to ``-v``)."""
        kind = "recorded" if self.real else "generated"
        held = "held-out " if self.calibration else ""
        if self.streams:
            text = f"{self.streams} {held}{kind} stream{'s' if self.streams != 1 else ''} ({self.samples} steps) " \
                   "in closed loop"
        else:
            text = f"{self.samples} {held}{kind} sample{'s' if self.samples != 1 else ''}"
        if symbols and self.symbols and not self.real:
            text += f" ({', '.join(f'{name}={size}' for name, size in self.symbols)})"
        return text + (f" ({self.calibration} others fitted on)" if self.calibration else "")

    def verdict(self) -> str:
        """The result in plain words, for the one line per model: ``same answers on 20 recorded
        calls``, ``answers changed on 2 of 40 recorded calls (weak evidence)``, ``within limits on 8
        generated samples (a smoke check)``; the figures are in :meth:`summary`."""
        within = "within limits" if self.passed else "FAILS verification"
        if not self.compared:
            return f"{'' if self.passed else within + ': '}no output compared (every judge is off)"
        if not self.real:
            sizes = "".join(f"{name}={size}; " for name, size in self.symbols)
            return f"{within} on {self.basis(symbols=False)} ({sizes}a smoke check)"
        ev = self.evidence
        if ev is None or not (ev.answers or ev.decisions):
            return f"{within} on {self.basis()} (numbers only)"
        on = f"{ev.units} {'held-out ' if self.calibration else ''}recorded {ev.unit_kind}"
        text = f"same answers on {on}" if not ev.changed_units else \
            f"answers changed on {ev.changed_units} of {on}"
        return ("" if self.passed else "FAILS verification (outputs past the limits); ") + text + \
            (" (weak evidence)" if ev.weak else "")

    def brief(self) -> str:
        """:meth:`verdict` and, when there is one, what became of the fitted choices in a few words."""
        return f"{self.verdict()}; {self.fitting_brief}" if self.fitting_brief else self.verdict()

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
        if self.evidence is not None and self.real and self.compared:
            text += f"; {self.evidence.text()}"
        if self.fitting:
            text += f"; {self.fitting}"
        return text

    def table(self, limits: dict[str, float] | None = None) -> str:
        head = ["output", "max abs", "rel L2", "cosine", "decisions", "answers", "status"]
        rows = [head]
        for o in self.outputs:
            status = "ok" if o.ok else "FAIL: " + "; ".join(o.failures)
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
        if limits:
            text += "\nlimits: " + ", ".join(f"{k} {v:g}" for k, v in limits.items())
        return text

    def to_dict(self) -> dict[str, Any]:
        ev = self.evidence
        return {"passed": self.passed, "samples": self.samples, "inputs": self.input_source,
                "real_inputs": self.real, "calibration_samples": self.calibration, "notes": list(self.notes),
                "checker": self.checker, "streams": self.streams, "fitting": self.fitting,
                "symbolic_dims": dict(self.symbols),
                "evidence": None if ev is None else {**asdict(ev), "upper_bound": round(ev.bound, 6), "weak": ev.weak},
                "outputs": [_output_dict(o) for o in self.outputs]}


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

    @property
    def target(self) -> str:
        return str(self.options.get("target", "wheel"))

    def size_text(self) -> str:
        """``wheel 6.08 MB -> 1.45 MB (23.8%), web ~5.90 MB -> ~1.40 MB (~23.7%, estimated)``;
        empty without sizes."""
        if self.original_sizes is None or self.shrunk_sizes is None:
            return ""
        return size_change(self.original_sizes, self.shrunk_sizes)

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "destination": self.destination, "method": self.method,
            "original_size": self.original_size, "shrunk_size": self.shrunk_size,
            "ratio": round(self.ratio, 6), "seconds": round(self.seconds, 3),
            "external_data": list(self.external_data), "options": self.options,
            "kept_original": self.kept_original, "unverified": self.unverified,
            "kept_float": [asdict(k) for k in self.kept_float],
            "not_weights": self.not_weights, "source_sha256": self.source_sha256,
            "tensors": [_clean(asdict(t)) for t in self.tensors],
            "target": self.target,
            "sizes": None if self.original_sizes is None or self.shrunk_sizes is None else
            {"original": self.original_sizes.to_dict(), "shrunk": self.shrunk_sizes.to_dict()},
            "verification": None if self.verification is None else self.verification.to_dict(),
        }


def model_line(path: str, original_size: int, shrunk_size: int, method: str, verdict: str, *, tail: str = "") -> str:
    """The one line per model a newcomer reads: ``src/pkg/m.onnx: 21.23 MB -> 5.98 MB (28.2%), int8,
    same answers on 20 recorded calls, 1.2 s``; the figures behind the verdict are for ``-v``."""
    ratio = f"{100 * shrunk_size / original_size:.1f}%" if original_size else "-"
    line = f"{path}: {human(original_size)} -> {human(shrunk_size)} ({ratio}), {method}, {verdict}"
    return f"{line}, {tail}" if tail else line


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


def _output_dict(o: OutputComparison) -> dict[str, Any]:
    """One output's comparison for JSON; one that was never compared (judge ``off``) has no figures."""
    out = _clean({k: v for k, v in asdict(o).items() if k != "changed"})
    if o.judge == "off":
        out.update(max_abs=None, rel_l2=None, cosine=None)
    return out


def _fmt(x: float) -> str:
    return f"{x:.3e}" if math.isfinite(x) else str(x)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN/inf: spell them as strings."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            out[k] = str(v)
        elif isinstance(v, tuple):
            out[k] = list(v)
        else:
            out[k] = v
    return out
