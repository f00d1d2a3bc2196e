"""The package's own verdict: a run with the original models against a run with the shrunk ones.

A *regression* is a test that passed (or xfailed) with the original models and fails, errors or
does not run at all with the shrunk ones, or, for a command without pytest, an exit status that
turns non-zero. Tests that already failed with the original models are reported, never counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hatch_shrinkray.capture.observe import Observed

GOOD = ("passed", "xfailed", "skipped")
EXIT_STATUS = "exit status"
"""The regression of a command judged by its exit status alone."""
BAD = ("failed", "error", "xpassed")


@dataclass(frozen=True)
class Regression:
    test: str
    """Node id, or ``exit status`` for the command as a whole."""
    before: str
    after: str
    text: str


@dataclass(frozen=True)
class Verdict:
    original: Observed
    shrunk: Observed
    regressions: tuple[Regression, ...]
    fixed: tuple[str, ...]
    """Tests that failed with the original models and pass with the shrunk ones (reported only)."""

    @property
    def passed(self) -> bool:
        return not self.regressions


def judge(original: Observed, shrunk: Observed) -> Verdict:
    regressions = []
    for test, before in original.tests.items():
        after = shrunk.tests.get(test)
        if before.outcome in GOOD and (after is None or after.outcome in BAD) and not (
                before.outcome == "skipped" and after is None):
            regressions.append(Regression(test, before.outcome, after.outcome if after else "did not run",
                                          after.text if after else ""))
    if original.exit_code == 0 and shrunk.exit_code != 0 and not regressions:
        regressions.append(Regression(EXIT_STATUS, "0", str(shrunk.exit_code),
                                      "the command failed with the shrunk models and succeeded with the originals"))
    fixed = tuple(t for t, o in original.tests.items() if o.outcome in BAD
                  and (a := shrunk.tests.get(t)) is not None and a.outcome == "passed")
    return Verdict(original, shrunk, tuple(regressions), fixed)


def tally(observed: Observed) -> str:
    """``30 passed, 2 failed`` (outcomes in a fixed order), or ``no pytest tests seen``."""
    if not observed.tests:
        return "no pytest tests seen"
    counts = Counter(o.outcome for o in observed.tests.values())
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts[k])
