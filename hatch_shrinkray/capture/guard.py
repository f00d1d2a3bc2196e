"""Running a user's command so that it ends with us, however we end (SIGKILL included).

``check`` and ``record`` run a command that may start servers, pytest-xdist workers or a stray
``sleep``; when a CI runner kills hatch-shrinkray with SIGKILL, nothing of that command may live on
holding the runner's output pipes. A parent-death signal reaches only the direct child, so on POSIX
the command runs in a process group of its own, led by a small watchdog: this module run as a
script (standard library only, started with ``-I -S`` so that no ``PYTHONPATH`` or
``sitecustomize`` of the command's environment reaches it). The watchdog starts the command, sends
its exit status through a socket pair, and otherwise blocks reading that pair. Whichever way the
caller ends, the kernel closes the caller's end; the watchdog reads end-of-file and stops its whole
group: SIGTERM, then SIGKILL after a grace period (itself included). A timeout or Ctrl-C in the
caller stops the group the same way, and whatever the command leaves running in its group when it
exits is stopped too. A process that moves itself out of the group (a daemon calling ``setsid``)
is beyond reach. Elsewhere the command runs as a plain child, stopped on a timeout or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

STOP_GRACE = 5.0
"""Seconds a stopped command's process group gets between SIGTERM and SIGKILL."""

_POLL = 0.05


def run(command: Sequence[str], environment: Mapping[str, str], cwd: Path | None = None,
        timeout: float | None = None) -> int:
    """The command's exit code (negative: the signal that ended it). Raises OSError when it cannot
    start, and ``subprocess.TimeoutExpired`` after stopping it, with every process of its group,
    when it runs longer than ``timeout`` seconds."""
    if os.name != "posix" or not sys.executable:
        return _run_plain(command, environment, cwd, timeout)
    ours, theirs = socket.socketpair()
    try:
        with theirs:
            proc = subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(theirs.fileno()),
                                     repr(STOP_GRACE), *command], env=dict(environment), cwd=cwd,
                                    start_new_session=True, pass_fds=(theirs.fileno(),))
        try:
            proc.wait(timeout=timeout)
        except BaseException:  # the timeout, Ctrl-C, SIGTERM turned into an exception
            _stop_group(proc)
            raise
        status = _read_all(ours)
    finally:
        ours.close()
    _stop_leftovers(proc.pid)
    return _exit_code(status, proc.returncode)


def _run_plain(command: Sequence[str], environment: Mapping[str, str], cwd: Path | None,
               timeout: float | None) -> int:
    proc = subprocess.Popen(list(command), env=dict(environment), cwd=cwd)
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _exit_code(status: bytes, watchdog: int) -> int:
    """The command's exit code from the watchdog's report; an OSError when it could not start it;
    the watchdog's own exit code when it was killed before it could report."""
    words = status.decode("utf-8", "replace").split(" ", 2)
    if words[0] == "exit" and len(words) == 2:
        return int(words[1])
    if words[0] == "error" and len(words) == 3:
        raise OSError(int(words[1]), words[2])
    return watchdog


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the command's process group, SIGKILL to whatever is left after a grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _stop_leftovers(group: int) -> None:
    """Stop what the command left running in its group after it exited (nothing, usually: then
    this costs one system call)."""
    if not _signal_group(group, 0):
        return
    _signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        if not _signal_group(group, 0):
            return
        time.sleep(_POLL)
    _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, signum: int) -> bool:
    """Whether some process of the group was there to receive ``signum``."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# The watchdog: this module run as a script, as the leader of the command's process group.

def _watch(argv: Sequence[str]) -> int:
    fd, grace, command = int(argv[0]), float(argv[1]), list(argv[2:])
    caller = socket.socket(fileno=fd)
    caller.set_inheritable(False)
    # SIGTERM to the group is meant for the command: the watchdog stays to report how it ended. A
    # handler, unlike SIG_IGN, is reset when the command's program is executed.
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        proc = subprocess.Popen(command)
    except OSError as exc:
        caller.sendall(f"error {exc.errno or 0} {exc.strerror or exc}".encode())
        return 127
    threading.Thread(target=_report, args=(proc, caller), daemon=True).start()
    with contextlib.suppress(OSError):
        while caller.recv(4096):
            pass
    # End of file: the caller is gone, however it ended. Stop the whole group, this process last.
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(_POLL)
    os.killpg(0, signal.SIGKILL)
    return 1


def _report(proc: subprocess.Popen[bytes], caller: socket.socket) -> None:
    code = proc.wait()
    try:
        caller.sendall(f"exit {code}".encode())
    except OSError:  # the caller is gone: the main thread stops the group
        return
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_watch(sys.argv[1:]))
