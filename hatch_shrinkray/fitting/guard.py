"""Do no harm: a data-fitted choice ships only if, on units it was not fitted on, it is at least as
good as data-free round-to-nearest int8.

Output-aware rounding, ``auto``'s plan and ``check --search``'s plan are all fitted to samples. With
many independent samples they generalise (more answers identical at equal size);
with few, or many correlated steps of few streams, they fit those and lose
elsewhere (a streaming model's held-out clips kept their speech segments less often than under
round-to-nearest). So each is
judged against round-to-nearest on units it never saw (cross-fitted folds for ``int8``, the
held-out half for ``auto``), with the package's judges: *decisions first* (fewer flipped decisions,
then fewer changed answers), *then error* (the sum over outputs of squared relative L2). A tie on
decisions goes to the smaller error, except for an ``auto`` plan at least 1% smaller than
round-to-nearest judged on at least ``MIN_UNITS`` held-out units where round-to-nearest flipped a
decision or changed an answer: it trades error for bytes within its accuracy budget, so it must keep
as many answers and decisions as round-to-nearest, and may spend error to do it in fewer bytes. A tie
at nothing flipped or changed on either side measured nothing (margins may have shrunk towards a flip
without reaching one), and more error flips more unseen decisions, so there the smaller error wins.
Losing means falling back, and the report line says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import Fit, FitNote, FitReason
from hatch_shrinkray.samples import Sequencing
from hatch_shrinkray.verification.compare import tolerance_applies
from hatch_shrinkray.verification.judging import LOOSE, Judged, answer_counts, expectations, judge_outputs

Outputs = Sequence[Sequence[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Score:
    """How far a candidate's outputs are from the original's on held-out units."""

    changed: int
    """Answers changed (labels, lines, maps, streams)."""
    flips: int
    """Fine-grained decisions flipped."""
    error: float
    """Sum over outputs of squared relative L2."""
    describes: str = "answers"
    rel_l2: float = 0.0
    """The worst relative L2 of an output verification's limit applies to (each output whose answers
    are not all kept by its judge)."""
    cosine: float = 1.0
    """The worst cosine of such an output."""
    judged: bool = True
    """Some output had answers or decisions to count (else only the error compares)."""
    rel_l2_any: float = 0.0
    """The worst relative L2 of any output (what a limit the user set gates)."""
    cosine_any: float = 1.0
    """The worst cosine of any output."""

    def over(self, options: VerifyOptions | None) -> str:
        """Which of verification's limits these figures break, in words (empty: none): a limit the
        user set counts every output, a default one those whose answers did not all hold."""
        if options is None:
            return ""
        broken = []
        rel = self.rel_l2 if options.max_rel_l2 is None else self.rel_l2_any
        cos = self.cosine if options.min_cosine is None else self.cosine_any
        if rel > options.rel_l2_limit:
            broken.append(f"rel-L2 {rel:.3g} > {options.rel_l2_limit:g}")
        if cos < options.cosine_limit:
            broken.append(f"cosine {cos:.6f} < {options.cosine_limit:g}")
        return ", ".join(broken)

    def key(self, with_error: bool = True) -> tuple[int, int, float]:
        """Flipped decisions first: a held-out half holds a few dozen answers (lines, clips), where
        one answer either way is chance, and thousands of decisions (characters, audio steps,
        labels), which tell the two apart: a plan that keeps more unseen answers than int8 can
        still change one held-out answer more by chance, while flipping fewer decisions."""
        return self.flips, self.changed, self.error if with_error else 0.0

    def text(self) -> str:
        return (f"{self.changed} {self.describes} changed, {self.flips} decisions flipped, "
                f"rel-L2 {self.error ** 0.5:.2e}")


KEPT = " kept: "
"""What a kept outcome's text says after its ``what`` (and only a kept one's)."""


@dataclass(frozen=True)
class Outcome:
    """The guard's verdict on one data-fitted choice."""

    what: str
    """``output-aware rounding``, ``auto's plan``, ``the plan``."""
    kept: bool
    fitted: Score
    plain: Score
    """Round-to-nearest int8 on the same units."""
    units: int
    how: str
    """``2 cross-fitted folds`` or ``the held-out half``."""
    also: str = ""
    """Said after the comparison: what else the choice holds, or what was judged before it and lost
    (``auto``'s small tensors in fp16)."""
    instead: Fit | None = None
    """Where the choice is not kept: None when round-to-nearest ships; else int8 as method ``int8``
    writes it ships (``auto``), with its output-aware rounding kept or not (``FitNote.instead``)."""

    def text(self) -> str:
        judged = f"on {self.units} held-out units ({self.how})"
        counted = (f"{self.fitted.changed} vs {self.plain.changed} {self.plain.describes} changed, "
                   f"{self.fitted.flips} vs {self.plain.flips} decisions flipped, "
                   if self.fitted.judged or self.plain.judged else "no answers to compare (numbers only), ")
        versus = (f"{counted}rel-L2 {self.fitted.error ** 0.5:.2e} vs {self.plain.error ** 0.5:.2e} "
                  "for round-to-nearest") + (f"; {self.also}" if self.also else "")
        if self.kept:
            return f"{self.what}{KEPT}{judged}, {versus}"
        ships = "round-to-nearest" if self.instead is None else (
            "int8 with its fitted rounding" if self.instead is Fit.KEPT else "int8 round-to-nearest")
        return f"{self.what} not kept ({ships} ships): {judged}, {versus}"

    def brief(self) -> FitNote:
        """:meth:`text` as the facts the one line per model words."""
        return (FitNote(Fit.KEPT, self.what) if self.kept
                else FitNote(Fit.NOT_KEPT, self.what, FitReason.WORSE_HELD_OUT, instead=self.instead))


