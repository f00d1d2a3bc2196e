"""``shipping.layout``: a model named by its project path or its in-wheel path, as hatchling lays
the project out (pure mapping; ``project_layout`` asks hatchling itself, in this process)."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.shipping.layout import Layout, project_layout

SRC = Layout((("src/", ""),))


def test_the_source_prefix_is_dropped_in_the_wheel_and_restored_in_the_project() -> None:
    assert SRC.to_wheel("src/pkg/models/x.onnx") == "pkg/models/x.onnx"
    assert SRC.to_source("pkg/models/x.onnx") == "src/pkg/models/x.onnx"
    assert SRC.to_wheel("other/x.onnx") == "other/x.onnx"


def test_the_first_matching_source_wins_and_an_empty_one_applies_to_every_path() -> None:
    layout = Layout((("lib/a/", "a/"), ("", "root/")))
    assert layout.to_wheel("lib/a/m.onnx") == "a/m.onnx"
    assert layout.to_wheel("m.onnx") == "root/m.onnx"


def test_a_pattern_has_one_or_two_spellings() -> None:
    assert SRC.spellings("src/pkg/*.onnx", in_wheel=True) == ["src/pkg/*.onnx", "pkg/*.onnx"]
    assert SRC.spellings("pkg/*.onnx", in_wheel=False) == ["pkg/*.onnx", "src/pkg/*.onnx"]
    assert Layout().spellings("pkg/*.onnx", in_wheel=True) == ["pkg/*.onnx"]


def test_a_hatch_project_is_laid_out_by_hatchling(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\nversion = "1"\n[tool.hatch.build.targets.wheel]\npackages = ["src/pkg"]\n',
        encoding="utf-8")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    assert project_layout(tmp_path).to_wheel("src/pkg/m.onnx") == "pkg/m.onnx"


def test_no_pyproject_no_layout(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    assert project_layout(tmp_path) == Layout()


def test_a_project_hatchling_cannot_lay_out_is_taken_to_use_src(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("not toml [", encoding="utf-8")
    (tmp_path / "src").mkdir()
    assert project_layout(tmp_path) == SRC
