"""What a killed run leaves, a later run removes: temporary files carry the id of the process that
made them, and the next run that makes one of the same kind there removes those whose process is
gone (``files.sweep``), never a live process's. And links: ``wheel --in-place`` on a link rewrites
the wheel it points to; a model whose path leaves the project through a link gets one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from hardening import CONSOLE_SCRIPT, MODEL, backend_project, cli, hook_build, write_project
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray.files import STAGING, TEMPORARY, create_beside, staging_prefix, sweep, temporary_prefix

from onnx_builders import mlp, save

TABLE = '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'


def dead_pid() -> int:
    """The id of a process that has ended (and been reaped): nothing runs under it now."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live() -> object:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_dead_runs_files_go_and_a_live_ones_stay(tmp_path: Path, live: subprocess.Popen[bytes]) -> None:
    dead = dead_pid()
    target = tmp_path / "pkg.whl"
    theirs = [tmp_path / f".pkg.whl.{dead}.0a1b2c3d.tmp", tmp_path / f".shrinkray-{dead}-x7k2"]
    alive = [tmp_path / f".pkg.whl.{live.pid}.0a1b2c3d.tmp", tmp_path / f".shrinkray-{live.pid}-q9z1"]
    others = [tmp_path / f".other.whl.{dead}.0a1b2c3d.tmp", tmp_path / ".pkg.whl.tmp", tmp_path / "pkg.whl.123.tmp",
              tmp_path / f".shrinkray-{dead}"]
    for path in theirs + alive + others:
        if "shrinkray" in path.name:
            path.mkdir()
            (path / "model.onnx").write_bytes(b"half")
        else:
            path.write_bytes(b"half")
    fd, name = create_beside(target)
    os.close(fd)
    Path(name).unlink()
    staging_prefix(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in alive + others)


def test_a_link_named_like_ours_is_removed_not_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("mine")
    link = tmp_path / f"hatch-shrinkray-wheel-{dead_pid()}-abcd"
    link.symlink_to(precious, target_is_directory=True)
    sweep(tmp_path, TEMPORARY)
    assert not link.is_symlink() and (precious / "keep").read_text() == "mine"
    sweep(tmp_path, STAGING)


def test_names_carry_the_pid() -> None:
    assert re.fullmatch(rf"hatch-shrinkray-wheel-{os.getpid()}-", temporary_prefix("wheel"))


def slow_wheel(project: Path) -> Path:
    from test_nothing_lost import slow_model

    backend_project(project, TABLE)
    slow_model(project / "src/toymodel/models/a.onnx")
    return Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))


@pytest.mark.process
@pytest.mark.extended
def test_sigkill_mid_rewrite_leaves_what_the_next_run_removes(tmp_path: Path, env: dict[str, str]) -> None:
    """SIGKILL cannot be caught: the killed run's work directory stays in TMPDIR, and the next run
    removes it (and its own) however it ends."""
    built = slow_wheel(tmp_path / "toymodel")
    temp = Path(env["TMPDIR"])
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "wheel", str(built), "--in-place"], cwd=tmp_path / "toymodel",
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not list(temp.glob("hatch-shrinkray-wheel-*")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = [p.name for p in temp.iterdir() if p.name != ".ses"]
    assert left and all(p.startswith(f"hatch-shrinkray-wheel-{proc.pid}-") for p in left), left
    before = built.read_bytes()
    again = cli("wheel", str(built), "--in-place", "--no-verify", cwd=tmp_path / "toymodel", env=env)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in temp.iterdir() if p.name != ".ses"] == []
    assert built.read_bytes() != before and zipfile.is_zipfile(built)
    assert [p.name for p in built.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.process
def test_in_place_on_a_link_rewrites_the_wheel_it_points_to(tmp_path: Path, env: dict[str, str]) -> None:
    project = backend_project(tmp_path / "toymodel", TABLE)
    built = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    links = tmp_path / "links"
    links.mkdir()
    link = links / built.name
    link.symlink_to(built)
    original = built.read_bytes()
    done = cli("wheel", str(link), "--in-place", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == built.resolve()
    assert built.read_bytes() != original
    with zipfile.ZipFile(built) as zf:
        assert len(zf.read("toymodel/models/a.onnx")) < len(original) / 2
    assert done.stdout.startswith(f"{link}: rewrote (1 model, "), done.stdout
    assert sorted(p.name for p in links.iterdir()) == [built.name]
    assert [p.name for p in built.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.process
def test_a_model_linked_from_outside_the_project_gets_one_line(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    save(mlp(), elsewhere / "a.onnx")
    (root / MODEL).symlink_to(elsewhere / "a.onnx")
    built = hook_build(root, tmp_path)
    assert built.returncode == 0, built.stderr
    line = next(ln for ln in built.stderr.splitlines() if "outside the project" in ln)
    assert line == f"shrinkray: {MODEL} links outside the project, to {elsewhere / 'a.onnx'}: that file is what ships"
    assert len(line) - len(MODEL) - len(str(elsewhere / "a.onnx")) + 80 <= 160
    inside = root / "src/toymodel/models/b.onnx"
    inside.symlink_to("a.onnx")
    again = hook_build(root, tmp_path)
    assert again.stderr.count("links outside the project") == 2, again.stderr  # a.onnx, and b.onnx through it
