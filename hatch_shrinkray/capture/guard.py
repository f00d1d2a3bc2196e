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
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE = 5.0
"""Seconds a stopped command's process group gets between SIGTERM and SIGKILL."""

_POLL = 0.05
_WATCH = 1.0
"""Seconds between looks at whether a command wrote anything."""


def run(command: Sequence[str], environment: Mapping[str, str], cwd: Path | None = None,
        timeout: float | None = None, silent: Silence | None = None) -> int:
    """The command's exit code (negative: the signal that ended it). Raises OSError when it cannot
    start, and ``subprocess.TimeoutExpired`` after stopping it, with every process of its group,
    when it runs longer than ``timeout`` seconds. ``silent`` hears when the command has written
    nothing to our stdout or stderr for a while."""
    if os.name != "posix" or not sys.executable:
        return _run_plain(command, environment, cwd, timeout)
    ours, theirs = socket.socketpair()
    outputs = _Outputs(silent is not None)
    try:
        with theirs, outputs.started():
            proc = subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(theirs.fileno()),
                                     repr(STOP_GRACE), *command], env=dict(environment), cwd=cwd,
                                    start_new_session=True, pass_fds=(theirs.fileno(),),
                                    stdout=outputs.stream(1), stderr=outputs.stream(2))
        try:
            _wait(proc, timeout, silent, outputs)
        except BaseException:  # the timeout, Ctrl-C, SIGTERM turned into an exception
            _stop_group(proc)
            raise
        status = _read_all(ours)
    finally:
        ours.close()
        outputs.close()
    _stop_leftovers(proc.pid)
    return _exit_code(status, proc.returncode)


@dataclass(frozen=True)
class Silence:
    """Whom to tell when a command has written nothing for ``after`` seconds: ``tell(seconds)`` is
    called then, and again each time the silence has doubled."""

    after: float
    tell: Callable[[float], None]


class _Outputs:
    """When the command last wrote to the stdout and stderr it shares with us, where both are pipes
    or sockets (CI; a terminal has someone watching it): the command then gets pipes of ours instead,
    which threads copy to ours as the output comes, noting the time (a pipe's modification time does
    not move on Linux). The command sees pipes either way; our own lines meanwhile (progress) are not
    the command's and never count."""

    def __init__(self, watched: bool) -> None:
        self._relays: dict[int, tuple[int, int]] = {}
        self._threads: list[threading.Thread] = []
        self._last: dict[int, float] = {}
        self.watched = watched and all(_piped(fd) for fd in (1, 2))

    @contextlib.contextmanager
    def started(self) -> Iterator[None]:
        """Pipes for the streams to relay, open while the command starts; our ends close after it."""
        for fd in (1, 2) if self.watched else ():
            self._relays[fd] = os.pipe()
        try:
            yield
        finally:
            for fd, (read, write) in self._relays.items():
                os.close(write)
                thread = threading.Thread(target=self._copy, args=(read, fd), daemon=True,
                                          name="hatch-shrinkray-relay")
                thread.start()
                self._threads.append(thread)

    def stream(self, fd: int) -> int | None:
        """What the command gets for our ``fd``: our pipe, or None (ours, inherited)."""
        return self._relays[fd][1] if fd in self._relays else None

    def _copy(self, read: int, fd: int) -> None:
        try:
            while chunk := os.read(read, 65536):
                self._last[fd] = time.monotonic()
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            os.close(read)

    def written(self) -> tuple[float | None, ...]:
        """When each relayed stream was last written (None: not yet)."""
        return tuple(self._last.get(fd) for fd in (1, 2))

    def close(self) -> None:
        """Wait briefly for the relays to pass on what is left (the command's group has ended)."""
        for thread in self._threads:
            thread.join(timeout=STOP_GRACE)


def _piped(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _wait(proc: subprocess.Popen[bytes], timeout: float | None, silent: Silence | None, outputs: _Outputs) -> None:
    """``proc.wait(timeout)``, telling ``silent`` when the command has written nothing for a while."""
    if silent is None or not outputs.watched:
        proc.wait(timeout=timeout)
        return
    start = quiet_since = time.monotonic()
    seen, due = outputs.written(), silent.after
    while True:
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0.0)
        try:
            proc.wait(timeout=min(_WATCH, left) if left is not None else _WATCH)
            return
        except subprocess.TimeoutExpired:
            pass
        now, written = time.monotonic(), outputs.written()
        if written != seen:
            seen, quiet_since, due = written, now, silent.after
        elif now - quiet_since >= due:
            silent.tell(now - quiet_since)
            due *= 2


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
