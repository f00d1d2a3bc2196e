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
from hardening import CONSOLE_SCRIPT, PY, RUNTIME_NEEDS_A_VERSION, cli, files_under, one_error

from onnx_builders import mlp, save


def test_shrink_writes_verified_outputs_and_reports(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    proc = cli("shrink", str(a), "-o", str(tmp_path / "out"), "--sizes", "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    assert "a.onnx" in proc.stdout and "web (brotli 11)" in proc.stdout and "passes a smoke check" in proc.stdout
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
    head = proc.stdout.splitlines()[0]
    assert head.endswith(" (100.0%) in 2 tensors, 1 of >= 16384 elements (1.05 MB)"), head
    assert "already" not in proc.stdout
    assert "W1" in proc.stdout and "axis 1 (MatMul)" in proc.stdout
    as_json = cli("info", str(a), "--json")
    assert json.loads(as_json.stdout)["weight_bytes"] > 0 and json.loads(as_json.stdout)["quantized"] is None
    assert cli("shrink", str(a), "-o", str(tmp_path / "o"), "--no-verify").returncode == 0
    shrunk = cli("info", str(tmp_path / "o" / "a.onnx"))  # a build would ship it as it is: info says so
    assert shrunk.stdout.splitlines()[1] == ("already quantized: integer weight codes are cast to float (W1_q): "
                                             "a build ships it as it is"), shrunk.stdout


def test_compare_passes_and_fails(tmp_path: Path) -> None:
    a = save(mlp(512, 512), tmp_path / "a.onnx")
    assert cli("shrink", str(a), "-o", str(tmp_path / "o")).returncode == 0
    ok = cli("compare", str(a), str(tmp_path / "o" / "a.onnx"))
    assert ok.returncode == 0, ok.stderr
    # The tolerance gates an output judged as plain values; with its labels all held it would not veto.
    strict = cli("compare", str(a), str(tmp_path / "o" / "a.onnx"), "--max-rel-l2", "1e-9", "--judges", "y=values")
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
        assert line.startswith(f"{model}: shrunk, 272.54 -> 77.06 KB (28.3%), int8: not verified (`--no-verify`), "), \
            line
        assert detail.startswith(f"{model}: wheel "), detail


# ---------------------------------------------------------------------------------------------
# Numbers: NaN, inf and out-of-range values are refused with one line naming the option.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.parametrize(("flags", "expected"), [
    (["--max-rel-l2", "inf"], "--max-rel-l2 must be a number from 0.0 to 1.0; got inf"),
    (["--max-rel-l2", "nan"], "--max-rel-l2 must be a number from 0.0 to 1.0; got nan"),
    (["--min-cosine", "-1"], "--min-cosine must be a number from 0.0 to 1.0; got -1.0"),
    (["--min-agreement", "nan"], "--min-agreement must be a number from 0.0 to 1.0; got nan"),
    (["--budget-load", "nan"], "--budget-load must be a number from 1.0 to inf; got nan"),
    (["--budget-cosine=-inf"], "--budget-cosine must be a number from 0.0 to 1.0; got -inf"),
    (["--int-range", "0", str(2**70)], "--int-range must be two integers [low, high) with low < high"),
])
def test_shrink_refuses_nan_inf_and_out_of_range_numbers(tmp_path: Path, flags: list[str], expected: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), *flags))
    assert expected in line, line
    assert not (tmp_path / "out").exists() or files_under(tmp_path / "out") == []


# ---------------------------------------------------------------------------------------------
# Values that mean nothing are refused in one line naming the flag or key.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.parametrize(("command", "flags", "expected"), [
    ("info", ["--min-elements", "-5"], "--min-elements must be a positive integer; got -5"),
    ("info", ["--min-elements", "0"], "--min-elements must be a positive integer; got 0"),
    ("shrink", ["--runtimes", "onnxruntime"], f"--runtimes {RUNTIME_NEEDS_A_VERSION}"),
    ("shrink", ["--block-size", "1048576", "--method", "int4"],
     "--block-size must be one of 16, 32, 64, 128, 256; got 1048576"),
    ("shrink", ["--dims", "batch=0"], "--dims 'batch' must be a positive integer; got 0"),
    ("shrink", ["--default-dim", "-1"], "--default-dim must be a positive integer; got -1"),
    ("shrink", ["--samples", "0"], "--samples must be a positive integer; got 0"),
    ("compare", ["--samples", "-3"], "--samples must be a positive integer; got -3"),
    ("check", ["--runtimes", "onnxruntime"], f"--runtimes {RUNTIME_NEEDS_A_VERSION}"),
    ("check", ["--max-runs", "0"], "--max-runs must be a positive integer; got 0"),
    ("record", ["--max-samples", "-1"], "--max-samples must be a positive integer; got -1"),
])
def test_numeric_and_runtime_flags_outside_their_meaning_are_one_line(tmp_path: Path, command: str,
                                                                      flags: list[str], expected: str) -> None:
    src = str(save(mlp(), tmp_path / "m.onnx"))
    args = {"info": [src], "shrink": [src, "-o", str(tmp_path / "out")], "compare": [src, src],
            "check": [src], "record": ["--output", str(tmp_path / "rec")]}[command]
    tail = ["--", PY, "-c", "pass"] if command in ("check", "record") else []
    line = one_error(subprocess.run([str(CONSOLE_SCRIPT), command, *args, *flags, *tail], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120, check=False))
    assert expected in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "rec").exists()


