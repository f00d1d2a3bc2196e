"""``checking.verdict``: the package's own tests with the original models against the shrunk ones,
as a pure function over what the two runs observed (no processes)."""

from __future__ import annotations

import pytest

from hatch_shrinkray.capture.observe import Observed, Outcome
from hatch_shrinkray.checking.verdict import EXIT_STATUS, judge, tally


def run(exit_code: int = 0, **tests: str) -> Observed:
    return Observed(exit_code, {name: Outcome(outcome, f"{name} {outcome}") for name, outcome in tests.items()},
                    1 if tests else 0, {}, 0.0)


@pytest.mark.parametrize("before", ["passed", "xfailed", "skipped"])
@pytest.mark.parametrize("after", ["failed", "error", "xpassed"])
def test_a_good_test_that_turns_bad_is_a_regression(before: str, after: str) -> None:
    verdict = judge(run(1 if after != "xpassed" else 0, t=before), run(1, t=after))
    assert not verdict.passed
    assert [(r.test, r.before, r.after, r.text) for r in verdict.regressions] == [("t", before, after, f"t {after}")]


def test_a_test_that_no_longer_runs_is_a_regression() -> None:
    verdict = judge(run(t="passed", u="passed"), run(t="passed"))
    assert [(r.test, r.after, r.text) for r in verdict.regressions] == [("u", "did not run", "")]


def test_a_skipped_test_that_no_longer_runs_is_not() -> None:
    assert judge(run(t="skipped"), run()).passed


def test_tests_that_failed_with_the_originals_are_never_counted() -> None:
    verdict = judge(run(1, t="failed", u="error", v="passed"), run(1, t="failed", u="passed", v="passed"))
    assert verdict.passed and verdict.fixed == ("u",)


def test_without_pytest_the_exit_status_decides() -> None:
    verdict = judge(run(0), run(3))
    assert [(r.test, r.before, r.after) for r in verdict.regressions] == [(EXIT_STATUS, "0", "3")]
    assert judge(run(2), run(3)).passed  # it failed with the originals too


def test_a_failing_exit_status_beside_a_test_regression_is_not_counted_twice() -> None:
    verdict = judge(run(0, t="passed"), run(1, t="failed"))
    assert [r.test for r in verdict.regressions] == ["t"]


def test_tally_counts_outcomes_in_a_fixed_order() -> None:
    assert tally(run(1, a="failed", b="passed", c="passed", d="xfailed", e="skipped")) == \
        "2 passed, 1 failed, 1 skipped, 1 xfailed"
    assert tally(run(0)) == "no pytest tests seen"
