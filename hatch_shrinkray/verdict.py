"""The words of the one line a build (and ``shrink``) prints per model: sizes, method, the verdict
in plain words and what became of the fitting; the figures behind them are in the verification's
summary, for ``-v`` and the manifest.

Everything here words typed facts (``result.VerifyResult``, ``result.FitNote``); nothing reads
these words back.
"""

from __future__ import annotations

from hatch_shrinkray.result import Fit, FitNote, FitReason, VerifyResult, human


def verdict(v: VerifyResult) -> str:
    """The result in plain words: ``same answers on 20 recorded calls``, ``answers changed on 2 of
    40 recorded calls (weak evidence)``, ``within limits on 8 generated samples (a smoke check)``."""
    within = "within limits" if v.passed else "FAILS verification"
    if not v.compared:
        return f"{'' if v.passed else within + ': '}no output compared (every judge is off)"
    if not v.real:
        sizes = "".join(f"{name}={size}; " for name, size in v.symbols)
        return f"{within} on {v.basis(symbols=False)} ({sizes}a smoke check)"
    ev = v.evidence
    if ev is None or not (ev.answers or ev.decisions):
        return f"{within} on {v.basis()} (numbers only)"
    on = f"{ev.units} {'held-out ' if v.calibration else ''}recorded {ev.unit_kind}"
    text = f"same answers on {on}" if not ev.changed_units else \
        f"answers changed on {ev.changed_units} of {on}"
    return ("" if v.passed else "FAILS verification (outputs past the limits); ") + text + \
        (" (weak evidence)" if ev.weak else "")


def brief(v: VerifyResult) -> str:
    """:func:`verdict` and, when there is one, what became of the fitted choices in a few words."""
    return f"{verdict(v)}; {fit_words(v.fit)}" if v.fit is not None else verdict(v)


def fit_words(note: FitNote) -> str:
    """``output-aware rounding kept``, ``rounding not fitted: only 12 calls``, ``auto: int8, no
    recording of this model``: the fitting's outcome in the few words the per-model line spends."""
    reason = f"only {note.units} {note.kind}" if note.reason is FitReason.FEW_UNITS else \
        note.reason.value if note.reason is not None else ""
    if note.subject == "auto":
        return f"auto: int8, {reason}"
    if note.fit is Fit.KEPT:
        return f"{note.subject} kept"
    if note.fit is Fit.NOT_KEPT:
        return f"{note.subject} not kept: {reason}"
    return f"{note.subject} not fitted: {reason}"


def model_line(path: str, original_size: int, shrunk_size: int, method: str, verdict: str, *, tail: str = "") -> str:
    """The one line per model a newcomer reads: ``src/pkg/m.onnx: 21.23 MB -> 5.98 MB (28.2%), int8,
    same answers on 20 recorded calls, 1.2 s``; the figures behind the verdict are for ``-v``."""
    ratio = f"{100 * shrunk_size / original_size:.1f}%" if original_size else "-"
    line = f"{path}: {human(original_size)} -> {human(shrunk_size)} ({ratio}), {method}, {verdict}"
    return f"{line}, {tail}" if tail else line
