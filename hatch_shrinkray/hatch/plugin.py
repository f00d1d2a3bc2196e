"""The Hatch build hook: a thin shell that validates the table and hands the work to ``build``.

Importing this module must stay cheap: hatchling constructs a throw-away instance just to call
``dependencies()``, so onnx and onnxruntime are imported only when a model is actually shrunk.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

from hatch_shrinkray import hints, progress
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import temporary_directory
from hatch_shrinkray.hatch.include import check_outside, include
from hatch_shrinkray.hatch.stopping import Guard, Reaper, stopping
from hatch_shrinkray.result import human
from hatch_shrinkray.shipping.config import PLUGIN_NAME, HookConfig, hook_table, load_config, recording_paths
from hatch_shrinkray.shipping.display import PREFIX, printable_lines
from hatch_shrinkray.shipping.manifest import read_manifest
from hatch_shrinkray.shipping.pins import package_dirs, project_members, report_pins, shrunk_models
from hatch_shrinkray.shipping.requirements import engine_needed, engine_requirements
from hatch_shrinkray.shipping.ship import ship_models
from hatch_shrinkray.signals import deferred

TARGETS = ("wheel", "sdist")
PYPI_FILE_LIMIT = 100 * 1024 * 1024
"""PyPI's default limit per uploaded file (warehouse ``MAX_FILESIZE = 100 * ONE_MIB``); a project
can ask for more."""
PYPI_NEAR = 0.9
"""Warn from this share of the limit on: the next release of the model may cross it."""
LIMITS_URL = "https://docs.pypi.org/project-management/storage-limits#requesting-a-file-size-limit-increase"
WEB_REQUIREMENT = "brotli>=1.1"
"""What a build with target ``web`` measures its sizes with (the ``compress`` extra's brotli)."""


def archive_summary(path: Path) -> tuple[str, str]:
    """``(level, line)`` for a built archive: its size, and how it stands against PyPI's limit
    (``warning`` near it or above it; a build is never failed for it)."""
    size = path.stat().st_size
    line = f"{PREFIX} {path.name}: {human(size)}"
    limit = f"PyPI's default limit of {human(PYPI_FILE_LIMIT)} (100 MiB) per file"
    if size > PYPI_FILE_LIMIT:
        return "warning", (f"{line}, over {limit}: PyPI will refuse the upload unless the project has a file size "
                           f"limit increase ({LIMITS_URL})")
    if size >= PYPI_NEAR * PYPI_FILE_LIMIT:
        return "warning", f"{line}, {100 * size / PYPI_FILE_LIMIT:.0f}% of {limit}"
    return "info", line


def _asked_by_a_frontend(*hooks: str) -> bool:
    """Whether hatchling is answering one of a frontend's PEP 517 ``hooks`` (its entry point in
    ``hatchling.build`` on the call stack), rather than a builder driven directly (``hatch build``
    runs hatchling's own command; a test or a tool may run a builder in its process)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in hooks and frame.f_globals.get("__name__") == "hatchling.build":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _editable_build() -> bool:
    """Whether hatchling is answering a frontend's ``get_requires_for_build_editable``.

    Hatchling asks hooks for their dependencies without saying which build version is coming
    (pypa/hatch#1348), but an editable build ships no model, so it must not pull in the engine;
    the PEP 660 entry point on the call stack is the one reliable sign.
    """
    return _asked_by_a_frontend("get_requires_for_build_editable")


def _killable() -> bool:
    """Whether a frontend may kill this process on Ctrl-C before it has cleaned up: those that run
    the backend through PEP 517 (build, pip, uv) kill it when it does not end at once."""
    return _asked_by_a_frontend("build_wheel", "build_sdist", "prepare_metadata_for_build_wheel")


class ShrinkrayBuildHook(BuildHookInterface[BuilderConfig]):
    PLUGIN_NAME = PLUGIN_NAME

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._reaper: Reaper | None = None
        self.initializing = False

    def _load(self) -> HookConfig:
        target_hooks = getattr(self.build_config, "target_config", {}).get("hooks", {})
        table = hook_table(self.target_name if PLUGIN_NAME in target_hooks else None)
        return load_config(self.config, Path(self.root), self.target_name, table,
                           dependencies=self.metadata.core.dependencies,
                           recordings_optional=bool(read_manifest(Path(self.root))))

    def dependencies(self) -> list[str]:
        """The engine's requirements, only when this build has models to shrink.

        Hatchling asks for them before it installs them, so a table that cannot work (a bad key, an
        ``inputs`` that does not exist yet) stops the build here, with every problem listed, not
        after the engine was installed for nothing.
        """
        if self.target_name not in TARGETS or _editable_build():
            return []
        try:
            config = self._load()
            needed = engine_needed(config, Path(self.root), read_manifest(Path(self.root)))
        except BaseException as exc:
            stopping(exc)
            if isinstance(exc, ShrinkrayError):
                self.app.abort(printable_lines(f"shrinkray: {exc}"))
            raise
        web = any(m.options.target == "web" for m in config.models)
        methods = {m.options.method for m in config.models} | {p.method for p in config.plans.values()}
        return [*engine_requirements(methods), *([WEB_REQUIREMENT] if web else [])] if needed else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name not in TARGETS or version != "standard":
            self.app.display_debug(f"shrinkray: nothing to do for {self.target_name} ({version}) builds")
            return
        Guard.enter(self)
        self.initializing = True
        try:
            with deferred():  # the directory, our reference to it and its reaper appear together
                self._workdir = self._make_workdir()
                self._reaper = Reaper(self._workdir.name) if _killable() else None
            config, root, workdir = self._load(), Path(self.root), Path(self._workdir.name)
            check_outside(workdir, root)
            with progress.reporting(self._reporter()), hints.speaking(hints.Invocation(root=root)):
                shipped = ship_models(config, root, workdir, self.app, read_manifest(root, self.app.display_warning))
            models = shrunk_models(shipped, root)
            # a rewritten pin ships as a copy: the project's own file stays as it is
            pinned = report_pins(project_members(root, models) if models else [], models, config.pins == "rewrite",
                                 workdir / ".pins", self.app)
            include(shipped, config, build_data, workdir, self.app, others=[(f.file, f.path) for f in pinned])
            self._drop(path for model in shipped for path in model.obsolete)
            self._leave_out_recordings(config, root)
        except BaseException as exc:
            self.cleanup()
            stopping(exc)  # Ctrl-C, SIGTERM: one line, every live hook cleaned up, the process ends
            if isinstance(exc, ShrinkrayError):
                self.app.abort(printable_lines(f"shrinkray: {exc}"))
            raise
        finally:
            self.initializing = False

    def _reporter(self) -> progress.Reporter | None:
        """Plain lines through hatch's own ``display_info`` (never rich: the build environment does not
        have it, and a frontend's output is rarely a terminal), so they obey hatch's verbosity:
        ``hatch -q build`` or ``HATCH_QUIET=1`` silences them with every other info line of the
        build, as a user of hatch expects; a config key would make quiet a property of the project
        rather than of the invocation (quiet in CI, talkative at the desk)."""
        quiet = getattr(self.app, "verbosity", 0) < 0
        return None if quiet else progress.Reporter(self.app.display_info, prefix=f"{PREFIX} ")

    @staticmethod
    def _make_workdir() -> tempfile.TemporaryDirectory[str]:
        """Outside the project (checked by ``check_outside``); its finaliser also covers
        ``--hooks-only`` builds, where ``finalize`` is never called."""
        try:
            return temporary_directory("build")
        except OSError as exc:
            raise ShrinkrayError(f"cannot create a temporary directory: {exc}",
                                 hint="point TMPDIR at a writable directory outside the project") from exc

    def _drop(self, relpaths: Iterable[str]) -> None:
        """Leave files out of the archive. Hatchling has no public API for this (pypa/hatch#1787);
        a path in ``build_reserved_paths`` is skipped by file selection, and hatchling clears the
        set after writing each archive (stable since hatchling 1.4)."""
        for relpath in relpaths:
            self.build_config.build_reserved_paths.add(self.build_config.get_distribution_path(relpath))
            self.app.display_debug(f"shrinkray: leaving out {relpath} (external data of the original)")

    def _leave_out_recordings(self, config: HookConfig, root: Path) -> None:
        """Recordings (the ``inputs`` the build verified on) are for building, not for shipping: a wheel
        needs none, and our sdist ships the shrunk models and the manifest, so a wheel built from it
        needs none either. They are left out unless the target's or the build's ``include``,
        ``only-include`` or ``force-include`` names them (or a path inside them): included on purpose.
        An sdist of the originals (``sdist = "original"``) keeps them, as its wheels shrink again."""
        if config.ships_originals:
            return
        for relpath in recording_paths(config, root):
            if self._included_on_purpose(relpath):
                continue
            path = root / relpath
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            reserved = self.build_config.build_reserved_paths
            reserved.add(os.path.normpath(relpath))  # the directory, skipped as a whole by the walk
            reserved.update(self.build_config.get_distribution_path(os.path.relpath(f, root)) for f in files)
            # A line where the archive would otherwise hold them: an sdist takes the whole project
            # (what hatchling excludes aside), a wheel the package directories that hold the models.
            shipped = bool(files) and (
                not self.build_config.path_is_excluded(relpath) if config.target == "sdist" else
                bool(set(PurePosixPath(relpath).parents) & package_dirs(m.relpath for m in config.models)))
            if shipped:  # said only where the archive would have held them
                self.app.display_info(
                    f"{PREFIX} {relpath} ({human(sum(f.stat().st_size for f in files))}) is left out of the "
                    f"{config.target}: recorded inputs are for building, not shipping (`include` ships it)")

    def _included_on_purpose(self, relpath: str) -> bool:
        named: list[str] = []
        for table in (getattr(self.build_config, "target_config", {}), getattr(self.build_config, "build_config", {})):
            for key in ("include", "only-include"):
                value = table.get(key, [])
                named += [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
            forced = table.get("force-include", {})
            named += [k for k in forced if isinstance(k, str)] if isinstance(forced, dict) else []
        target = PurePosixPath(relpath)
        for entry in named:
            name = PurePosixPath(entry.strip("/"))
            if name == target or target in name.parents:
                return True
        return False

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Say how big the archive came out (after hatchling wrote it), then clean up."""
        try:
            if self._workdir is not None and Path(artifact_path).is_file():
                level, line = archive_summary(Path(artifact_path))
                (self.app.display_warning if level == "warning" else self.app.display_info)(line)
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        """Remove the work directory and leave the guard (``finalize``, a failure, a stop)."""
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None
        if self._reaper is not None:
            self._reaper.release()
            self._reaper = None
        Guard.leave(self)

