"""Ctrl-C in a build with the hook (``hatch_shrinkray/hatch/stopping.py``): one line, a non-zero
exit, no traceback with hatch_shrinkray's frames, nothing left behind (no work directory, no
unfinished archive), wherever the signal lands.

A terminal sends Ctrl-C to the whole foreground process group, the frontend with its backend; a
frontend that runs the backend through PEP 517 (build, pip: ``pyproject_hooks``) kills it a quarter
second later when it has not ended. The tests do the same: SIGINT to the process group. The
default suite drives ``pyproject_hooks`` (the code ``python -m build`` runs, without creating an
environment) at a random point, and the moments a random point rarely hits (hatchling writing or
moving the archive, the frontend's kill inside a long C call) on purpose; the ``extended`` tier runs
``hatch build``, ``python -m build`` and ``pip wheel`` themselves.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from hardening import MODELS_DIR, PY, leftovers, tree_digest, write_project
from test_e2e_build import build_env, wheelhouse  # noqa: F401 (fixtures: the plugin's wheels, for the frontends)

from onnx_builders import mlp, save

PEP517_FRONTEND = textwrap.dedent("""
    # A PEP 517 frontend, as `python -m build` runs a backend (no isolated environment): pyproject_hooks
    # with its default runner, subprocess.run, which kills the backend 0.25 s after Ctrl-C. The
    # frontend's own Ctrl-C is one line here, so what is left is the backend's.
    import sys
    from pyproject_hooks import BuildBackendHookCaller
    try:
        hooks = BuildBackendHookCaller(sys.argv[1], "hatchling.build")
        print(hooks.build_wheel(sys.argv[2]), flush=True)
    except KeyboardInterrupt:
        print("frontend: interrupted", file=sys.stderr)
        sys.exit(130)
""")
FRAMES = re.compile(r'File "[^"]*hatch_shrinkray[^"]*"')
"""A traceback frame of hatch_shrinkray's own code."""


def _project(root: Path) -> Path:
    write_project(root, "cache = false\n")
    save(mlp(1024, 1024), root / MODELS_DIR / "a.onnx")
    save(mlp(512, 1024), root / MODELS_DIR / "b.onnx")
    return root


def _env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN", "PYTHONPATH"):
        env.pop(name, None)
    return env, tmp


def foreground(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``command`` as a terminal's foreground job: a process group of its own, which SIGINT reaches
    (a test runner may run with SIGINT ignored, which exec keeps; a handler is reset instead)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, old)


def interrupt(command: list[str], cwd: Path, env: dict[str, str], delay: float) -> tuple[int, str, float]:
    """Run ``command`` as a terminal's foreground job and send SIGINT to the whole group ``delay``
    seconds after it started: its exit status, what it printed, and how long it ran before the signal."""
    started = time.monotonic()
    proc = foreground(command, cwd, env)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    return proc.returncode, out, time.monotonic() - started


