"""Judging a model's outputs against the original's over a set of samples, counted by unit.

Shared by the build's verification (``runner``), the do-no-harm guard of data-fitted choices
(``fitting.guard``) and ``check --shadow``: each output gets its judge once (``expectations``), every
candidate's outputs are compared sample by sample (a recurrent model's stream is one sample), and
the evidence is counted over independent units (``evidence_of``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from hatch_shrinkray.evidence import Evidence, unit_kind
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.result import OutputComparison
from hatch_shrinkray.samples import Sequencing, group_units, grouped
from hatch_shrinkray.verification.compare import Expected, compare, expect
from hatch_shrinkray.verification.judges import THRESHOLD, judge_for, per_character

Outputs = Sequence[Sequence[npt.NDArray[Any]]]
"""Per feed, per output."""

LOOSE = VerifyOptions(max_rel_l2=math.inf, min_cosine=-1.0, min_agreement=0.0)
"""Limits nothing can exceed: for counting, not gating."""


@dataclass(frozen=True)
class Judged:
    """One output's prepared reference (None: judging switched off with ``judges = {out = "off"}``)."""

    index: int
    name: str
    expected: Expected | None


def expectations(names: Sequence[str], ref: Outputs, seq: Sequencing, options: VerifyOptions,
                 threshold: float = THRESHOLD, *, feeds: Sequence[Mapping[str, Any]] = ()) -> list[Judged]:
    """Each output's judge, detected from the original's per-call values (and the calls' ``feeds``,
    which tell a tagger's per-character scores from a CTC recogniser's) unless ``options.judges``
    names one, and its reference grouped as judged (a stream's steps stacked)."""
    fed_back = {o for _, o in seq.feedback}
    out = []
    for i, name in enumerate(names):
        per_call = [r[i] for r in ref]
        judge = judge_for(options.judge_of(name), per_call, recurrent=seq.recurrent, fed_back=name in fed_back,
                          characters=per_character(per_call, feeds))
        out.append(Judged(i, name, None if judge is None else expect(grouped(ref, seq, i), threshold, judge)))
    return out


def judge_outputs(judged: Sequence[Judged], got: Outputs, seq: Sequencing, options: VerifyOptions,
                  unchecked: dict[str, str] | None = None) -> tuple[OutputComparison, ...]:
    """Every judged output of ``got`` compared with the reference, gated by ``options``."""
    out = []
    for j in judged:
        if j.expected is None:
            nan = float("nan")  # not compared: no figure to report
            out.append(OutputComparison(j.name, nan, nan, nan, None, 0, judge="off"))
            continue
        c = compare(j.name, j.expected, grouped(got, seq, j.index), options)
        out.append(dataclasses.replace(c, unchecked=(unchecked or {}).get(j.name, "")))
    return tuple(out)


def evidence_of(comparisons: Sequence[OutputComparison], seq: Sequencing, real: bool) -> Evidence:
    """Units, answers and decisions of a verification: a unit changed when any answer of any of its
    samples changed, in any output."""
    units = group_units(seq)
    changed_units = set()
    for c in comparisons:
        for unit, changed in zip(units, c.changed, strict=False):
            if changed:
                changed_units.add(unit)
    counted = [c for c in comparisons if c.judge not in ("off", "")]
    describes = {c.describes for c in counted if c.answers}
    answers, changed_answers = answer_counts(counted)
    return Evidence(len(set(units)), len(changed_units), unit_kind(units), answers=answers,
                    changed_answers=changed_answers, decisions=sum(c.positions for c in counted),
                    flips=sum(c.flips for c in counted), real=real,
                    describes=describes.pop() if len(describes) == 1 else "answers")


def answer_counts(comparisons: Sequence[OutputComparison]) -> tuple[int, int]:
    """Answers judged and changed over the outputs: summed, except that the heads of a tagger fed one
    text per call (a diacritizer's vowel, dot and stroke marks) answer about the same texts, so a text
    counts once, changed when any head's tags changed."""
    heads = [c for c in comparisons if c.judge == "tags" and c.answers == len(c.changed) and c.answers]
    if len({c.answers for c in heads}) != 1 or len(heads) < 2:
        heads = []
    rest = [c for c in comparisons if not any(c is h for h in heads)]
    answers, changed = sum(c.answers for c in rest), sum(c.changed_answers for c in rest)
    if heads:
        answers += heads[0].answers
        changed += sum(any(flags) for flags in zip(*(c.changed for c in heads), strict=True))
    return answers, changed
