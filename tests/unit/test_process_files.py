"""The files a command's processes leave for ``record`` and ``check``, written and read back through
the codec: a recorder's exit report (``capture.process``, read by ``capture.run.finish``) and a pytest
session's outcomes (``capture.outcomes``, run inside a real in-process pytest, read by
``capture.observe``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hatch_shrinkray.capture import process
from hatch_shrinkray.capture.env import OUTCOMES, RECORD
from hatch_shrinkray.capture.observe import _outcomes
from hatch_shrinkray.capture.outcome_file import Outcome
from hatch_shrinkray.capture.run import finish
from hatch_shrinkray.errors import ShrinkrayError

pytest_plugins = ["pytester"]


def test_a_process_report_is_read_back_as_written_and_a_damaged_one_is_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / ".parts" / "run"
    run_dir.mkdir(parents=True)
    monkeypatch.setenv(RECORD, str(run_dir))
    monkeypatch.setattr(process, "_token", [f"{os.getpid()}-0a0b0c0d"])
    monkeypatch.setattr(process, "_reported", set())
    monkeypatch.setattr(process, "stats", {"onnxruntime": True, "sessions": 2, "calls": 5})
    process.report(["b.part", "a.part"], ["model.onnx (disk full)"])
    process.report(["c.part"], [])  # once per token: the first report stands
    (run_dir / "1-junk.done").write_text('{"pid": 1, "errors": "not a list"}')
    (run_dir / "2-lost.boot").write_text("")
    (run_dir / "2-lost.run").write_text("")
    done = finish(run_dir, tmp_path / "out", root=tmp_path)
    assert [(r.pid, r.onnxruntime, r.sessions, r.calls, r.parts, r.errors) for r in done.reports] == [
        (os.getpid(), True, 2, 5, ("a.part", "b.part"), ("model.onnx (disk full)",))]
    assert done.errors == ["unreadable process report 1-junk.done"]
    assert done.unwritten == [f"process {os.getpid()} could not write the recording of model.onnx (disk full): "
                              "its calls are missing"]
    assert (done.booted, done.lost) == (2, 1)  # the damaged report's process is not counted as booted
    assert not run_dir.exists()


def test_the_outcomes_a_real_pytest_session_writes_are_what_check_reads(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = tmp_path / "outcomes"
    monkeypatch.setenv(OUTCOMES, str(outcomes))
    pytester.makepyfile(test_cases="""
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("setup broke")

        def test_passes():
            pass

        def test_fails():
            assert 1 == 2, "one is not two"

        def test_skips():
            pytest.skip("not here")

        @pytest.mark.xfail(reason="known")
        def test_xfails():
            assert False

        @pytest.mark.xfail(reason="known")
        def test_xpasses():
            pass

        def test_errors(broken):
            pass
    """)
    pytester.runpytest_inprocess("-p", "hatch_shrinkray.capture.outcomes", "-p", "no:cacheprovider")
    tests, sessions = _outcomes(outcomes)
    assert sessions == 1
    assert {node.split("::")[-1]: o.outcome for node, o in tests.items()} == {
        "test_passes": "passed", "test_fails": "failed", "test_skips": "skipped", "test_xfails": "xfailed",
        "test_xpasses": "xpassed", "test_errors": "error"}
    texts = {node.split("::")[-1]: o.text for node, o in tests.items()}
    assert "one is not two" in texts["test_fails"] and "setup broke" in texts["test_errors"]
    assert texts["test_passes"] == texts["test_skips"] == ""
    assert list(tests) == sorted(tests)


def test_a_damaged_outcomes_file_names_every_problem(tmp_path: Path) -> None:
    (tmp_path / "1.0.json").write_text('{"tests": {"t": {"no outcome": 1}, "u": {"outcome": "passed"}}}')
    with pytest.raises(ShrinkrayError) as caught:
        _outcomes(tmp_path)
    assert caught.value.message.startswith("a report the command's processes wrote is damaged (1.0.json: Invalid: "
                                           "rootdir: missing; exitstatus: missing; tests.t.outcome: missing)")
    (tmp_path / "1.0.json").write_text('{"rootdir": "/p", "exitstatus": 0, "tests": {"u": {"outcome": "passed"}}}')
    assert _outcomes(tmp_path) == ({"u": Outcome("passed")}, 1)