# ---------------------------------------------------------------------------------------------
# The predecessor's confirmed defects (onnx-shrink-ray 0.0.11, by number): none may happen here.


def test_13_corrupt_input_glob_and_overwrite(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff")
    good = save(mlp(), tmp_path / "good.onnx")
    proc = cli("shrink", str(bad), str(tmp_path / "none*.onnx"), str(good), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert "not a valid ONNX model" in proc.stderr and "matches no file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "o" / "good.onnx").exists()
    assert cli("shrink", str(good), "-o", str(tmp_path / "o")).returncode == 1  # no silent overwrite


# ---------------------------------------------------------------------------------------------
# Never ship a result that is not smaller; say what stayed float and why.


def test_cli_closing_line_counts_models(tmp_path: Path) -> None:
    """Several models, some broken: each broken one gets its line, the good ones are written, and
    the closing line counts models (not the ``inputs`` samples)."""
    good = [tmp_path / "in" / f"good{i}.onnx" for i in range(2)]
    bad = [tmp_path / "in" / f"bad{i}.onnx" for i in range(3)]
    good[0].parent.mkdir()
    for path in good:
        onnx.save(mlp(), str(path))
    for path in bad:
        path.write_bytes(b"")
    proc = cli("shrink", *map(str, good + bad), "-o", str(tmp_path / "out"), "--no-verify")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1] == "3 of 5 models failed", proc.stderr
    assert sorted(ln.split(":")[1].strip() for ln in lines if ln.startswith("error:")) == sorted(map(str, bad))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good0.onnx", "good1.onnx"]


# ---------------------------------------------------------------------------------------------
# A flag that does nothing where it is given is refused in one line (the user meant something that
# would not happen), before any work.


@pytest.mark.parametrize(("command", "flags", "expected"), [
    ("shrink", ["--rounding", "nearest"], "--rounding does nothing here: it applies with real inputs only (--inputs)"),
    ("shrink", ["--budget-load", "2"], "--budget-load does nothing here: it applies to auto only, not int8 (--method)"),
    ("shrink", ["--method", "fp16", "--levels", "15"],
     "--levels does nothing here: it applies to int8 or float-levels only, not fp16 (--method)"),
    ("shrink", ["--block-size", "64"], "--block-size does nothing here: it applies to int4 or auto only"),
    ("shrink", ["--no-verify", "--min-agreement", "0.9"],
     "--min-agreement does nothing here: verification is off (--no-verify)"),
    ("shrink", ["--inputs", "{npz}", "--samples", "3"],
     "--samples does nothing here: it applies to generated inputs only, and --inputs gives real ones"),
    ("compare", ["--inputs", "{npz}", "--dims", "batch=2"], "--dims does nothing here: it applies to generated inputs"),
    ("check", ["--max-runs", "3"], "--max-runs does nothing here: it applies with --search or --fix only"),
    ("check", ["--max-flip-rate", "0.1"], "--max-flip-rate does nothing here: it applies with --shadow or --search"),
])
def test_a_flag_that_does_nothing_here_is_refused(tmp_path: Path, command: str, flags: list[str],
                                                  expected: str) -> None:
    import numpy as np

    src = str(save(mlp(), tmp_path / "m.onnx"))
    np.savez(tmp_path / "x.npz", x=np.ones((4, 256), np.float32))
    args = {"shrink": [src, "-o", str(tmp_path / "out")], "compare": [src, src], "check": [src]}[command]
    tail = ["--", PY, "-c", "pass"] if command == "check" else []
    given = [f.format(npz=tmp_path / "x.npz") for f in flags]
    line = one_error(subprocess.run([str(CONSOLE_SCRIPT), command, *args, *given, *tail], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120, check=False))
    assert expected in line, line
    assert not (tmp_path / "out").exists()


def test_a_flag_refused_alone_is_taken_where_it_does_something(tmp_path: Path) -> None:
    """``--rounding`` with real inputs, ``--levels`` with int8: accepted."""
    import numpy as np

    src = str(save(mlp(), tmp_path / "m.onnx"))
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(0).standard_normal((24, 256)).astype(np.float32))
    done = cli("shrink", src, "-o", str(tmp_path / "out"), "--inputs", str(tmp_path / "x.npz"), "--rounding", "nearest",
               "--levels", "255")
    assert done.returncode == 0, done.stderr
