"""The command-line tool, run as users run it (a subprocess), plus main() in-process for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from hatch_shrinkray.cli import main

from onnx_builders import mlp, save


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hatch_shrinkray", *args], capture_output=True, text=True,
                          check=False, timeout=300)


def test_shrink_writes_verified_outputs_and_reports(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    proc = cli("shrink", str(a), "-o", str(tmp_path / "out"), "--sizes", "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    assert "a.onnx" in proc.stdout and "gzip-9" in proc.stdout and "cos" in proc.stdout
    onnx.checker.check_model(str(tmp_path / "out" / "a.onnx"), full_check=True)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report[0]["verification"]["passed"] is True
    assert report[0]["sizes"]["shrunk"]["raw"] < report[0]["sizes"]["original"]["raw"] / 3


def test_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    out = tmp_path / "out"
    assert main(["shrink", str(a), "-o", str(out)]) == 0
    before = (out / "a.onnx").read_bytes()
    assert main(["shrink", str(a), "-o", str(out)]) == 1
    assert "exists (use --force to overwrite)" in capsys.readouterr().err
    assert (out / "a.onnx").read_bytes() == before
    assert main(["shrink", str(a), "-o", str(out), "--force"]) == 0


def test_a_bad_file_is_reported_and_the_others_still_processed(tmp_path: Path) -> None:
    good = save(mlp(), tmp_path / "good.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    proc = cli("shrink", str(bad), str(good), str(tmp_path / "nomatch*.onnx"), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"error: {bad}: is not a valid ONNX model" in proc.stderr
    assert "nomatch*.onnx: matches no file" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good.onnx"]


def test_never_overwrites_the_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    before = a.read_bytes()
    assert main(["shrink", str(a), "-o", str(tmp_path), "--force"]) == 1
    assert "would overwrite the source" in capsys.readouterr().err
    assert a.read_bytes() == before


def test_info_lists_weights_and_their_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    assert main(["info", str(a)]) == 0
    out = capsys.readouterr().out
    assert "of the file" in out and "W1" in out and "axis 1 (MatMul)" in out


def test_compare_passes_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    assert main(["shrink", str(a), "-o", str(tmp_path / "o")]) == 0
    assert main(["compare", str(a), str(tmp_path / "o" / "a.onnx")]) == 0
    assert main(["compare", str(a), str(tmp_path / "o" / "a.onnx"), "--max-rel-l2", "1e-9"]) == 1
    assert "differs too much" in capsys.readouterr().err


def test_bad_options_are_listed_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    assert main(["shrink", str(a), "-o", str(tmp_path / "o"), "--method", "int3", "--levels", "1"]) == 1
    err = capsys.readouterr().err
    assert "--method must be one of" in err and "--levels must be an integer from 2 to 65536" in err


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    proc = cli("-v", "shrink", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "no such file" in proc.stderr
