"""``shipping.advice``: the one place that spells the ``record`` command a build, ``check`` and the
command line advise, as pure functions of the project's tree."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.shipping.advice import RECORDING, default_recording, record_advice, record_command

COMMAND = "hatch-shrinkray record -o {} -- python -m pytest tests"


def test_a_project_with_tests_records_beside_them(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    assert default_recording(tmp_path) == RECORDING
    assert record_command(tmp_path, "rec") == COMMAND.format("rec")
    assert record_advice(tmp_path, None) == \
        f"to shrink it: `{COMMAND.format(RECORDING)}`, then set `inputs`"


def test_a_project_without_tests_is_told_to_run_its_own_command(tmp_path: Path) -> None:
    assert default_recording(tmp_path) == "shrinkray-inputs"
    assert record_command(tmp_path, "rec") == "hatch-shrinkray record -o rec -- COMMAND"


def test_a_flag_is_advised_as_a_flag_and_several_models_as_them(tmp_path: Path) -> None:
    advice = record_advice(tmp_path, None, key="--inputs", models=2)
    assert advice == "to shrink them: `hatch-shrinkray record -o shrinkray-inputs -- COMMAND`, then pass `--inputs`"
    assert record_advice(tmp_path, None, key="tool.hatch.build.hooks.shrinkray.inputs").endswith(
        "then set `tool.hatch.build.hooks.shrinkray.inputs`")


def test_a_recording_that_lacks_the_model_is_named_relative_to_the_project(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    advice = record_advice(tmp_path, tmp_path / "tests" / "inputs")
    assert advice == f"tests/inputs holds no recording of it; to shrink it: `{COMMAND.format('tests/inputs')}`"


def test_a_recording_outside_the_project_keeps_its_path(tmp_path: Path) -> None:
    outside = tmp_path.parent / "shared-inputs"
    assert record_advice(tmp_path, outside, models=3).startswith(f"{outside} holds no recording of them;")
