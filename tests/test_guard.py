"""The do-no-harm guard's rule (``fitting.guard``): when a data-fitted choice that may spend error on
a tie with round-to-nearest int8 gets to spend it."""

from __future__ import annotations

import numpy as np

from hatch_shrinkray.fitting.guard import Score, Scorer, decide
from hatch_shrinkray.samples import Sequencing

HOW = "the held-out half"


def _logits(rows: int, seed: int) -> np.ndarray:
    """A classifier's scores, one row per sample, with clear winners (no near ties)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 8)).astype(np.float32)
    x[np.arange(rows), rng.integers(0, 8, rows)] += 6.0
    return x


def test_a_tie_at_nothing_flipped_goes_to_the_smaller_error_even_where_the_plan_may_spend_it() -> None:
    """Neither side flipped or changed anything on the held-out units: that tie measured nothing, so
    a plan at more error loses although it may spend error, and one at less error is kept. Judged
    from real outputs: a few rows of scores, the plan's noise twice round-to-nearest's."""
    reference = _logits(40, 0)
    rng = np.random.default_rng(1)
    noise = rng.normal(size=reference.shape).astype(np.float32)
    score = Scorer.of(["scores"], [[row[None]] for row in reference], Sequencing.plain(40), None)
    rtn = score([[row[None] + 0.01 * n[None]] for row, n in zip(reference, noise, strict=True)])
    plan = score([[row[None] + 0.02 * n[None]] for row, n in zip(reference, noise, strict=True)])
    assert (plan.flips, plan.changed, rtn.flips, rtn.changed) == (0, 0, 0, 0) and plan.error > rtn.error > 0
    assert not decide("auto's plan", plan, rtn, 40, HOW, by_error=False).kept
    assert decide("auto's plan", rtn, plan, 40, HOW, by_error=False).kept


def test_a_tie_where_round_to_nearest_flipped_decisions_may_spend_error() -> None:
    """Where round-to-nearest flipped held-out decisions and the plan flipped no more and changed no
    more answers, the decisions measured the two: a plan that may spend error keeps its tie; one that
    may not loses it; one more flipped decision or changed answer loses either way."""
    rtn, tie = Score(1, 3, 1e-4), Score(1, 3, 3e-4)
    assert decide("auto's plan", tie, rtn, 40, HOW, by_error=False).kept
    assert not decide("auto's plan", tie, rtn, 40, HOW).kept
    assert not decide("auto's plan", Score(1, 4, 1e-5), rtn, 40, HOW, by_error=False).kept
    assert not decide("auto's plan", Score(2, 3, 1e-5), rtn, 40, HOW, by_error=False).kept
    assert decide("auto's plan", Score(1, 2, 1e-3), rtn, 40, HOW).kept  # fewer flips win at any error
    assert decide("auto's plan", Score(0, 0, 1e-3), Score(1, 0, 1e-4), 40, HOW, by_error=False).kept


def test_a_plan_that_loses_its_tie_says_round_to_nearest_ships() -> None:
    outcome = decide("auto's plan", Score(0, 0, 7e-5), Score(0, 0, 1e-5), 40, HOW, by_error=False)
    assert not outcome.kept
    assert outcome.text().startswith("auto's plan not kept (round-to-nearest ships): on 40 held-out units")


def test_outputs_of_values_only_let_a_plan_spend_error_within_the_users_budget_only() -> None:
    """Nothing to count on either side (a regression output, an embedding): with a budget the user
    gave, that budget is the whole floor, so a plan that may spend error keeps its tie; by default the
    error is the one measure of answers there, and the plan with more of it loses (an embedder's
    `auto` that spent error changed held-out nearest neighbours that round-to-nearest int8 kept)."""
    rtn, plan = Score(0, 0, 1e-5, judged=False), Score(0, 0, 7e-5, judged=False)
    assert decide("auto's plan", plan, rtn, 40, HOW, by_error=False, budget_given=True).kept
    assert not decide("auto's plan", plan, rtn, 40, HOW, by_error=False).kept
    assert not decide("auto's plan", plan, rtn, 40, HOW, budget_given=True).kept
    assert decide("auto's plan", rtn, plan, 40, HOW, by_error=False).kept  # less error wins anyway
