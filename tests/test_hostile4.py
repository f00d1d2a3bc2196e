"""Hostile inputs, round 4: a killed ``check`` or ``record`` leaves nothing of its command running,
values that mean nothing are refused in one line, and every file a rewrite removes or folds gets a
line. The CLI runs as a user runs it (the console script, in a fresh process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hardening import CONSOLE_SCRIPT

from onnx_builders import mlp, save

PY = sys.executable

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def group_alive(group: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def wait_for(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# A killed check or record leaves nothing of its command running.

STARTS_SLEEP = textwrap.dedent('''
    import subprocess, sys, time
    from pathlib import Path
    child = subprocess.Popen(["sleep", "300"])
    Path(sys.argv[1]).write_text(str(child.pid))
    time.sleep(300)
''')


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    return {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}


@pytest.mark.parametrize("command", ["check", "record"])
def test_sigkill_of_check_or_record_ends_every_process_of_its_command(tmp_path: Path, env: dict[str, str],
                                                                      command: str) -> None:
    script, pid_file = tmp_path / "starts_sleep.py", tmp_path / "sleep.pid"
    script.write_text(STARTS_SLEEP)
    args = ([str(save(mlp(), tmp_path / "m.onnx"))] if command == "check" else
            ["--output", str(tmp_path / "recorded")])
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), command, *args, "--", PY, str(script), str(pid_file)],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: pid_file.is_file() and pid_file.read_text(), 60), "the command never started sleep"
        sleep = int(pid_file.read_text())
        group = os.getpgid(sleep)
        assert group != os.getpgid(proc.pid)  # the command has a process group of its own
        assert sleep in group_alive(group)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_for(lambda: not group_alive(group), 10), f"left running: {group_alive(group)}"
    finally:
        proc.kill()
        proc.wait()


LEAVES_SLEEP = 'import subprocess, sys; open(sys.argv[1], "w").write(str(subprocess.Popen(["sleep", "300"]).pid))'


def test_what_a_command_leaves_running_in_its_group_is_stopped_when_it_exits(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    pid_file = tmp_path / "sleep.pid"
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", LEAVES_SLEEP, str(pid_file)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    sleep = int(pid_file.read_text())
    status = Path(f"/proc/{sleep}/status")
    assert wait_for(lambda: not status.exists() or "zombie" in status.read_text(), 5)


def test_a_command_that_cannot_start_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           str(tmp_path / "no-such-program")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"error: cannot run {tmp_path / 'no-such-program'}: No such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_command_exit_code_and_signal_reach_record(tmp_path: Path, env: dict[str, str]) -> None:
    code = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", "import sys; sys.exit(7)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert code.returncode == 7, code.stderr
