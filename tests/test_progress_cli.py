"""Progress on long work, as a user sees it on a pipe (CI): the console script and a real hatchling
build each say where they are at least every interval (``HATCH_SHRINKRAY_PROGRESS_INTERVAL``, 30 s
by default, set low here), ``-q`` (the hook: hatch's own ``HATCH_QUIET``) says nothing of the kind,
and the results and exit codes are the same either way."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hardening import MODELS_DIR, cli, write_project
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray.progress import INTERVAL_ENV

from onnx_builders import mlp, save
from realmodels import silero_vad

FAST = "0.2"
"""The interval in these tests: a step of a second must be reported several times."""
STATUS = re.compile(r", \d+ s so far")
"""What every progress line, and no other line, carries."""
SLEEP = [sys.executable, "-c", "import sys, time; time.sleep(1.5); sys.exit(3)"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, INTERVAL_ENV: FAST, **extra}


def progress_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if STATUS.search(line)]


def timeless(text: str) -> str:
    """A report without its timings (``3.3 s``), which differ from run to run."""
    return re.sub(r"\d+\.\d+ s\b", "X s", text)


@pytest.mark.network
def test_shrink_says_where_it_is_and_q_silences_it(tmp_path: Path) -> None:
    model = silero_vad()
    # Own caches: a cached result is not verified again, and another test may have shrunk this model.
    # 64 samples: verifying 8 can end between two ticks on a fast machine.
    common = ("shrink", str(model), "--method", "fp16", "--samples", "64")
    loud = cli(*common, "-o", str(tmp_path / "loud"), env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c1")))
    quiet = cli(*common, "-o", str(tmp_path / "quiet"), "-q", env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c2")))
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    lines = progress_lines(loud.stderr)
    assert any(re.fullmatch(r"shrink 0/1 \(0%\), \d+ s so far > silero_vad\.onnx: fp16 [a-z ]+, \d+ s so far.*", line)
               for line in lines), loud.stderr
    assert any(re.search(r"> verifying: the (original|shrunk) model \d+/64 \(\d+%\), \d+ s so far", line)
               for line in lines), loud.stderr
    assert not progress_lines(quiet.stderr), quiet.stderr
    # The same lines, each naming the file it wrote.
    assert timeless(loud.stdout.replace(str(tmp_path / "loud"), "OUT")) == \
        timeless(quiet.stdout.replace(str(tmp_path / "quiet"), "OUT"))
    assert (tmp_path / "loud/silero_vad.onnx").read_bytes() == (tmp_path / "quiet/silero_vad.onnx").read_bytes()


@pytest.mark.network
def test_a_failing_model_keeps_its_error_and_exit_code_with_or_without_progress(tmp_path: Path) -> None:
    model = silero_vad()  # int8 on generated inputs fails its verification (--strict: fails the command)
    loud = cli("shrink", str(model), "-o", str(tmp_path / "loud"), "--strict",
               env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c1")))
    quiet = cli("-q", "shrink", str(model), "-o", str(tmp_path / "quiet"), "--strict",
                env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c2")))
    assert loud.returncode == quiet.returncode == 1
    assert progress_lines(loud.stderr) and not progress_lines(quiet.stderr)
    assert [line for line in loud.stderr.splitlines() if not STATUS.search(line)] == quiet.stderr.splitlines()


def test_record_reports_the_running_command_and_passes_its_exit_code(tmp_path: Path) -> None:
    loud = cli("record", "-o", str(tmp_path / "loud"), "--", *SLEEP, env=env(), cwd=tmp_path)
    quiet = cli("record", "-q", "-o", str(tmp_path / "quiet"), "--", *SLEEP, env=env(), cwd=tmp_path)
    assert loud.returncode == quiet.returncode == 3
    lines = progress_lines(loud.stderr)
    assert len(lines) >= 3, loud.stderr  # 1.5 s at 0.2 s: several lines, none silent for long
    assert lines[0].startswith("record: running `") and "time.sleep(1.5)" in lines[0], lines
    assert not progress_lines(quiet.stderr), quiet.stderr
    assert loud.stdout.replace("loud", "") == quiet.stdout.replace("quiet", "")


def test_check_reports_its_runs(tmp_path: Path) -> None:
    """The command never loads the model: check says so after run 1, with or without progress."""
    model = save(mlp(), tmp_path / "m.onnx")
    loud = cli("check", str(model), "--", *SLEEP, env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "cache")),
               cwd=tmp_path)
    quiet = cli("check", str(model), "-q", "--", *SLEEP, env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "cache")),
                cwd=tmp_path)
    assert loud.returncode == quiet.returncode == 1
    assert any(re.match(r"check: runs of the command 0/2 \(0%\), \d+ s so far > run 1 of 2, with the original "
                        r"models: `.*time\.sleep\(1\.5\).*`, \d+ s so far$", line)
               for line in progress_lines(loud.stderr)), loud.stderr
    assert not progress_lines(quiet.stderr), quiet.stderr
    error = [line for line in loud.stderr.splitlines() if line.startswith("error:")]
    assert error and error == [line for line in quiet.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.network
def test_wheel_reports_wheel_and_model(tmp_path: Path) -> None:
    project = tmp_path / "pkg"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg/__init__.py").write_text("")
    shutil.copyfile(silero_vad(), project / "pkg/vad.onnx")
    (project / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0.1.0"\n')
    wheel = Path(next(WheelBuilder(str(project)).build(directory=str(tmp_path), versions=["standard"])))
    common = ("wheel", str(wheel), "--models", "pkg/*.onnx", "--method", "fp16", "--project", str(project))
    loud = cli(*common, "-o", str(tmp_path / "loud"), env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c1")))
    quiet = cli(*common, "-o", str(tmp_path / "quiet"), "-q", env=env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / "c2")))
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert any(re.match(r"wheel 0/1 \(0%\) pkg-0\.1\.0-\S+\.whl, \d+ s so far > models 0/1 \(0%\) pkg/vad\.onnx, "
                        r"\d+ s so far > vad\.onnx: fp16 ", line) for line in progress_lines(loud.stderr)), loud.stderr
    assert not progress_lines(quiet.stderr), quiet.stderr
    assert loud.stdout.replace("loud", "") == quiet.stdout.replace("quiet", "")


def _hook_build(root: Path, tmp_path: Path, name: str, **extra: str) -> subprocess.CompletedProcess[str]:
    no_rich = tmp_path / "no-rich"  # the build environment has no rich: importing it fails
    (no_rich / "rich").mkdir(parents=True, exist_ok=True)
    (no_rich / "rich/__init__.py").write_text("raise ImportError('rich is not installed here')\n")
    variables = env(HATCH_SHRINKRAY_CACHE_DIR=str(tmp_path / f"cache-{name}"), PYTHONPATH=str(no_rich), **extra)
    return subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / name)],
                          cwd=root, env=variables, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.network
def test_the_hook_reports_a_long_model_in_plain_lines_and_hatch_quiet_silences_it(tmp_path: Path) -> None:
    root = write_project(tmp_path / "proj", 'method = "fp16"\n')
    shutil.copyfile(silero_vad(), root / MODELS_DIR / "vad.onnx")
    loud = _hook_build(root, tmp_path, "loud")
    quiet = _hook_build(root, tmp_path, "quiet", HATCH_QUIET="1")
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert any(re.match(r"shrinkray: models 0/1 \(0%\) src/toymodel/models/vad\.onnx, \d+ s so far > vad\.onnx: fp16 ",
                        line) for line in progress_lines(loud.stderr)), loud.stderr
    assert "\x1b" not in loud.stderr and "\r" not in loud.stderr  # plain lines, no terminal codes
    assert not progress_lines(quiet.stderr), quiet.stderr
    (a,), (b,) = (tmp_path / "loud").glob("*.whl"), (tmp_path / "quiet").glob("*.whl")
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        assert za.read("toymodel/models/vad.onnx") == zb.read("toymodel/models/vad.onnx")


@pytest.mark.parametrize("value", ["", "0", "-1", "soon", "inf"])
def test_a_bad_interval_falls_back_to_the_default(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hatch_shrinkray import progress

    monkeypatch.setenv(INTERVAL_ENV, value)
    assert progress.default_interval() == progress.INTERVAL
    monkeypatch.setenv(INTERVAL_ENV, "0.5")
    assert progress.default_interval() == 0.5
