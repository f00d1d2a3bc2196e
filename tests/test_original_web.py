"""Target web: the shrunk model's brotli 11 decides, and the original's is measured only when its
estimate could change the outcome; where it stays an estimate, every report says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hardening import cli

from hatch_shrinkray import sizes
from hatch_shrinkray.engine import shrink
from hatch_shrinkray.options import ShrinkOptions

from onnx_builders import mlp, save


def test_clearly_below_leaves_room_for_the_estimates_error() -> None:
    estimate = 1_500_000
    assert sizes.clearly_below(999_999, estimate)
    assert not sizes.clearly_below(1_000_000, estimate)
    assert not sizes.clearly_below(estimate, estimate) and not sizes.clearly_below(0, 0)


def _shrink_web(tmp_path: Path, *flags: str) -> tuple[list[str], dict[str, dict[str, object]], Path]:
    source = save(mlp(256, 256), tmp_path / "m.onnx")
    proc = cli("shrink", str(source), "-o", str(tmp_path / "o"), "--target", "web", "--no-verify", "-v",
               "--json", str(tmp_path / "r.json"), *flags)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())[0]
    return proc.stdout.splitlines(), report["sizes"], source


@pytest.mark.process
def test_target_web_estimates_the_original_when_the_shrunk_model_is_clearly_smaller(tmp_path: Path) -> None:
    lines, measured, source = _shrink_web(tmp_path)
    shipped = tmp_path / "o" / "m.onnx"
    original, shrunk = measured["original"], measured["shrunk"]
    assert original["web_estimated"] is True and original["web"] == sizes.web_estimate(source), original
    assert shrunk["web_estimated"] is False and shrunk["web"] == sizes.web_bytes(shipped), shrunk
    assert original["wheel"] == sizes.wheel_bytes(source)
    detail = lines[1]
    assert ", web ~" in detail and "%, estimated)" in detail, detail


@pytest.mark.process
def test_sizes_measures_the_original_too_and_the_table_says_why_otherwise(tmp_path: Path) -> None:
    lines, measured, source = _shrink_web(tmp_path, "--sizes")
    assert measured["original"]["web_estimated"] is False
    assert measured["original"]["web"] == sizes.web_bytes(source)
    assert not any("~" in line for line in lines), lines


def test_the_original_is_measured_when_the_shrunk_model_is_close_to_it(tmp_path: Path) -> None:
    """Nothing worth encoding: the model written is the original again, so its estimate cannot
    settle anything and brotli 11 of the original is measured."""
    source = save(mlp(256, 256), tmp_path / "m.onnx")
    result = shrink(source, tmp_path / "o.onnx", ShrinkOptions(target="web", min_elements=1 << 20, verify=None))
    assert not result.encoded
    assert result.original_sizes is not None and result.shrunk_sizes is not None
    assert result.original_sizes.web_estimated is False and result.original_sizes.web == sizes.web_bytes(source)
    assert result.shrunk_sizes.web_estimated is False


def test_without_target_web_both_stay_estimates(tmp_path: Path) -> None:
    source = save(mlp(256, 256), tmp_path / "m.onnx")
    result = shrink(source, None, ShrinkOptions(verify=None))
    assert result.original_sizes is not None and result.shrunk_sizes is not None
    assert result.original_sizes.web_estimated and result.shrunk_sizes.web_estimated
