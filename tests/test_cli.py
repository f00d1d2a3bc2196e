"""The command-line tool as users run it: the installed ``hatch-shrinkray`` console script, each
call a fresh process (an in-process ``main()`` after other imports once hid a circular import that
broke ``info`` for every user)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from hardening import cli

from onnx_builders import mlp, save


def test_shrink_writes_verified_outputs_and_reports(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    proc = cli("shrink", str(a), "-o", str(tmp_path / "out"), "--sizes", "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    assert "a.onnx" in proc.stdout and "web (brotli 11)" in proc.stdout and "within limits" in proc.stdout
    onnx.checker.check_model(str(tmp_path / "out" / "a.onnx"), full_check=True)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report[0]["verification"]["passed"] is True
    assert report[0]["sizes"]["shrunk"]["raw"] < report[0]["sizes"]["original"]["raw"] / 3


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    out = tmp_path / "out"
    assert cli("shrink", str(a), "-o", str(out)).returncode == 0
    before = (out / "a.onnx").read_bytes()
    again = cli("shrink", str(a), "-o", str(out))
    assert again.returncode == 1
    assert "exists (use --force to overwrite)" in again.stderr
    assert (out / "a.onnx").read_bytes() == before
    assert cli("shrink", str(a), "-o", str(out), "--force").returncode == 0


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


def test_never_overwrites_the_source(tmp_path: Path) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    before = a.read_bytes()
    proc = cli("shrink", str(a), "-o", str(tmp_path), "--force")
    assert proc.returncode == 1
    assert "would overwrite the source" in proc.stderr
    assert a.read_bytes() == before


def test_info_lists_weights_and_their_share(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    proc = cli("info", str(a))
    assert proc.returncode == 0, proc.stderr
    assert "of the file" in proc.stdout and "W1" in proc.stdout and "axis 1 (MatMul)" in proc.stdout
    as_json = cli("info", str(a), "--json")
    assert json.loads(as_json.stdout)["weight_bytes"] > 0


def test_compare_passes_and_fails(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    assert cli("shrink", str(a), "-o", str(tmp_path / "o")).returncode == 0
    ok = cli("compare", str(a), str(tmp_path / "o" / "a.onnx"))
    assert ok.returncode == 0, ok.stderr
    # The tolerance gates an output judged as plain values; with its labels all held it would not veto.
    strict = cli("compare", str(a), str(tmp_path / "o" / "a.onnx"), "--max-rel-l2", "1e-9", "--judge", "y=values")
    assert strict.returncode == 1
    assert "differs too much" in strict.stderr


def test_bad_options_are_listed_together(tmp_path: Path) -> None:
    a = save(mlp(), tmp_path / "a.onnx")
    proc = cli("shrink", str(a), "-o", str(tmp_path / "o"), "--method", "int3", "--levels", "1")
    assert proc.returncode == 1
    assert "--method must be one of" in proc.stderr and "--levels must be an integer from 2 to 65536" in proc.stderr


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    proc = cli("-v", "shrink", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "no such file" in proc.stderr


def test_python_dash_m_is_the_same_tool() -> None:
    proc = subprocess.run([sys.executable, "-m", "hatch_shrinkray", "--help"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0
    assert all(command in proc.stdout for command in ("info", "shrink", "compare"))


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path: Path) -> None:
    """``hatch-shrinkray info m.onnx | head -1``: the pipe closes before the table is written."""
    from hardening import CONSOLE_SCRIPT

    a = save(mlp(512, 512), tmp_path / "a.onnx")
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "info", str(a)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # no reader left: the first write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_version() -> None:
    from hatch_shrinkray import __version__

    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"hatch-shrinkray {__version__}\n", proc


@pytest.mark.parametrize("argv", [["shrink"], ["bogus"], ["shrink", "m.onnx", "-o", "out", "--levels", "x"],
                                  ["info", "m.onnx", "--no-such-flag"]])
def test_a_usage_error_is_one_line_and_exit_1(argv: list[str]) -> None:
    """As every other mistake: ``error: ...`` on one line naming the help, exit 1 (argparse: the
    usage block and exit 2)."""
    proc = cli(*argv)
    assert proc.returncode == 1 and proc.stdout == "", proc
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and line.endswith("--help`)"), line


def test_verbose_goes_before_or_after_the_command(tmp_path: Path) -> None:
    model = save(mlp(), tmp_path / "m.onnx")
    for argv in (["-v", "shrink"], ["shrink", "-v"]):
        proc = cli(*argv, str(model), "-o", str(tmp_path / argv[0]), "--no-verify")
        assert proc.returncode == 0, proc.stderr
        line, detail = proc.stdout.splitlines()[:2]
        assert line == (f"{model} -> {tmp_path / argv[0] / 'm.onnx'}: 272.54 KB -> 77.06 KB (28.3%), int8, "
                        f"not verified (`--no-verify`), {line.rsplit(', ', 1)[1]}")
        assert detail.startswith(f"{model}: wheel "), detail
