"""The words of the one line a build (and ``shrink``) prints per model: whether it shipped shrunk or
its original, its sizes, what shipped, the verdict in plain words and why, in at most ``LINE_LIMIT``
characters; the figures behind them are in the verification's summary, for ``-v`` and the manifest.

Everything here words typed facts (``result.VerifyResult``, ``result.FitNote``,
``shrink_result.Failed``); nothing reads these words back. The line's budget holds for every verdict,
fitting note and fallback with a model path of up to ``PATH_ROOM`` characters; a longer path is
printed whole (it is the user's own, to copy or search for), and the line is longer by as much.

One noun per unit everywhere: the units a verdict counts are named as ``evidence.unit_kind`` names
them (``tests``, ``calls``, ``streams``, ``samples``), on the build's line, in ``check`` and in ``-v``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hatch_shrinkray.hints import LINE_LIMIT, counted, setting
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.result import Fit, FitNote, FitReason, VerifyResult, human
from hatch_shrinkray.shrink_result import ShrinkResult

PREFIX_ROOM = len("shrinkray: ")
"""What a build puts before the path (``shrink`` puts nothing there)."""

KINDS = {"test cases": "tests"}
"""Unit kinds (``evidence.unit_kind``) the line spells shorter."""

UNFITTED = "not fitted"
FIT_WORDS = {
    FitReason.FEW_ROWS: f"{UNFITTED}: few rows",
    FitReason.NO_ACTIVATIONS: f"{UNFITTED}: activations unseen",
    FitReason.NO_RECORDING: f"{UNFITTED}: no recording of it",
    FitReason.NOTHING_SMALLER: "no smaller plan kept the answers",
    FitReason.OVER_LIMITS: "auto's plan broke the limits",
}
"""What the line says of fitting that did not ship, by reason: int8's codes then round to nearest,
and ``auto`` ships int8 (``FEW_UNITS`` is said with the weak evidence it comes from; ``-v`` has the
whole reason, ``VerifyResult.fitting``)."""
SHARED = "dedup"
"""The encoding word of a tensor stored once for an identical one (``dedup -> name``)."""
AUTO_SUBJECTS = ("auto's plan", "auto")
"""``FitNote.subject`` of ``auto``'s notes (``auto``: what it shipped instead of a plan)."""


@dataclass(frozen=True)
class State:
    """How a caller says what became of a model: a build ships, ``shrink`` writes."""

    shrunk: str
    original: str


SHIPPED = State("shipped shrunk", "shipped its original")
WRITTEN = State("shrunk", "original written")


def kind(unit_kind: str) -> str:
    return KINDS.get(unit_kind, unit_kind)


def shipped_method(method: str, fit: FitNote | None) -> str:
    """What shipped for ``method``: ``auto`` ships int8 where its plan was not kept."""
    known = facts(method)
    if known.unplanned and fit is not None and not (fit.fit is Fit.KEPT and fit.subject == known.plan):
        return known.unplanned
    return method


def fit_words(note: FitNote, held: str = "units") -> str:
    """What became of the fitting in a few words: ``fitted to the recording`` (int8's codes), ``not
    fitted: few rows`` (they round to nearest), ``auto's plan lost on held-out calls`` (it shipped int8);
    ``held`` names the held-out units."""
    if note.reason is not None and note.reason in FIT_WORDS:
        return FIT_WORDS[note.reason]
    if note.reason is FitReason.FEW_UNITS:
        return f"{UNFITTED}: only {_count(note.units, '', kind(note.kind))}"
    if note.subject in AUTO_SUBJECTS:
        if note.fit is Fit.KEPT:
            return f"plan kept on held-out {held}" if note.subject == "auto's plan" else "codes fitted, no plan"
        return f"auto's plan lost on held-out {held}"
    return "fitted to the recording" if note.fit is Fit.KEPT else f"fitting lost on held-out {held}"


