"""The words of the one line a build (and ``shrink``) prints per model: sizes, method, the verdict
in plain words and what became of the fitting, in at most ``LINE_LIMIT`` characters; the figures
behind them are in the verification's summary, for ``-v`` and the manifest.

Everything here words typed facts (``result.VerifyResult``, ``result.FitNote``); nothing reads
these words back. The line's budget holds for every verdict and fitting note with a model path of
up to ``PATH_ROOM`` characters; a longer path is printed whole (it is the user's own, to copy or
search for), and the line is longer by as much.
"""

from __future__ import annotations

from collections.abc import Sequence

from hatch_shrinkray.result import Fit, FitNote, FitReason, VerifyResult, human

LINE_LIMIT = 160
"""Characters of a model's line, ``shrinkray:`` prefix included, for a path of ``PATH_ROOM`` characters."""
PATH_ROOM = 40
PREFIX_ROOM = len("shrinkray: ")
"""What a build puts before the path (``shrink`` puts nothing there)."""

KINDS = {"test cases": "tests"}
"""Unit kinds (``evidence.unit_kind``) the line spells shorter."""

FIT_WORDS = {
    FitReason.FEW_UNITS: "not fitted: {units} {kind}",
    FitReason.FEW_ROWS: "not fitted: few rows",
    FitReason.NO_ACTIVATIONS: "not fitted: no activations",
    FitReason.NO_RECORDING: "int8",
    FitReason.NOTHING_SMALLER: "no smaller plan",
    FitReason.OVER_LIMITS: "plan over limits",
}
"""What the line says when nothing fitted ships (or ``auto`` shipped int8), by reason; ``-v`` has
the whole reason (``VerifyResult.fitting``)."""
SUBJECTS = {"output-aware rounding": "rounding", "auto's plan": "plan", "the plan": "plan"}
"""What was fitted, in the line's word."""


def kind(unit_kind: str) -> str:
    return KINDS.get(unit_kind, unit_kind)


def fit_words(note: FitNote) -> str:
    """``rounding fitted``, ``plan not kept``, ``not fitted: 12 calls``, ``no smaller plan``:
    what became of the fitting in the few words the per-model line spends on it."""
    if note.reason is not None and note.reason is not FitReason.WORSE_HELD_OUT:
        return FIT_WORDS[note.reason].format(units=note.units, kind=kind(note.kind))
    subject = SUBJECTS.get(note.subject, note.subject)
    return f"{subject} fitted" if note.fit is Fit.KEPT else f"{subject} not kept"


def verdict(v: VerifyResult, *, full: bool = True, weak: str = "weak") -> str:
    """The result in plain words: ``same answers on 20 recorded calls``, ``2 of 40 recorded calls
    changed (weak)``, ``within limits on 8 generated samples (batch=1; a smoke check)``. Without
    ``full``, for a line with no room for them, the details ``-v`` says too are left out: the sizes
    generated inputs gave symbolic dimensions, that outputs were compared as numbers only, and that
    the units were recorded (only recorded units give answers; generated ones say so, in fewer
    words: ``passes a smoke check on 8 generated samples``).
    ``weak`` is what the verdict says of weak evidence (:func:`brief` says why nothing was fitted there)."""
    within = "within limits" if v.passed else "FAILS"
    if not v.compared:
        return f"{'' if v.passed else within + ': '}no output compared (every judge is off)"
    if not v.real:
        generated = _count(v.samples, "generated", "samples")
        if not full:
            return f"{'passes' if v.passed else 'FAILS'} a smoke check on {generated}"
        sizes = "".join(f"{name}={size}; " for name, size in v.symbols)
        return f"{within} on {generated} ({sizes}a smoke check)"
    source = "held-out" if v.calibration else "recorded" if full else ""
    ev = v.evidence
    if ev is None or not (ev.answers or ev.decisions):
        what = _count(v.streams, source, "streams") if v.streams else _count(v.samples, source, "samples")
        return f"{within} on {what}{' (numbers only)' if full else ''}"
    on = _count(ev.units, source, kind(ev.unit_kind), always=True)
    text = f"same answers on {on}" if not ev.changed_units else f"{ev.changed_units} of {on} changed"
    return ("" if v.passed else "FAILS: ") + text + (f" ({weak})" if ev.weak else "")


def _count(n: int, source: str, plural: str, *, always: bool = False) -> str:
    return " ".join(filter(None, (str(n), source, plural if n != 1 or always else plural[:-1])))


def brief(v: VerifyResult, *, full: bool = True) -> str:
    """:func:`verdict` and, when there is one, what became of the fitted choices in a few words;
    nothing fitted for want of independent units is said with the weak evidence it comes from:
    ``same answers on 12 recorded calls (weak, not fitted)``."""
    memory = f"; {v.memory.brief()}" if v.memory is not None else ""
    if v.fit is None:
        return verdict(v, full=full) + memory
    if v.fit.reason is FitReason.FEW_UNITS and _weak(v):
        return verdict(v, full=full, weak=WEAK_UNFITTED) + memory
    return f"{verdict(v, full=full)}; {fit_words(v.fit)}{memory}"


WEAK_UNFITTED = "weak, not fitted"


def _weak(v: VerifyResult) -> bool:
    """Whether :func:`verdict` says the evidence is weak."""
    ev = v.evidence
    return bool(v.compared) and v.real and ev is not None and bool(ev.answers or ev.decisions) and ev.weak


def ratio(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def seconds(s: float) -> str:
    """``0.3 s``, ``41.9 s``, ``1234 s``: tenths while they matter."""
    return f"{s:.1f} s" if s < 99.95 else f"{s:.0f} s"


def room(path: str, prefix: int = PREFIX_ROOM) -> int:
    """Characters a model's line has after ``prefix`` characters and ``path`` (see ``PATH_ROOM``)."""
    return LINE_LIMIT - prefix - min(len(path), PATH_ROOM)


def shortened(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: cut after a word, with ``…``, when it is longer (the
    whole text is one ``-v`` away)."""
    if len(text) <= limit:
        return text
    cut = text[:max(0, limit - 1)]
    return (cut[:cut.rfind(" ")] if " " in cut else cut).rstrip(" ,;:(") + "…"


def model_line(path: str, original_size: int, shrunk_size: int, method: str, verdicts: Sequence[str], *,
               tail: str = "", prefix: int = PREFIX_ROOM) -> str:
    """The one line per model a newcomer reads: ``src/pkg/m.onnx: 21.23 MB -> 5.98 MB (28.2%), int8,
    same answers on 20 recorded calls, 1.2 s``. ``verdicts``: the verdict in words, fullest first;
    the first that keeps the line within its budget (``prefix`` characters go before it) is said,
    else the last."""
    head = f"{path}: {human(original_size)} -> {human(shrunk_size)} ({ratio(shrunk_size, original_size)}), {method}, "
    budget = room(path, prefix) + len(path)
    lines = [f"{head}{said}, {tail}" if tail else f"{head}{said}" for said in verdicts]
    return next((line for line in lines if len(line) <= budget), lines[-1])
