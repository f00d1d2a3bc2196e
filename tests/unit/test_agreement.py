"""The agreement gate: it fails on the observed share of unchanged decisions (decision 7: a bound never
lets an observed figure past its limit), a near-tie cannot fail a correct model, and every percentage
comes with the count behind it and the bound that says how sure the failure is."""

from __future__ import annotations

import numpy as np
import pytest

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.verification.compare import agreement_fails, compare, flip_rate_lower_bound


def scores(n: int, classes: int = 256, seed: int = 0) -> np.ndarray:
    """(n, classes) scores with a clear winner per row (gap 1.0 on a range of about 10)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, (n, classes)).astype(np.float32)
    x[:, -1] = -1.0  # logits are negative somewhere (all positive past 1: separate scores, judged as values)
    x[np.arange(n), rng.integers(0, classes, n)] = 6.0
    return x


def flip(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A copy whose argmax moves in ``rows`` to another class by a clear margin."""
    y = x.copy()
    for r in rows:
        other = (int(x[r].argmax()) + 1) % x.shape[1]
        y[r, other] = x[r].max() + 1.0
    return y


def test_near_tie_on_two_samples_does_not_fail_a_correct_model() -> None:
    ref = scores(2)
    ref[0, :2] = [6.0, 5.999]  # row 0: top-2 gap 1e-3 on a range of ~6, a tie any rounding can flip
    ref[0, 2:] = np.minimum(ref[0, 2:], 5.0)
    got = ref.copy()
    got[0, 1] = 6.0005  # the shrunk model flips that tie
    c = compare("features", [ref], [got], VerifyOptions())
    assert c.agreement_kind == "top-1" and (c.positions, c.flips, c.near_ties) == (2, 1, 1)
    assert c.ok, c.failures
    assert c.agreement_text() == "50.0% (1/2; 1 at near-ties)"


def test_a_clear_flip_on_two_samples_still_fails() -> None:
    ref = scores(2)
    c = compare("features", [ref], [flip(ref, np.array([0]))], VerifyOptions())
    assert (c.flips, c.near_ties) == (1, 0)
    assert not c.ok and c.failures[0] == "top-1 50.0% (1/2) < 95% (1 flip; flip rate >= 12.1% at 95%)"


def test_three_percent_of_500_clear_flips_fail_a_one_percent_allowance() -> None:
    ref = scores(500)
    rows = np.arange(0, 500, 34)[:15]  # 15 of 500 = 3%
    got = flip(ref, rows)
    strict = compare("logits", [ref], [got], VerifyOptions(min_agreement=0.99))
    assert not strict.ok and strict.flips == 15 and strict.near_ties == 0
    assert strict.failures[0].startswith("top-1 97.0% (485/500) < 99% (15 flips;")
    loose = compare("logits", [ref], [got], VerifyOptions(min_agreement=0.95))  # 3% is within a 5% allowance
    assert loose.ok


def test_an_observed_share_past_the_limit_fails_however_few_the_positions() -> None:
    """152 of 163 decisions kept (6.7% flipped) against the default 95%: the lower end of the flip rate's
    interval (3.9%) is within the 5% allowance, and it still fails: the limit is on what was observed."""
    ref = scores(163)
    got = flip(ref, np.arange(0, 163, 15)[:11])
    c = compare("logits", [ref], [got], VerifyOptions())
    assert c.flips == 11 and flip_rate_lower_bound(11, 163) < 0.05
    assert not c.ok and c.failures[0].startswith("top-1 93.3% (152/163) < 95% (11 flips; flip rate >= ")
    at_the_limit = flip(ref, np.arange(0, 163, 20)[:8])  # 8 of 163 = 4.9%: within
    assert compare("logits", [ref], [at_the_limit], VerifyOptions()).ok


def test_a_few_flips_among_many_positions_pass() -> None:
    ref = scores(500)
    got = flip(ref, np.array([3, 250]))  # 0.4%
    assert compare("logits", [ref], [got], VerifyOptions(min_agreement=0.99)).ok


def test_probability_decisions_are_counted_with_near_ties_at_the_threshold() -> None:
    ref = np.array([[0.9], [0.1], [0.502], [0.7]], dtype=np.float32)
    got = np.array([[0.9], [0.1], [0.498], [0.7]], dtype=np.float32)  # only the 0.502 one crosses 0.5
    c = compare("speech", [ref], [got], VerifyOptions())
    assert c.agreement_kind == "decision" and (c.positions, c.flips, c.near_ties) == (4, 1, 1) and c.ok
    clear = np.array([[0.9], [0.1], [0.3], [0.7]], dtype=np.float32)
    ref2 = np.array([[0.9], [0.1], [0.8], [0.7]], dtype=np.float32)
    assert not compare("speech", [ref2], [clear], VerifyOptions()).ok


def test_unit_length_embeddings_are_not_class_scores_but_softmax_rows_are() -> None:
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((4, 384))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    assert compare("embedding", [emb.astype(np.float32)], [emb.astype(np.float32)], VerifyOptions()).top1 is None
    probs = np.full((4, 10), 1e-4, np.float32)
    probs[:, 3] = 1 - 9e-4  # confident softmax rows have norm ~1 too, but no negative entries
    assert compare("probabilities", [probs], [probs], VerifyOptions()).agreement_kind == "top-1"


@pytest.mark.parametrize(("flips", "positions", "low", "high"),
                         [(1, 2, 0.10, 0.14), (15, 500, 0.017, 0.021), (0, 10, 0.0, 0.0), (500, 500, 0.99, 1.0)])
def test_wilson_lower_bound(flips: int, positions: int, low: float, high: float) -> None:
    assert low <= flip_rate_lower_bound(flips, positions) <= high


def test_gate_is_monotone_in_flips_and_fails_past_the_observed_limit() -> None:
    verdicts = [agreement_fails(f, 200, 0.95) for f in range(0, 60)]
    assert verdicts == sorted(verdicts) and not verdicts[0] and verdicts[-1]
    assert verdicts.index(True) == 11  # 10 of 200 is exactly 95%: within; 11 is past it