def verdict(v: VerifyResult, *, full: bool = True, weak: str = "weak evidence") -> str:
    """The result in plain words, naming the answers the judge compared: ``same lines on 20 recorded
    calls``, ``labels changed in 2 of 40 recorded tests (weak evidence)``, ``passes a smoke check on 8
    generated samples``. Without ``full``, for a line with
    no room for them, the details ``-v`` says too are left out (that outputs were compared as numbers
    only, that the units were recorded). ``FAILS`` is ``check``'s alone (a build falls back or fails)."""
    fails = "" if v.passed else "FAILS: "
    if not v.compared:
        return f"{fails}no output compared (every judge is off)"
    if not v.real:
        return f"{'passes' if v.passed else 'FAILS'} a smoke check on {_count(v.samples, 'generated', 'samples')}"
    source = "held-out" if v.calibration else "recorded" if full else ""
    ev = v.evidence
    if ev is None or not (ev.answers or ev.decisions):
        if v.streams:
            what = _count(v.streams, source, "streams")
        elif ev is not None and ev.units:  # the units judged, as every other verdict counts them
            what = _count(ev.units, source, kind(ev.unit_kind))
        else:
            what = _count(v.samples, source, "samples")
        return f"{fails}within limits on {what}{' (numbers only)' if full else ''}"
    on = _count(ev.units, source, kind(ev.unit_kind))
    what = ANSWERS.get(ev.describes, "answers")
    text = f"same {what} on {on}" if not ev.changed_units else f"{what} changed in {ev.changed_units} of {on}"
    return fails + text + (f" ({weak})" if ev.weak else "")


ANSWERS = {"labels": "labels", "lines": "lines", "texts": "texts", "segment lists": "segment lists", "maps": "maps",
           "images": "boxes"}
"""The answer a judge compares (``Judge.describes``), as the line names it: which judge read the output;
``answers`` where several or none did."""


def _count(n: int, source: str, plural: str) -> str:
    return " ".join(filter(None, (str(n), source, plural if n != 1 else plural[:-1])))


def brief(v: VerifyResult, *, full: bool = True) -> str:
    """:func:`verdict` and, when there is one, what became of the fitted choices in a few words;
    nothing fitted for want of independent units is said with the weak evidence it comes from:
    ``same answers on 12 recorded calls (weak evidence, nothing fitted)``; target ``memory`` adds what
    memory holds (``footprint.Memory.brief``)."""
    memory = f"; {v.memory.brief()}" if v.memory is not None else ""
    if v.fit is None:
        return verdict(v, full=full) + memory
    if v.fit.reason is FitReason.FEW_UNITS and _weak(v):
        return verdict(v, full=full, weak=WEAK_UNFITTED) + memory
    held = kind(v.evidence.unit_kind) if v.evidence is not None else "units"
    return f"{verdict(v, full=full)}; {fit_words(v.fit, held)}{memory}"


WEAK_UNFITTED = "weak evidence, nothing fitted"
BUDGET_FLOOR = "held to your budget, not int8's answers"
"""What the line says of a choice narrower than int8 that an accuracy budget the user set let below
round-to-nearest int8's answers (decision 3)."""


def _weak(v: VerifyResult) -> bool:
    """Whether :func:`verdict` says the evidence is weak."""
    ev = v.evidence
    return bool(v.compared) and v.real and ev is not None and bool(ev.answers or ev.decisions) and ev.weak


def fell_back(label: str, why: str) -> str:
    """``int4 failed: probabilities: top-1 93.3% (152/163) < 95% (...)``: the choice a model fell back from."""
    return f"{label} failed: {why}"


