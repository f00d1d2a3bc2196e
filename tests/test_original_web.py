"""Target web: brotli 11 decides which model ships, and it is measured only where the LZMA estimates
could change that outcome (the shrunk model's where the two estimates are close, then the original's
where it is still in doubt); where a size stays an estimate, every report says so, and ``--sizes``
measures both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hardening import cli

from hatch_shrinkray import sizes
from hatch_shrinkray.engine import shrink
from hatch_shrinkray.options import ShrinkOptions

from onnx_builders import cancelling, mlp, save


def test_clearly_below_leaves_room_for_the_estimates_error() -> None:
    estimate = 1_500_000
    assert sizes.clearly_below(999_999, estimate)
    assert not sizes.clearly_below(1_000_000, estimate)
    assert not sizes.clearly_below(estimate, estimate) and not sizes.clearly_below(0, 0)


def test_clearly_apart_leaves_room_for_both_estimates_errors() -> None:
    assert sizes.clearly_apart(999_999, 2_250_000)
    assert not sizes.clearly_apart(1_000_000, 2_250_000)
    assert not sizes.clearly_apart(0, 0)


def _shrink_web(tmp_path: Path, *flags: str) -> tuple[list[str], dict[str, dict[str, object]], Path]:
    source = save(mlp(256, 256), tmp_path / "m.onnx")
    proc = cli("shrink", str(source), "-o", str(tmp_path / "o"), "--target", "web", "--no-verify", "-v",
               "--json", str(tmp_path / "r.json"), *flags)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())[0]
    return proc.stdout.splitlines(), report["sizes"], source


@pytest.mark.process
def test_target_web_estimates_both_when_the_shrunk_model_is_far_below(tmp_path: Path) -> None:
    lines, measured, source = _shrink_web(tmp_path)
    shipped = tmp_path / "o" / "m.onnx"
    original, shrunk = measured["original"], measured["shrunk"]
    assert original["web_estimated"] is True and original["web"] == sizes.web_estimate(source), original
    assert shrunk["web_estimated"] is True and shrunk["web"] == sizes.web_estimate(shipped), shrunk
    assert sizes.clearly_apart(shrunk["web"], original["web"])  # int8 of float32: about a quarter
    assert original["wheel"] == sizes.wheel_bytes(source) and shrunk["wheel"] == sizes.wheel_bytes(shipped)
    detail = lines[1]
    assert ", web ~" in detail and " -> ~" in detail and "%, estimated)" in detail, detail


def test_target_web_measures_the_shrunk_model_where_the_estimates_are_close(tmp_path: Path) -> None:
    """fp16 of random weights: about half of the original's web bytes, close enough for the estimates'
    error to matter, so brotli 11 measures the shrunk model (and that settles the original's)."""
    source = save(mlp(256, 256), tmp_path / "m.onnx")
    result = shrink(source, tmp_path / "o.onnx", ShrinkOptions(method="fp16", target="web", verify=None))
    assert result.original_sizes is not None and result.shrunk_sizes is not None
    assert not sizes.clearly_apart(sizes.web_estimate(tmp_path / "o.onnx"), result.original_sizes.web)
    assert result.shrunk_sizes.web_estimated is False
    assert result.shrunk_sizes.web == sizes.web_bytes(tmp_path / "o.onnx")
    assert result.original_sizes.web_estimated is True  # exact shrunk bytes are clearly below its estimate


def test_an_original_that_ships_unverified_under_target_web_is_not_compressed_at_brotli_11(tmp_path: Path) -> None:
    """int8 swamps the small difference of two large products on generated inputs: the original ships
    (the build goes on), and its web bytes stay the estimate; nothing was decided on them."""
    source = save(cancelling(), tmp_path / "m.onnx")
    result = shrink(source, tmp_path / "o.onnx", ShrinkOptions(target="web"))
    assert result.unverified and result.shrunk_sizes is not None
    assert result.shrunk_sizes.web_estimated and result.shrunk_sizes.web == sizes.web_estimate(tmp_path / "o.onnx")


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
