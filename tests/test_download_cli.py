"""Download sizes through the console script (the rest: tests/unit/test_download.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import cli, hatchling_member

from hatch_shrinkray import sizes
from hatch_shrinkray.errors import ShrinkrayError

from realmodels import magika, silero_vad


@pytest.mark.network
@pytest.mark.process
def test_cli_int8_with_31_levels_reports_three_sizes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("-v", "shrink", str(magika()), "-o", str(out), "--method", "int8", "--levels", "31", "--target",
            "wheel", "--json", str(tmp_path / "r.json"))
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    line, detail = proc.stdout.splitlines()[:2]
    assert line.startswith(f"{magika()}: shrunk, 3.16 MB -> 824.00 KB (26.0%), int8 with 31 "
                           "levels: "), line
    assert detail.startswith(f"{magika()}: wheel 2.92 MB -> "), detail
    assert ", web ~2.90 MB -> ~" in detail and "estimated); 3 tensors int8" in detail, detail
    assert "int8 31 levels axis 1" in proc.stdout  # the per-tensor table (-v)
    report = json.loads((tmp_path / "r.json").read_text())[0]
    assert report["target"] == "wheel" and report["options"]["levels"] == 31
    original, shrunk = report["sizes"]["original"], report["sizes"]["shrunk"]
    assert original["raw"] == magika().stat().st_size and original["web_estimated"] is True
    assert shrunk["raw"] == (out / "model.onnx").stat().st_size
    assert shrunk["wheel"] == hatchling_member((out / "model.onnx").read_bytes())
    m = onnx.load(str(out / "model.onnx"))
    codes = [onnx.numpy_helper.to_array(t) for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(codes) == 3 and all(len(np.unique(c[:, j])) <= 31 for c in codes for j in range(c.shape[1]))
    first = (out / "model.onnx").read_bytes()
    again = cli(*args, "--force")
    assert again.returncode == 0 and (out / "model.onnx").read_bytes() == first  # deterministic


@pytest.mark.network
@pytest.mark.extended
def test_cli_target_web_measures_brotli_and_sizes_prints_the_table(tmp_path: Path) -> None:
    proc = cli("shrink", str(silero_vad()), "-o", str(tmp_path / "o"), "--levels", "63", "--target", "web",
               "--no-verify", "--sizes")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[0]
    assert "~" not in line and "estimated" not in line, line
    assert "web (brotli 11) (target)" in proc.stdout
    shipped = (tmp_path / "o" / "silero_vad.onnx").read_bytes()
    assert f"{sizes.web_bytes(shipped)} (" in proc.stdout


@pytest.mark.network
@pytest.mark.process
def test_option_errors_on_the_command_line(tmp_path: Path) -> None:
    proc = cli("shrink", str(magika()), "-o", str(tmp_path / "o"), "--levels", "256", "--target", "zip")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: --levels must be an integer from 3 to 255 with method int8 (255: plain int8); got 256; "
        "--target must be one of wheel, web, disk, memory; got 'zip'"], proc.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.network
@pytest.mark.process
def test_target_web_without_brotli_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """A Python where brotli does not import (a module of that name that raises, first on the path)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "brotli.py").write_text("raise ImportError('no brotli here')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    proc = cli("shrink", str(magika()), "-o", str(tmp_path / "o"), "--target", "web", env=env)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: --target web counts brotli quality 11 bytes, and brotli is not installed "
        "(pip install 'hatch-shrinkray-core[compress]')"], proc.stderr
    assert not (tmp_path / "o").exists()
    with pytest.raises(ShrinkrayError, match=r"target web counts brotli quality 11 bytes, and brotli is not"):
        shrink_without_brotli(tmp_path, env)
    plain = cli("-v", "shrink", str(magika()), "-o", str(tmp_path / "o2"), env=env)
    assert plain.returncode == 0 and "web ~" in plain.stdout  # the estimate needs no brotli


def shrink_without_brotli(tmp_path: Path, env: dict[str, str]) -> None:
    """The API says the same (from a process where brotli does not import)."""
    code = (f"from hatch_shrinkray.engine import shrink; from hatch_shrinkray.options import ShrinkOptions\n"
            f"shrink({str(magika())!r}, None, ShrinkOptions(target='web', verify=None))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        raise ShrinkrayError(proc.stderr.strip().splitlines()[-1])


@pytest.mark.network
@pytest.mark.process
def test_compare_shows_the_three_sizes(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert cli("shrink", str(magika()), "-o", str(out), "--levels", "63").returncode == 0
    proc = cli("compare", str(magika()), str(out / "model.onnx"))
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()
    assert head[0].split() == ["raw", "wheel", "(deflate", "6)", "web", "(brotli", "11)"], head
    assert head[2].startswith("shrunk") and f"{sizes.wheel_bytes(out / 'model.onnx')} (" in head[2]
    assert "~ web estimated" in proc.stdout