def nothing_left(tmp: Path, dist: Path) -> list[str]:
    """What an interrupted build left: entries of its private $TMPDIR (the reaper of a killed
    backend gets a few seconds), and any archive in ``dist`` that is not complete."""
    deadline = time.monotonic() + 20
    while leftovers(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [f"TMPDIR/{name}" for name in leftovers(tmp)]
    for path in sorted(dist.glob("*")) if dist.exists() else []:
        try:
            if path.suffix == ".whl":
                with zipfile.ZipFile(path) as archive:
                    assert archive.testzip() is None
            else:
                with tarfile.open(path) as archive:
                    archive.getmembers()
        except Exception as exc:
            left.append(f"unfinished {path.name}: {exc}")
    return left


def check_interrupted(code: int, out: str, lines_from_us: int = 1) -> None:
    """Ended by the signal: non-zero, no traceback with hatch_shrinkray's frames, at most one line of
    ours about it."""
    assert code != 0, out
    assert not FRAMES.search(out), out
    assert sum(line.startswith("shrinkray: interrupted") for line in out.splitlines()) <= lines_from_us, out


def test_ctrl_c_at_a_random_point_of_a_pep517_build(tmp_path: Path) -> None:
    """Anywhere from the backend's start to the archive: one line or none (killed by the frontend
    inside a long C call), never a traceback of ours, nothing left; or, after the end, a whole wheel."""
    root = _project(tmp_path / "toymodel")
    env, tmp = _env(tmp_path)
    before = tree_digest(root)
    delay = random.uniform(0.2, 5.0)
    code, out, ran = interrupt([PY, "-c", PEP517_FRONTEND, str(root), str(tmp_path / "dist")], root, env, delay)
    said = f"SIGINT after {delay:.2f} s (ran {ran:.2f} s):\n{out}"
    if code == 0:  # the build was done first: a complete wheel
        assert ".whl" in out and nothing_left(tmp, tmp_path / "dist") == [], said
        return
    check_interrupted(code, out)
    assert out.splitlines()[-1] == "frontend: interrupted", said
    assert nothing_left(tmp, tmp_path / "dist") == [], said
    assert tree_digest(root) == before, said


ARCHIVE = textwrap.dedent("""
    # A build that hatchling's archive writing or moving stops with SIGINT, driven as hatchling's own
    # command does: no frontend to kill the backend, the hook's handler does all the work.
    import os, shutil, signal, sys
    import hatchling.builders.wheel as wheel
    from hatchling.builders.wheel import WheelBuilder

    where = sys.argv[3]
    if where == "writing":
        add = wheel.WheelArchive.add_file
        def add_file(self, included):
            signal.raise_signal(signal.SIGINT)  # the first file: the temporary archive exists
            return add(self, included)
        wheel.WheelArchive.add_file = add_file
    else:  # moving it into the output directory across file systems, half copied
        def replace(src, dst):
            raise OSError("another file system")
        def copy2(src, dst):
            with open(src, "rb") as s, open(dst, "wb") as d:
                d.write(s.read(1000))
            signal.raise_signal(signal.SIGINT)
        written = wheel.WheelArchive.__exit__
        def exit(self, *args):  # the archive is written: what moves it next fails over to a copy
            written(self, *args)
            os.replace, shutil.copy2 = replace, copy2
        wheel.WheelArchive.__exit__ = exit
    print(next(WheelBuilder(sys.argv[1]).build(directory=sys.argv[2], versions=["standard"])))
""")


@pytest.mark.parametrize("where", ["writing", "moving"])
def test_ctrl_c_while_hatchling_writes_or_moves_the_archive(where: str, tmp_path: Path) -> None:
    """The hook's work is done and hatchling holds the archive: its temporary file (in $TMPDIR) and a
    partial copy in the output directory go too; one line, exit 130, no traceback at all."""
    root = _project(tmp_path / "toymodel")
    env, tmp = _env(tmp_path)
    proc = subprocess.run([PY, "-c", ARCHIVE, str(root), str(tmp_path / "dist"), where], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1] == "shrinkray: interrupted" and "Traceback" not in proc.stderr, proc.stderr
    assert nothing_left(tmp, tmp_path / "dist") == [] and not list((tmp_path / "dist").glob("*"))


KILLED = textwrap.dedent("""
    # A backend its frontend kills (SIGKILL) while the hook's work directory holds a shrunk model:
    # as `python -m build` does 0.25 s after Ctrl-C to a backend inside a long C call.
    import os, signal, sys
    import hatchling.build
    import hatch_shrinkray.shipping.shrink as shrinking

    real = shrinking.shrink_one
    def shrink_one(job, **kwargs):
        decision = real(job, **kwargs)
        print(f"staged under {os.environ['TMPDIR']}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    shrinking.shrink_one = shrink_one
    hatchling.build.build_wheel(sys.argv[1])
""")


def test_a_backend_killed_by_its_frontend_leaves_no_work_directory(tmp_path: Path) -> None:
    root = _project(tmp_path / "toymodel")
    env, tmp = _env(tmp_path)
    proc = subprocess.run([PY, "-c", KILLED, str(tmp_path / "dist")], env=env, cwd=root, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == -signal.SIGKILL and "staged under" in proc.stdout, proc.stdout + proc.stderr
    assert nothing_left(tmp, tmp_path / "dist") == []


# --- the frontends themselves (extended: each creates its build environment) -----------------

FRONTENDS = {"hatch": [PY, "-m", "hatch", "build"],
             "build": [PY, "-m", "build", "--outdir", "dist"],
             "pip-wheel": [PY, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", "dist", "."]}
STARTED = {"hatch": "shrinkray: ", "build": "shrinkray: ", "pip-wheel": "Preparing metadata"}
"""The line after which the hook is at work (pip shows the hook's lines only with -v)."""


def interrupt_at_work(command: list[str], cwd: Path, env: dict[str, str], started: str,
                      delay: float) -> tuple[int, str]:
    """Run ``command`` as a terminal's foreground job and send SIGINT to its group ``delay`` seconds
    after the line ``started`` shows the hook at work."""
    proc = foreground(command, cwd, env)
    assert proc.stdout is not None
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if started in line:
                time.sleep(delay)
                os.killpg(proc.pid, signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=600)
    finally:
        proc.kill()
    return proc.returncode, "".join(seen) + rest


@pytest.mark.extended
@pytest.mark.parametrize("frontend", list(FRONTENDS))
def test_ctrl_c_during_a_real_frontends_build(frontend: str, tmp_path: Path, build_env: dict[str, str]) -> None:  # noqa: F811
    """SIGINT to the frontend's process group at a random point of the hook's work: ours is one line
    (hatch, build; pip shows none), no traceback with hatch_shrinkray's frames (build prints its own
    KeyboardInterrupt traceback, pip one line), nothing left."""
    root = _project(tmp_path / "toymodel")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**build_env, "TMPDIR": str(tmp), "UV_NO_CACHE": "1"}
    before = tree_digest(root)
    delay = random.uniform(0.0, 4.0)
    for _ in range(4):  # a build that finished before the signal came proves nothing: again, earlier
        code, out = interrupt_at_work(FRONTENDS[frontend], root, env, STARTED[frontend], delay)
        if code != 0:
            break
        shutil.rmtree(root / "dist", ignore_errors=True)
        delay /= 4
    said = f"{frontend}, SIGINT {delay:.2f} s into the hook's work:\n{out}"
    check_interrupted(code, out)
    assert nothing_left(tmp, root / "dist") == [], said
    assert {k: v for k, v in tree_digest(root).items() if not k.startswith("dist")} == before, said
    shutil.rmtree(tmp, ignore_errors=True)
