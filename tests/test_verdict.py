"""Every per-model line a build can print fits in ``verdict.LINE_LIMIT`` characters with a model path
of ``hints.PATH_ROOM`` characters, and a longer path lengthens it by no more than its excess; each
says first whether the model shipped shrunk or its original.

The combinations are enumerated from the code's own words (``verdict.FIT_WORDS``, ``FitReason``,
``Fit``, ``evidence.UNIT_NAMES``, ``options.METHODS``, the ladder of every method), at the longest
figures a build prints: three digits of units (recordings keep at most ``capture.env.MAX_SAMPLES``
samples per model), a weak verdict's ``MIN_UNITS - 1``, sizes of seven characters and a four-digit
time. Only the fitting notes the engine can attach to such a verification are paired with it
(``_notes``). ``FAILS`` verdicts are ``check``'s alone (a build falls back or fails) and are measured
apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from hatch_shrinkray.evidence import MIN_UNITS, UNIT_NAMES, Evidence
from hatch_shrinkray.hints import PATH_ROOM
from hatch_shrinkray.options import METHODS, ShrinkOptions
from hatch_shrinkray.recording.caps import MAX_SAMPLES
from hatch_shrinkray.registry import ladder
from hatch_shrinkray.result import Fit, FitNote, FitReason, OutputComparison, VerifyResult, human
from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.cache import CachedShrink
from hatch_shrinkray.shipping.manifest import ManifestEntry
from hatch_shrinkray.shrink_result import Failed, ShrinkResult
from hatch_shrinkray.verdict import (
    ANSWERS,
    FIT_WORDS,
    LINE_LIMIT,
    fit_words,
    line_words,
    ratio,
    seconds,
    sizes,
)

MOST = 10 ** len(str(MAX_SAMPLES)) - 1
WEAKEST = MIN_UNITS - 1
KINDS = [plural for _, plural in UNIT_NAMES.values()] + ["units"]
PATH = "src/pkg/models/" + "m" * (PATH_ROOM - len("src/pkg/models/.onnx")) + ".onnx"
SIZES = (int(999.99e6), int(199.99e3))
"""The longest sizes and ratio the line prints: ``999.99 MB -> 199.99 KB (100.0%)``."""
TAILS = ("cached", seconds(9999.0))
WHY = "probabilities: top-1 93.3% (152/163) < 95% (11 flips; flip rate >= 4.1% at 95%)"

OK = OutputComparison("y", 0.1, 0.01, 0.9999, 1.0, 0, judge="top-1", answers=20)
BAD = OutputComparison("y", 1.0, 0.2, 0.9, 1.0, 0, failures=("rel L2 0.2 > 0.1",), judge="top-1", answers=20)
OFF = OutputComparison("y", 0.0, 0.0, 1.0, None, 0, judge="off")


def _verifications(output: OutputComparison) -> Iterator[VerifyResult]:
    """Every shape of verdict: nothing compared, generated inputs (with and without sizes of symbolic
    dimensions), numbers only (samples or streams, held out or not), and answers judged over each
    kind of unit, same or changed, weak or not, held out or not."""
    yield VerifyResult((OFF,), 8, "generated", real=False)
    for symbols in ((), (("batch", 1),), (("batch", 1), ("sequence_length", 224), ("channels", 3))):
        for samples in (8, MOST):
            yield VerifyResult((output,), samples, "generated", real=False, symbols=symbols)
    for streams in (0, MOST):
        for calibration in (0, MOST):
            yield VerifyResult((output,), MOST, "recording", calibration=calibration, streams=streams,
                               evidence=Evidence(MOST, 0, "calls"))
    for kind in KINDS:
        for units, changed in ((MOST, 0), (MOST, MOST - 1), (WEAKEST, 0), (WEAKEST, WEAKEST - 1)):
            for calibration in (0, MOST):
                for describes in ("answers", *ANSWERS):  # the longest answer a judge names: segment lists
                    yield VerifyResult((output,), units, "recording", calibration=calibration,
                                       evidence=Evidence(units, changed, kind, answers=units, describes=describes))


def _notes(v: VerifyResult, method: str) -> Iterator[FitNote | None]:
    """The fitting notes the engine attaches to ``v`` for ``method``: int8 fits its rounding by
    cross-fitting on every unit (so never held out), auto its plan on the held-out half; without
    ``MIN_UNITS`` units neither fits; auto without a recording verifies on generated inputs."""
    yield None
    if method not in ("int8", "auto"):
        return
    subject = "rounding" if method == "int8" else "auto"
    if not v.real:
        if method == "auto":
            yield FitNote(Fit.NOT_FITTED, subject, FitReason.NO_RECORDING)
        return
    ev = v.evidence
    if ev is not None and ev.weak and not v.calibration:
        yield FitNote(Fit.NOT_FITTED, subject, FitReason.FEW_UNITS, ev.units, ev.unit_kind)
    if method == "int8" and not v.calibration and (ev is None or not ev.weak):
        yield FitNote(Fit.KEPT, "output-aware rounding")
        yield FitNote(Fit.NOT_KEPT, "output-aware rounding", FitReason.WORSE_HELD_OUT)
        yield from (FitNote(Fit.NOT_FITTED, subject, r) for r in (FitReason.FEW_ROWS, FitReason.NO_ACTIVATIONS))
    if method == "auto" and v.calibration:
        yield FitNote(Fit.KEPT, "auto's plan")
        yield FitNote(Fit.NOT_KEPT, "auto's plan", FitReason.WORSE_HELD_OUT)
        yield from (FitNote(fit, subject, r) for fit in Fit for r in (FitReason.NOTHING_SMALLER, FitReason.OVER_LIMITS))


def _results(output: OutputComparison) -> Iterator[ShrinkResult]:
    """Each verification for each method and fitting note, shipped as configured or after every
    fallback its ladder allows (the choice that failed named with the longest reason)."""
    for v in _verifications(output):
        for method in METHODS:
            for note in _notes(v, method):
                result = ShrinkResult("m.onnx", None, method, *SIZES, (), 9999.0, replace(v, fit=note))
                yield result
                rungs = [r for r in ladder(ShrinkOptions(method=method)) if not r.original]
                for depth in range(1, len(rungs) + 1):
                    failed = [Failed(method if i == 0 else rungs[i - 1].describe(ShrinkOptions(method=method)), WHY)
                              for i in range(depth)]
                    label = rungs[depth - 1].describe(ShrinkOptions(method=method))
                    yield replace(result, label=label, fell_back=tuple(failed))


TYPICAL = (6_585_444, 1_680_989)


def _lines(output: OutputComparison, path: str = PATH, size: tuple[int, int] = SIZES) -> Iterator[str]:
    for result in _results(output):
        label, verdicts = line_words(result)
        record = CachedShrink(ManifestEntry("a", "b", result.method), *size, 9999.0, "figures", label=label,
                              verdicts=tuple(verdicts))
        for tail in TAILS:
            yield wording.success_line(path, record, cached=tail == "cached")


def test_every_fitting_reason_has_its_few_words() -> None:
    assert set(FIT_WORDS) == set(FitReason) - {FitReason.WORSE_HELD_OUT, FitReason.FEW_UNITS}
    said = {fit_words(FitNote(fit, subject, reason, WEAKEST, kind)) for fit in Fit for reason in (None, *FitReason)
            for subject in ("output-aware rounding", "auto's plan", "the plan", "rounding", "auto") for kind in KINDS}
    assert all(0 < len(words) <= 50 for words in said), sorted(said, key=len)[-1]


def test_every_model_line_a_build_prints_fits_in_160_characters() -> None:
    lines = list(_lines(OK))
    assert len(lines) > 500 and all(f"shrinkray: {PATH}: shipped shrunk, {sizes(*SIZES)}, " in line for line in lines)
    longest = max(lines, key=len)
    assert len(longest) <= LINE_LIMIT, longest
    assert any(len(line) == LINE_LIMIT for line in lines)  # the bound is used, not idle
    typical = list(_lines(OK, "src/pkg/models/digits_mlp.onnx", TYPICAL))
    assert max(len(line) for line in typical) <= LINE_LIMIT
    said = "\n".join(typical)
    assert "(weak evidence, nothing fitted)" in said and "; not fitted: few rows, " in said
    assert "auto's plan lost on held-out " in said and ": int4 failed: probabilities: top-1 93.3% (152/163)" in said
    assert ", int8 round-to-nearest: int4 failed" in said and ", fp16: int4 and int8 round-to-nearest failed" in said
    assert ", the original" not in said and " and 2 more failed" in said
    assert ": passes a smoke check on 999 generated samples, " in said  # the sizes of symbolic dimensions: -v
    assert "batch=" not in said


def test_a_longer_path_lengthens_the_line_by_its_excess_only() -> None:
    path = "src/" + "deeply/nested/" * 6 + "model.onnx"
    excess = len(path) - PATH_ROOM
    assert max(len(line) for line in _lines(OK, path)) <= LINE_LIMIT + excess


def test_check_keeps_failing_models_and_their_lines_fit_too() -> None:
    """``check`` under ``strict`` keeps a model that fails verification to run the package's tests on it;
    its line says ``FAILS``."""
    lines = [line for line in _lines(BAD) if "failed" not in line]
    assert all("FAILS" in line for line in lines if "no output compared" not in line)
    assert max(len(line) for line in lines) <= LINE_LIMIT, max(lines, key=len)


def test_the_lines_of_an_original_that_ships_fit_too() -> None:
    """Kept originals (generated inputs could not verify them) and unchanged ones (nothing to
    shrink, not smaller, or every choice failed its limits): the reason is shortened to the line,
    whole under ``-v``."""
    options = ShrinkOptions(exclude_tensors=("a",))
    reasons = [wording.nothing_to_shrink(options), wording.nothing_to_shrink(ShrinkOptions(method="dedup")),
               "int8 fails on 999 generated samples (batch=1): y rel L2 0.336 > 0.1",
               "generated inputs cannot feed its input " + repr("x" * 200) + " (tensor(string))",
               "dynamic would not make it smaller (on disk: 728 B -> 1.43 KB, 196.3%, though the wheel would be "
               "722 B -> 718 B, 99.4%)", "word " * 80,
               f"int4, int8 round-to-nearest and fp16 failed the limits on the recording (int4: {WHY})"]
    size = SIZES[0]
    for reason in reasons:
        kept, unchanged = wording.kept_line(PATH, size, reason), wording.unchanged_line(PATH, size, reason)
        assert len(kept) <= LINE_LIMIT and len(unchanged) <= LINE_LIMIT, (kept, unchanged)
        head = f"shrinkray: {PATH}: shipped its original ({human(size)}): "
        assert unchanged.startswith(head) and kept.startswith(head), (kept, unchanged)
        whole = wording.unchanged_detail_line(PATH, size, reason)
        assert (whole is None) == (len(f"{head}{reason}") <= LINE_LIMIT)
    assert wording.kept_line(PATH, size, reasons[2]).endswith(": int8 fails on 999 generated samples (see below)")


def test_ratios_sizes_and_times_keep_the_figures_that_matter() -> None:
    assert [ratio(a, 100) for a in (25.54, 99.94, 99.96, 100)] == ["25.5%", "99.9%", "100.0%", "100.0%"]
    assert [seconds(s) for s in (0.31, 99.9, 100.4, 1234.5)] == ["0.3 s", "99.9 s", "100 s", "1234 s"]
    assert sizes(6_585_444, 1_680_989) == "6.59 -> 1.68 MB (25.5%)"
    assert sizes(6_585_444, 850_000) == "6.59 MB -> 850.00 KB (12.9%)"