@dataclass(frozen=True)
class Unfitted:
    """Nothing fitted ships, for a reason found before any comparison (``auto``: nothing smaller
    than round-to-nearest int8 kept its answers on the fitting samples, so comparing that with
    itself on the held-out half would only print "plan kept")."""

    reason: str
    short: FitNote | None = None
    """The reason as facts, for the one line per model (None: nothing worth a word there)."""
    kept: bool = False

    def text(self) -> str:
        return self.reason

    def brief(self) -> FitNote | None:
        return self.short


Verdict = Outcome | Unfitted
"""What became of a data-fitted choice, as the report line says it."""


class Scorer:
    """The original's outputs on some units, judged once (``expectations``, a cost worth paying only
    once), so that every variant compared with them is only scored. The engine hands
    ``auto`` its verification's reference this way: the original runs on the held-out half once."""

    def __init__(self, judged: Sequence[Judged], seq: Sequencing) -> None:
        self.judged = judged
        self.seq = seq

    @classmethod
    def of(cls, names: Sequence[str], reference: Outputs, seq: Sequencing, options: VerifyOptions | None,
           feeds: Sequence[Mapping[str, Any]] = ()) -> Scorer:
        """``feeds``: the calls' inputs, which tell a tagger from a CTC recogniser as verification does."""
        return cls(expectations(names, reference, seq, options or VerifyOptions(), feeds=feeds), seq)

    def __call__(self, got: Outputs) -> Score:
        """``got`` against the reference (the original's) with the package's judges."""
        counted = [c for c in judge_outputs(self.judged, got, self.seq, LOOSE) if c.judge != "off"]
        describes = {c.describes for c in counted if c.answers}
        finite = [c for c in counted if c.rel_l2 == c.rel_l2]
        gated = [c for c in finite if tolerance_applies(c)]  # as verification will gate them
        return Score(answer_counts(counted)[1], sum(c.flips for c in counted),
                     sum(c.rel_l2 ** 2 for c in finite), describes.pop() if len(describes) == 1 else "answers",
                     max((c.rel_l2 for c in gated), default=0.0), min((c.cosine for c in gated), default=1.0),
                     any(c.answers or c.positions for c in counted), max((c.rel_l2 for c in finite), default=0.0),
                     min((c.cosine for c in finite), default=1.0))


def decide(what: str, fitted: Score, plain: Score, units: int, how: str, *, by_error: bool = True,
           budget_given: bool = False) -> Outcome:
    """Kept when ``fitted`` is at least as good as ``plain``: decisions first, then error, which a
    tie may spend (not ``by_error``) only where the held-out decisions measured something, or where
    there are none to count (outputs of values only) and the user gave the accuracy budget
    (``budget_given``): that budget is then the whole floor. Without one, values only are judged by
    their error, the one measure of answers they have (an embedder's nearest neighbours move with it)."""
    measured = plain.flips > 0 or plain.changed > 0 or (budget_given and not (plain.judged or fitted.judged))
    with_error = by_error or not measured
    return Outcome(what, fitted.key(with_error) <= plain.key(with_error), fitted, plain, units, how)
