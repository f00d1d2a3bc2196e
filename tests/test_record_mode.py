"""``hatch-shrinkray record --mode``: what a run does with an earlier recording of the same model, run
as a user runs it (the installed console script, a real pytest and onnxruntime, no mocks)."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

from hardening import cli

from hatch_shrinkray.recording.select import REPEATED
from hatch_shrinkray.recording.storage import read_recording

from onnx_builders import mlp, save

TESTS = textwrap.dedent("""
    import numpy as np, onnxruntime as ort, pytest

    @pytest.mark.parametrize("value", {values!r})
    def test_runs_the_model(value):
        sess = ort.InferenceSession({model!r})
        sess.run(None, {{"x": np.full((1, 256), value, np.float32)}})
""")


def suite(tmp_path: Path, name: str, values: list[float]) -> tuple[Path, set[str]]:
    """A test file that runs the model once per value, and the units its tests are recorded under."""
    model = tmp_path / "a.onnx"
    if not model.exists():
        save(mlp(256, 64), model)
    path = tmp_path / f"test_{name}.py"
    path.write_text(TESTS.format(values=values, model=str(model)))
    return path, {f"test:{path.name}::test_runs_the_model[{v}]" for v in values}


def record(tmp_path: Path, tests: Path, *flags: str) -> tuple[str, list[str]]:
    """Record ``tests`` into ``tmp_path/rec``; the summary and the recording's units."""
    proc = cli("record", "-o", str(tmp_path / "rec"), *flags, "--", sys.executable, "-m", "pytest", "-q",
               "-p", "no:cacheprovider", tests.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (only,) = (tmp_path / "rec").glob("*.npz")
    return proc.stdout, list(read_recording(only).units)


def test_add_keeps_both_runs_units(tmp_path: Path) -> None:
    first, first_units = suite(tmp_path, "first", [1.0, 2.0])
    second, second_units = suite(tmp_path, "second", [3.0, 4.0, 5.0])
    record(tmp_path, first)
    summary, units = record(tmp_path, second, "--mode", "add")
    assert sorted(units) == sorted(first_units | second_units)
    assert "a.onnx: added to an earlier recording (2 samples)" in summary, summary
    (only,) = (tmp_path / "rec").glob("*.npz")
    assert read_recording(only).calls == 5
    summary, units = record(tmp_path, suite(tmp_path, "third", [6.0])[0], "--mode", "add")
    assert len(units) == 6 and "added to an earlier recording (5 samples)" in summary


def test_adding_the_same_run_again_keeps_its_feeds_once(tmp_path: Path) -> None:
    tests, expected = suite(tmp_path, "same", [1.0, 2.0])
    record(tmp_path, tests)
    _, units = record(tmp_path, tests, "--mode", "add")
    assert sorted(units) == sorted(expected)
    (only,) = (tmp_path / "rec").glob("*.npz")
    rec = read_recording(only)
    assert rec.calls == 4 and dict(rec.skipped)[REPEATED] == 2


def test_replace_drops_the_earlier_runs_units(tmp_path: Path) -> None:
    first, _ = suite(tmp_path, "first", [1.0, 2.0])
    second, second_units = suite(tmp_path, "second", [3.0])
    record(tmp_path, first)
    for flags in ((), ("--mode", "replace")):  # the default replaces
        summary, units = record(tmp_path, second, *flags)
        assert units == sorted(second_units)
        assert "`hatch-shrinkray record --mode add` adds to it instead" in summary, summary
        record(tmp_path, first)


def test_a_bad_mode_is_one_line_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    proc = cli("record", "-o", str(tmp_path / "rec"), "--mode", "merge", "--", sys.executable, "-c",
               f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr.startswith("error: argument --mode: invalid choice: 'merge'"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "'replace', 'add'" in proc.stderr
    assert not marker.exists() and not (tmp_path / "rec").exists()


def test_adding_to_an_unreadable_recording_keeps_it_and_says_so(tmp_path: Path) -> None:
    tests, _ = suite(tmp_path, "first", [1.0])
    sha = hashlib.sha256((tmp_path / "a.onnx").read_bytes()).hexdigest()
    damaged = tmp_path / "rec" / f"a-{sha[:16]}.npz"
    damaged.parent.mkdir()
    damaged.write_bytes(b"not a zip file")
    proc = cli("record", "-o", str(tmp_path / "rec"), "--mode", "add", "--", sys.executable, "-m", "pytest", "-q",
               "-p", "no:cacheprovider", tests.name, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"error: {damaged.name} cannot be read (" in proc.stderr, proc.stderr
    assert "this run's samples were not added to it; move it away or record with `--mode replace`" in proc.stderr
    assert damaged.read_bytes() == b"not a zip file"
