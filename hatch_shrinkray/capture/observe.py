"""Running a command the way ``hatch-shrinkray check`` needs it, and reading what its processes
reported: the command's exit code, every pytest test's outcome (``capture.outcomes``), and per
configured model the sessions created, swapped and shadowed with the shadow statistics
(``capture.swap``). Optionally the same run records the models' feeds, as ``record`` does.

The command's own output goes to the terminal as usual; everything the processes report goes into
a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray import progress
from hatch_shrinkray.capture import env, guard
from hatch_shrinkray.capture.env import OUTCOMES
from hatch_shrinkray.capture.outcome_file import Outcome, Session
from hatch_shrinkray.capture.run import UNITS_PLUGIN, finish, instrumented_path, project_root, recording_environment
from hatch_shrinkray.capture.shadow import ModelStats
from hatch_shrinkray.capture.swap import Instructions, Seen
from hatch_shrinkray.codec import Invalid, decode, loads
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import temporary_directory

PLUGIN = "hatch_shrinkray.capture.outcomes"


ModelSeen = Seen
"""One configured model over the whole command: every process's sessions and shadow runs, added up."""


@dataclass(frozen=True)
class Observed:
    exit_code: int
    tests: dict[str, Outcome]
    """By pytest node id; empty when no pytest session ran (or none reported)."""
    pytest_sessions: int
    models: dict[str, ModelSeen]
    """By the model's sha256: only models some session was created from."""
    seconds: float


def observe(command: Sequence[str], instructions: Callable[[str], Instructions], *,
            record: Path | None = None, cwd: Path | None = None, timeout: float | None = None) -> Observed:
    """Run ``command`` once under the instructions ``instructions(reports_dir)`` builds (and, with
    ``record``, recording the feeds into that directory). After ``timeout`` seconds the command's
    whole process group is stopped and a ShrinkrayError says so."""
    if not command:
        raise ShrinkrayError("no command to run", hint="hatch-shrinkray check [MODEL...] -- COMMAND [ARGS...]")
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(temporary_directory("observe")))
        reports, outcomes = tmp / "reports", tmp / "outcomes"
        plan = tmp / "instructions.json"
        plan.write_text(instructions(str(reports)).to_json(), encoding="utf-8")
        variables = {env.CHECK: str(plan), OUTCOMES: str(outcomes)}
        plugins = [os.environ.get("PYTEST_PLUGINS", ""), PLUGIN]
        run_dir = None
        if record is not None:
            recording, run_dir = stack.enter_context(recording_environment(record))
            variables.update(recording)
            plugins.append(UNITS_PLUGIN)
        else:
            variables["PYTHONPATH"] = stack.enter_context(instrumented_path())[0]
        variables["PYTEST_PLUGINS"] = ",".join(p for p in plugins if p)
        start = time.perf_counter()
        try:  # Ctrl-C included: the recording environment removes its run directory on the way out
            with progress.external():  # the command writes to the terminal meanwhile
                returncode = _run(command, {**os.environ, **variables}, cwd, timeout)
        except OSError as exc:
            raise ShrinkrayError(f"cannot run {command[0]}: {exc.strerror or exc}",
                                 hint="check the command after --") from exc
        seconds = time.perf_counter() - start
        if record is not None and run_dir is not None:
            finish(run_dir, record, root=project_root(record))
        tests, sessions = _outcomes(outcomes)
        return Observed(returncode, tests, sessions, _models(reports), seconds)


def _run(command: Sequence[str], environment: dict[str, str], cwd: Path | None, timeout: float | None) -> int:
    """The command's exit code. It runs in a process group of its own that ends with check however
    check ends (``capture.guard``), so a timeout, Ctrl-C, SIGTERM or SIGKILL stops every process it
    started (pytest-xdist workers, servers), not just the first."""
    try:
        return guard.run(command, environment, cwd, timeout,
                         guard.Silence(SILENT_INTERVALS * progress.default_interval(), _silent(timeout)))
    except subprocess.TimeoutExpired:
        raise ShrinkrayError(f"`{shlex.join(command)}` did not finish within {timeout:g} s; it was stopped with "
                             "every process it started", hint="raise --timeout, or find what hangs") from None


SILENT_INTERVALS = 10
"""A command that writes nothing for this many progress intervals (five minutes by default) gets a line,
where its output is a pipe (CI; see ``capture.guard``)."""


def _silent(timeout: float | None) -> Callable[[float], None]:
    """What to say when the command has been silent for a while: that it still runs, and what bounds it."""
    bound = f"--timeout {timeout:g} s stops it" if timeout is not None else "nothing stops it"

    def tell(seconds: float) -> None:
        quiet = f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
        print(f"check: the command has printed nothing for {quiet} and still runs; {bound} "
              "(--timeout SECONDS bounds it)", file=sys.stderr, flush=True)

    return tell


def _report(path: Path) -> dict[str, Any]:
    """One report file a process of the command wrote, or a ShrinkrayError when it is damaged (the
    command itself may write anywhere, the temporary report directory included)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise _damaged(path, exc) from None
    if not isinstance(data, dict):
        raise _damaged(path, TypeError("not a JSON object"))
    return data


def _damaged(path: Path, exc: BaseException) -> ShrinkrayError:
    return ShrinkrayError(f"a report the command's processes wrote is damaged ({path.name}: "
                          f"{type(exc).__name__}: {str(exc)[:200]}); nothing can be judged from this run",
                          hint="something in the command wrote into hatch-shrinkray's temporary report directory; "
                               "run check again")


def _outcomes(directory: Path) -> tuple[dict[str, Outcome], int]:
    tests: dict[str, Outcome] = {}
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for path in files:
        try:
            tests.update(loads(Session, path.read_bytes()).tests)
        except (OSError, ValueError) as exc:  # codec.Invalid too
            raise _damaged(path, exc) from None
    return dict(sorted(tests.items())), len(files)


@dataclass(frozen=True)
class Reported:
    """One model in one process's report, as ``swap.flush`` writes its ``swap.Seen``."""

    sessions: int
    swapped: int
    shadowed: int
    shadow_errors: tuple[str, ...] = ()
    stats: ModelStats | None = None


def _models(directory: Path) -> dict[str, ModelSeen]:
    models: dict[str, ModelSeen] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            reported = decode(dict[str, Reported], _report(path).get("models", {}), "models")
        except Invalid as exc:
            raise _damaged(path, exc) from None
        for sha, part in sorted(reported.items()):
            seen = models.setdefault(sha, ModelSeen())
            seen.sessions += part.sessions
            seen.swapped += part.swapped
            seen.shadowed += part.shadowed
            seen.shadow_errors += part.shadow_errors
            if part.stats is not None:
                if seen.stats is None:
                    seen.stats = part.stats
                else:
                    seen.stats.merge(part.stats)
    return models
