"""Progress on long work: plain lines at least every interval on a pipe, a live display on a
terminal, nothing when quiet, nothing at all without a reporter."""

from __future__ import annotations

import io
import sys
import time

import pytest

from hatch_shrinkray import progress


def test_a_silent_step_is_repeated_on_its_schedule() -> None:
    lines: list[str] = []
    reporter = progress.Reporter(lines.append, prefix="shrinkray: m.onnx: ", interval=0.2)
    with progress.reporting(reporter), progress.task("auto: sensitivity", total=40) as t:
        t.advance(10)
        time.sleep(0.7)  # no advance: the ticker still speaks, at least every 0.2 s
    assert 2 <= len(lines) <= 5, lines
    assert lines[0].startswith("shrinkray: m.onnx: auto: sensitivity 10/40 (25%), ")
    assert "so far, about " in lines[0] and lines[0].endswith(" left")
    assert reporter.ticker is not None and not reporter.ticker.is_alive()  # stopped when the work ended


def test_nested_steps_are_shown_together_and_quiet_says_nothing() -> None:
    lines: list[str] = []
    with progress.reporting(progress.Reporter(lines.append, interval=0.1)), \
            progress.task("check --search", total=3) as outer, progress.task("run 2: tests") as inner:
        outer.advance()
        inner.advance(5, detail="passed")
        time.sleep(0.35)
    assert any(line.startswith("check --search 1/3 (33%), ") and " > run 2: tests 5 passed, " in line
               for line in lines), lines
    assert progress.for_stream(io.StringIO(), quiet=True) is None
    with progress.task("no reporter") as t:  # costs nothing, says nothing
        t.advance()


def test_a_terminal_gets_the_live_display_and_a_pipe_plain_lines() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    live = progress.for_stream(Tty(), quiet=False)
    assert isinstance(live, progress.LiveReporter)
    with progress.reporting(live), progress.task("wheel: models", total=2) as t:
        t.advance(2)
    plain = progress.for_stream(io.StringIO(), quiet=False)
    assert type(plain) is progress.Reporter


def test_another_program_on_the_terminal_gets_plain_lines_around_it() -> None:
    """While the user's command writes to the terminal (check, record), the live display steps aside
    and plain lines say where the work is; afterwards the display is back."""
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    live = progress.for_stream(stream, quiet=False)
    assert isinstance(live, progress.LiveReporter)
    live.interval = 0.1
    with progress.reporting(live), progress.task("check: runs of the command", total=2) as runs:
        runs.advance()
        with progress.external():
            assert not live.bars.live.is_started
            time.sleep(0.4)
        assert live.bars.live.is_started
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("check: runs of the command 1/2")]
    assert lines and "so far, about " in lines[0], stream.getvalue()


def test_library_loops_report_without_knowing_the_reporter() -> None:
    lines: list[str] = []
    with progress.reporting(progress.Reporter(lines.append, interval=0.05)):
        for _ in progress.tracked(range(3), "merging", detail=lambda i: f"model {i}"):
            time.sleep(0.1)
    assert any(line.startswith("merging 1/3 (33%) model 1, ") for line in lines), lines
    assert list(progress.tracked([1, 2], "no reporter")) == [1, 2]


def test_a_live_display_leaves_a_redirected_stdout_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`hatch-shrinkray shrink ... > report.txt` on a terminal: the report still goes to the file."""
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    with progress.reporting(progress.for_stream(Tty(), quiet=False)), progress.task("shrink", total=1):
        print("the report")
        assert sys.stdout is stdout
    assert stdout.getvalue() == "the report\n"
