"""``check`` and ``check --shadow``: shrink, run the command, judge.

``check`` runs the command twice: with the original models (recording a bounded sample of their
feeds on the way, for the hints) and with every session of a configured model loading the shrunk
one. ``check --shadow`` runs it once: every call of a configured model also runs the shrunk model
on the same feeds, the program gets the original's outputs, and the differences are counted over
every call.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray import progress
from hatch_shrinkray.capture.observe import ModelSeen, Observed, observe
from hatch_shrinkray.capture.swap import Instructions, Target
from hatch_shrinkray.checking.models import Configured, Prepared, prepare
from hatch_shrinkray.checking.sensitive import ranked
from hatch_shrinkray.checking.verdict import Verdict, judge
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256, temporary_directory
from hatch_shrinkray.fitting.sensitivity import keep_hint
from hatch_shrinkray.hints import record_hint
from hatch_shrinkray.shipping.display import Display


@dataclass(frozen=True)
class Settings:
    command: tuple[str, ...]
    pytest: bool
    """Per-test outcomes are required (``--pytest``, or the command is pytest)."""
    threshold: float = 0.5
    """Decision threshold of probability outputs, for the shadow flips."""
    max_flip_rate: float = 0.0
    """Share of shadow decisions that may flip (``--search`` and ``--shadow``)."""
    cwd: Path | None = None
    timeout: float | None = None
    """Seconds one run of the command may take (``--timeout``); None: no limit."""
    project: Path = Path(".")
    """The project directory: paths written into the plan file are relative to it."""


@dataclass(frozen=True)
class Checked:
    command: tuple[str, ...]
    prepared: tuple[Prepared, ...]
    verdict: Verdict
    hints: dict[str, str]
    """By model path: which tensors to keep (for models whose regression the hint can address)."""


@dataclass(frozen=True)
class Shadowed:
    prepared: tuple[Prepared, ...]
    run: Observed


def looks_like_pytest(command: Sequence[str]) -> bool:
    """``pytest ...``, ``py.test ...``, ``python -m pytest ...``."""
    return ((bool(command) and os.path.basename(command[0]) in ("pytest", "py.test", "pytest.exe"))
            or any(a == "-m" and b == "pytest" for a, b in itertools.pairwise(command)))


def targets_of(prepared: Sequence[Prepared]) -> list[Prepared]:
    found = [p for p in prepared if p.shrunk is not None]
    if not found:
        why = "; ".join(f"{p.relpath}: {p.verification.removeprefix('nothing to check ')}" for p in prepared)
        hint = ("the plan file's remedies ship those originals (delete their entries to check again)"
                if any(p.planned for p in prepared) else
                f"a build verifies them on real inputs: {record_hint()}"
                if any(p.ships_original for p in prepared) else "check the `models` globs and min-elements")
        raise ShrinkrayError(f"nothing to check: no configured model ships shrunk ({why})", hint=hint)
    return found


def run_check(configured: Configured, settings: Settings, app: Display) -> Checked:
    with temporary_directory("check") as name:
        tmp = Path(name)
        prepared, original, shrunk = two_runs(configured, settings, app, tmp)
        verdict = judge(original, shrunk)
        if verdict.passed:
            return Checked(settings.command, tuple(prepared), verdict, {})
        with progress.task("check: for the hint, each weight of the models alone on the recorded feeds"):
            hints = sensitive_hints(prepared, original, tmp / "recorded")
        return Checked(settings.command, tuple(prepared), verdict, hints)


def two_runs(configured: Configured, settings: Settings, app: Display,
             tmp: Path) -> tuple[list[Prepared], Observed, Observed]:
    """``check``'s own two runs: the original models (recording their feeds into ``tmp/recorded``),
    then every configured model shrunk as configured."""
    with progress.task("check: runs of the command", total=2) as runs:
        prepared = prepare(configured, tmp / "models", app)
        targets = tuple(p.target() for p in targets_of(prepared))
        app.display_info(f"check: run 1 of 2, with the original models: {shown(settings.command)}")
        original = run_command(settings, prepared, "run 1 of 2, with the original models",
                               "original", targets, record=tmp / "recorded")
        require_success(original, settings)
        require_evidence(original, prepared, settings)
        runs.advance()
        app.display_info(f"check: run 2 of 2, with the shrunk models: {shown(settings.command)}")
        shrunk = run_command(settings, prepared, "run 2 of 2, with the shrunk models", "shrunk", targets)
        runs.advance()
    return prepared, original, shrunk


def run_shadow(configured: Configured, settings: Settings, app: Display) -> Shadowed:
    with temporary_directory("check") as name:
        prepared = prepare(configured, Path(name) / "models", app)
        targets = tuple(p.target() for p in targets_of(prepared))
        app.display_info(f"check --shadow: the original models answer, the shrunk ones run beside them: "
                         f"{shown(settings.command)}")
        run = run_command(settings, prepared, "the shadow run", "original", targets, shadow=True)
        require_evidence(run, prepared, settings)
        return Shadowed(tuple(prepared), run)


def run_command(settings: Settings, prepared: Sequence[Prepared], which: str, load: str,
                targets: tuple[Target, ...], *, shadow: bool = False, record: Path | None = None) -> Observed:
    """One run of the command (``which`` names it in messages), within ``settings.timeout``, its
    sessions of ``targets`` computing with ``load`` (``original`` or ``shrunk``), the other model
    beside them when ``shadow``.

    ``check`` swapped in the shrunk copy of the bytes it read; a command that rewrites a configured
    model (a test re-exporting it) would make it judge other bytes than it shrank, and blame the
    weights. So every model file is hashed again after the run, and a changed one is refused."""
    with progress.task(f"{which}: `{shown(settings.command)}`"):
        observed = observe(settings.command,
                           lambda reports: Instructions(load, shadow, settings.threshold, reports, targets),
                           record=record, cwd=settings.cwd, timeout=settings.timeout)
    for p in prepared:
        try:
            now = file_sha256(p.source)
        except OSError as exc:
            now = f"unreadable ({exc.strerror or exc})"
        if now != p.sha256:
            raise ShrinkrayError(
                f"changed while `{shown(settings.command)}` ran ({which}): check shrank and swapped in the bytes it "
                "read before, so this run judged other bytes, and nothing is judged", path=p.relpath,
                hint="make the command leave the model file alone (write re-exports elsewhere), then run check "
                     "again")
    return observed


def require_evidence(run: Observed, prepared: Sequence[Prepared], settings: Settings) -> None:
    """Refuse a run that can judge nothing: no configured model loaded, or no tests seen when asked for."""
    if not any(run.models.get(p.sha256, ModelSeen()).sessions for p in prepared if p.shrunk is not None):
        raise ShrinkrayError(
            f"`{shown(settings.command)}` created no onnxruntime session of a configured model "
            f"({', '.join(p.relpath for p in prepared)}), so it checked nothing",
            hint="run the command that uses the models (sessions are matched by path or by the sha256 of the "
                 "model bytes; a model re-serialized before loading has other bytes)")
    if settings.pytest and not run.pytest_sessions:
        raise ShrinkrayError(
            f"`{shown(settings.command)}` ran no pytest session that reported its tests",
            hint="pytest must run in a process that inherits the environment (tox and nox clear it by default); "
                 "without --pytest only the exit status is compared")


def require_success(run: Observed, settings: Settings) -> None:
    """Refuse to judge a command that fails with the original models and says nothing test by test:
    its exit status cannot blame the shrunk models for anything."""
    if run.exit_code != 0 and not run.tests:
        raise ShrinkrayError(
            f"`{shown(settings.command)}` failed with the original models (exit {run.exit_code}), so no failure "
            "with the shrunk ones can be blamed on them, and nothing was judged",
            hint="make the command pass with the original models first (under pytest, tests that fail with the "
                 "originals are set aside one by one instead)")


def never_loaded(prepared: Sequence[Prepared], original: Observed) -> list[str]:
    """The configured models with something to shrink that the command never created a session of."""
    return [p.relpath for p in prepared if p.shrunk is not None
            and not original.models.get(p.sha256, ModelSeen()).sessions]


def sensitive_hints(prepared: Sequence[Prepared], original: Observed, recorded: Path) -> dict[str, str]:
    """Per loaded model, the tensors that change its outputs most alone, measured on the feeds the
    original run recorded."""
    hints = {}
    for p in prepared:
        if p.shrunk is None or not original.models.get(p.sha256, ModelSeen()).sessions:
            continue
        text = keep_hint(ranked(p, recorded))
        if text:
            hints[p.relpath] = text
    return hints


def shown(command: Sequence[str]) -> str:
    return shlex.join(command)


def portable_path(path: Path | str, project: Path) -> str:
    """``path`` as the plan file may hold it: relative to the project (a checkout elsewhere writes
    the same bytes), or its bare name when it lies outside."""
    absolute = Path(os.path.abspath(path))
    base = Path(os.path.abspath(project))
    return absolute.relative_to(base).as_posix() if absolute.is_relative_to(base) else absolute.name


def portable_command(command: Sequence[str], project: Path) -> str:
    """``command`` as the plan file records it (for people: the command to run again): every absolute
    argument inside the project relative to it, and an interpreter or program given by its absolute
    path by its name (``/home/me/proj/.venv/bin/python`` -> ``python``)."""
    def portable(index: int, arg: str) -> str:
        if not os.path.isabs(arg):
            return arg
        if Path(arg).is_relative_to(os.path.abspath(project)):
            return portable_path(arg, project)
        name = os.path.basename(arg)
        if index == 0 and (name.startswith("python") or shutil.which(name) == arg):
            return "python" if name.startswith("python") else name
        return arg

    return shlex.join(portable(i, a) for i, a in enumerate(command))