def ratio(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def seconds(s: float) -> str:
    """``0.3 s``, ``41.9 s``, ``1234 s``: tenths while they matter."""
    return f"{s:.1f} s" if s < 99.95 else f"{s:.0f} s"


def sizes(before: int, after: int) -> str:
    """``6.59 -> 1.68 MB (25.5%)``; both units where they differ (``6.59 MB -> 850.00 KB (12.9%)``)."""
    a, b = human(before), human(after)
    if a.split(" ")[1] == b.split(" ")[1]:
        a = a.split(" ")[0]
    return f"{a} -> {b} ({ratio(after, before)})"


def fits(line: str, prefix: int = PREFIX_ROOM) -> bool:
    """Whether ``line``, after ``prefix`` characters, keeps within ``LINE_LIMIT`` (paths counted as
    ``PATH_ROOM``)."""
    return prefix + counted(line) <= LINE_LIMIT



def clipped(line: str, prefix: int = 0) -> str:
    """``line`` cut after a word, with ``…``, where it does not fit (:func:`fits`); the whole of it is
    one ``-v`` away, in a report or the plan file."""
    if fits(line, prefix):
        return line
    words = line.split(" ")
    while len(words) > 1 and not fits(" ".join(words) + "…", prefix):
        words.pop()
    return " ".join(words).rstrip(" ,;:(") + "…"


def shortened(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: cut after a word, with ``…``, when it is longer (the
    whole text is one ``-v`` away)."""
    if len(text) <= limit:
        return text
    cut = text[:max(0, limit - 1)]
    return (cut[:cut.rfind(" ")] if " " in cut else cut).rstrip(" ,;:(") + "…"


def model_line(path: str, original_size: int, shrunk_size: int, label: str, verdicts: Sequence[str], *,
               tail: str = "", prefix: int = PREFIX_ROOM, state: State = SHIPPED, keep_tail: bool = False) -> str:
    """The one line per model a newcomer reads: ``src/pkg/m.onnx: shipped shrunk, 21.23 -> 5.98 MB
    (28.2%), int8: same answers on 20 recorded calls, 1.2 s``. ``verdicts``: the verdict in words,
    fullest first; the first that keeps the line within its budget (``prefix`` characters go before
    it) is said, with ``tail`` where it fits (``keep_tail``: the shortest with ``tail`` before the fullest
    without it), else the last, cut to fit."""
    head = f"{path}: {state.shrunk}, {sizes(original_size, shrunk_size)}, {label}: "
    if keep_tail:
        lines = [*(f"{head}{said}, {tail}" for said in verdicts), *(f"{head}{said}" for said in verdicts)]
    else:
        lines = [line for said in verdicts for line in (f"{head}{said}, {tail}" if tail else "", f"{head}{said}")
                 if line]
    fitting = next((line for line in lines if fits(line, prefix)), None)
    return fitting or f"{head}{shortened(verdicts[-1], max(LINE_LIMIT - prefix - counted(head), 20))}"


def original_line(path: str, size: int, why: str, *, prefix: int = PREFIX_ROOM, state: State = SHIPPED,
                  what: str = "") -> str:
    """The line of a model whose original ships: ``src/pkg/m.onnx: shipped its original (6.59 MB):
    int8 fails on generated inputs``, ``why`` cut to the line's budget (``-v`` has it whole)."""
    head = f"{path}: {state.original} ({human(size)}){what}: "
    return head + shortened(why, LINE_LIMIT - prefix - counted(head))


def shipped_label(result: ShrinkResult) -> str:
    """What shipped, as the line names it: the method (``int8``, ``int8 with 15 levels``; ``auto`` only
    where its plan shipped), with the tensors a plan or ``encodings`` encoded otherwise (``int8 + 2 fp16
    tensors``), or the choice a fallback shipped (``int8 round-to-nearest``)."""
    if result.fell_back:
        return result.label
    v = result.verification
    method = shipped_method(result.method, v.fit if v is not None else None)
    label = result.label if method == result.method and result.label else method
    if facts(method).plan:
        return label
    others: dict[str, int] = {}
    for record in result.encoded:
        encoding = record.encoding.split(" ")[0]
        if encoding not in (method, SHARED):
            others[encoding] = others.get(encoding, 0) + 1
    if len(others) == 1:
        ((encoding, n),) = others.items()
        return f"{label} + {n} {encoding} tensor{'s' if n != 1 else ''}"
    if others:
        n = sum(others.values())
        return f"{label} + {n} tensors otherwise ({', '.join(sorted(others))})"
    return label


def line_words(result: ShrinkResult) -> tuple[str, list[str]]:
    """What shipped (:func:`shipped_label`) and the verdict in words, fullest first (for
    :func:`model_line`); after a fallback, which choice failed and why comes first."""
    v = result.verification
    if v is None:
        verdicts = [f"not verified ({setting('verify', False)})"]
    else:
        memory = [f"{verdict(v, full=False)}; {v.memory.brief()}"] if v.memory is not None else []
        verdicts = list(dict.fromkeys([brief(v), brief(v, full=False), *memory, verdict(v, full=False)]))
        if v.floor == "budget":  # decision 3: the line says which floor it used
            verdicts = [f"{verdicts[0]}; {BUDGET_FLOOR}", *verdicts]
    failed = result.fell_back
    if failed:
        names = " and ".join(f.label for f in failed) if len(failed) <= 2 else \
            f"{failed[0].label} and {len(failed) - 1} more"
        first = fell_back(names, failed[0].why)
        verdicts = [f"{first}; {verdicts[0]}", first]
    return shipped_label(result), verdicts
