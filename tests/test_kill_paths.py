"""Kill paths that cannot crash: a stop request is never lost, whenever it lands, and no thread of
ours outlives the interpreter. benchmarks/kill_loop.py kills the commands at random points hundreds
of times (benchmarks/KILLS.md); these are the mechanisms it found, each made deterministic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.process


def python(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


FINALIZER = '''
    import os, signal, sys, threading, time
    from hatch_shrinkray.signals import Terminated, terminate_raises

    class Slow:
        """A finalizer that runs long enough for the signal to land in it."""
        def __del__(self):
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                sum(range(100))

    with terminate_raises():
        try:
            threading.Timer(0.1, os.kill, args=(os.getpid(), getattr(signal, sys.argv[1]))).start()
            slow = Slow()
            del slow
            time.sleep(5)
            print("the request was lost")
        except (Terminated, KeyboardInterrupt) as stop:
            print("stopped by", type(stop).__name__)
'''


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_request_that_lands_in_a_finalizer_is_delivered_again(sig: str) -> None:
    """Python drops what a signal handler raises inside ``__del__`` ("Exception ignored"): the run
    went on to its end. It is delivered again a moment later, out of the finalizer."""
    proc = python(FINALIZER, sig)
    expected = "Terminated" if sig == "SIGTERM" else "KeyboardInterrupt"
    assert proc.stdout.strip() == f"stopped by {expected}", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


AT_EXIT = '''
    import sys, time
    from pathlib import Path
    from hatch_shrinkray.pool import Background, Cancelled, checkpoint

    def job():
        try:
            while True:
                checkpoint()
                time.sleep(0.01)
        except Cancelled:
            Path(sys.argv[1]).write_text("stopped before the interpreter was torn down")
            raise

    Background(job)
    time.sleep(0.2)
    sys.exit(3)  # the owner leaves without the result (an error), the job still running
'''


def test_no_background_job_outlives_the_interpreter(tmp_path: Path) -> None:
    """A daemon thread still in C code while the interpreter is torn down can crash the process
    (SIGSEGV instead of the exit it was taking); at exit, every running job is cancelled and joined."""
    marker = tmp_path / "marker"
    proc = python(AT_EXIT, str(marker))
    assert proc.returncode == 3, proc.stderr
    assert marker.read_text() == "stopped before the interpreter was torn down"


def test_a_job_that_is_not_cancelled_gives_its_result() -> None:
    from hatch_shrinkray.pool import Background, checkpoint

    def job() -> int:
        checkpoint()
        return 42

    running = Background(job)
    assert running.result() == 42 and not running.cancelled
    running.cancel()  # once done, cancelling changes nothing
    assert running.result() == 42
    checkpoint()  # outside a job: nothing to stop


DURING_IMPORT = '''
    import importlib.abc, signal, sys

    class Stop(importlib.abc.MetaPathFinder):
        """The signal lands while the command line is being imported."""
        def find_spec(self, name, path, target=None):
            if name == "hatch_shrinkray.cli":
                signal.raise_signal(getattr(signal, sys.argv[1]))
            return None

    sys.meta_path.insert(0, Stop())
    from hatch_shrinkray.console import main
    sys.exit(main(["info", "nothing.onnx"]))
'''


@pytest.mark.parametrize(("sig", "code", "word"), [("SIGTERM", -signal.SIGTERM, "terminated"),
                                                   ("SIGINT", 130, "interrupted")])
def test_a_stop_while_the_command_line_is_imported_ends_like_any_other(sig: str, code: int, word: str) -> None:
    """The console script handles signals before it imports the commands: a Ctrl-C there is one line
    and 130, not a KeyboardInterrupt traceback and death by SIGINT; SIGTERM says so, then dies by it."""
    proc = python(DURING_IMPORT, sig)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip().splitlines() == [word], proc.stderr


RIGHT_AFTER_MKDTEMP = '''
    import os, signal, sys, tempfile
    from pathlib import Path
    from hatch_shrinkray.files import temporary_directory
    from hatch_shrinkray.signals import Terminated, terminate_raises

    real = os.mkdir
    def mkdir(path, mode=0o777):
        real(path, mode)
        if os.path.basename(path).startswith("hatch-shrinkray-"):
            signal.raise_signal(signal.SIGTERM)  # lands right after the directory appeared
    os.mkdir = mkdir

    with terminate_raises():
        try:
            with temporary_directory("check") as name:
                print("entered", name)
        except Terminated:
            pass
    import gc; gc.collect()
    print(sorted(p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("hatch-shrinkray-")))
'''


def test_a_signal_right_after_mkdtemp_leaves_no_directory(tmp_path: Path) -> None:
    """A check killed once left ``hatch-shrinkray-fix-PID-...`` in TMPDIR: SIGTERM landed between
    ``mkdtemp`` making the directory and the object that removes it existing. Signals are held there."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(RIGHT_AFTER_MKDTEMP)], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr
