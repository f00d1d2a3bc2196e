"""``capture.guard``: the user's command that ``check`` and ``record`` run ends with them (SIGKILL
included), leaves nothing running in its process group, and its exit status or failure to start
reaches the user in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hardening import CONSOLE_SCRIPT, PY

from onnx_builders import mlp, save

# ---------------------------------------------------------------------------------------------
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


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


def running(pid: int) -> bool:
    """Whether the process is alive (not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# A killed check or record leaves nothing of its command running.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


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


@linux_only
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


@linux_only
def test_what_a_command_leaves_running_in_its_group_is_stopped_when_it_exits(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    pid_file = tmp_path / "sleep.pid"
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", LEAVES_SLEEP, str(pid_file)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    sleep = int(pid_file.read_text())
    assert wait_for(lambda: not running(sleep), 5)


def test_a_command_that_cannot_start_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           str(tmp_path / "no-such-program")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"error: cannot run {tmp_path / 'no-such-program'}: No such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_command_exit_code_reaches_record(tmp_path: Path, env: dict[str, str]) -> None:
    code = subprocess.run([str(CONSOLE_SCRIPT), "record", "--output", str(tmp_path / "recorded"), "--",
                           PY, "-c", "import sys; sys.exit(7)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert code.returncode == 7, code.stderr
