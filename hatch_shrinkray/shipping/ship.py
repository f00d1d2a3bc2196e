"""Decide, per configured model, what ships in its place, for any archive (the hook's wheel and
sdist, or a wheel rewritten after the fact); then say it.

Each model gets one typed decision (``outcome``): passed through (a manifest match, or an sdist
that carries originals), shrunk or taken from the cache (``shrink``), unchanged, its original kept
(generated inputs could not verify it, or ``check --fix`` chose so) or already quantized. The
lines the build prints are worded from that decision (``wording``), never read back from it.

What ships is what was hashed: a manifest match or an unchanged original is copied into the work
directory while it is hashed (the archive gets the copy, not a file that may be rewritten
meanwhile), and a shrink is cached and recorded under the digests of the bytes the engine read,
never under those hashed before it ran.

Shrunk files are written into a work directory the caller owns; each :class:`Shipped` lists the
files that go into the archive at which relative path, and the original's external-data files that
no longer belong there. Putting them into an archive is the caller's job (``hatch.include`` for
hatchling, ``wheels.rewrite`` for built wheels), so both ship exactly the same bytes with the same
report lines.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from hatch_shrinkray import progress
from hatch_shrinkray.errors import OptionError, PlanError, ShrinkrayError
from hatch_shrinkray.shipping import outcome, wording
from hatch_shrinkray.shipping.cache import ShrinkCache, default_cache_dir, refused
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.datafiles import ProjectTree, Readers, Tree
from hatch_shrinkray.shipping.display import PREFIX, Display, Sanitized, writing_to
from hatch_shrinkray.shipping.links import outside
from hatch_shrinkray.shipping.manifest import ManifestEntry
from hatch_shrinkray.shipping.obsolete import drop_obsolete_data
from hatch_shrinkray.shipping.passthrough import pass_through
from hatch_shrinkray.shipping.plan import PLAN_NAME, PlanEntry
from hatch_shrinkray.shipping.planned import confirm_plan, planned
from hatch_shrinkray.shipping.requirements import passes_through, read_sha256
from hatch_shrinkray.shipping.shrink import Job, content_sha256, data_files_beside, hashes, shrink_one, sidecars_of


def ship_models(config: HookConfig, root: Path, workdir: Path, app: Display,
                manifest_in: Mapping[str, ManifestEntry], *, keep_failed: bool = False,
                tree: Tree | None = None, total: bool = True) -> list[outcome.Shipped]:
    """Shrink (or pass through) every configured model under ``root``; say what ships instead.

    ``manifest_in`` maps model paths to what hatch-shrinkray shipped for them before: a model
    whose bytes are that entry's ``shrunk_sha256`` passes through. A model with an entry in the
    plan file gets that plan. ``keep_failed`` (``check`` only, which ships nothing) writes models
    that fail verification under ``strict`` too; they are never cached. ``tree`` lists the other files of the
    archive (by default: the files under ``root``), for the models that read a shrunk model's
    external data too (see ``datafiles``). ``total``: end with the total line (``check``, which ships
    its models one call at a time, says it once for all of them).
    """
    app = Sanitized(app)
    with progress.task("models", total=len(config.models)) as counted:
        build = _Build(config, root, workdir, manifest_in, _open_cache(config, app), app, keep_failed)
        readers = Readers(tree or ProjectTree(root))
        start = time.perf_counter()
        shipped: list[outcome.Shipped] = []
        for index, configured in enumerate(config.models):
            counted.at(index, configured.relpath)
            shipped.append(build.speak(*build.decide(configured)))
        counted.at(len(config.models), "")
        shipped = drop_obsolete_data(shipped, build.sidecars, readers, app)
        build.close()
        if total:
            app.display_success(wording.total_line(shipped, time.perf_counter() - start))
        return shipped


@dataclass(frozen=True)
class _Model:
    """One configured model as this build sees it: its options (with the plan file's plan for its
    bytes), where it is read and written, and its digest and size as hashed."""

    entry: ModelEntry
    plan: PlanEntry | None
    source: Path
    target: Path
    sha256: str
    size: int
    sidecars: tuple[str, ...] = ()
    """The original's external-data files, project-relative."""

    def original(self, decision: outcome.Decision, at: Path, entry: ManifestEntry | None = None) -> outcome.Shipped:
        """What ships when the model file's bytes do (read from ``at``): the original, or the shrunk model
        an sdist holds (its ``entry`` says what the original weighed)."""
        before = entry.original_size if isinstance(decision, outcome.PassThrough) and entry is not None else None
        return outcome.Shipped(self.entry.relpath, decision.outcome, before or self.size, self.size,
                               ((self.entry.relpath, at),), entry=entry)


@dataclass
class _Build:
    """One run over the configured models: what it needs to decide, and what it says after them."""

    config: HookConfig
    root: Path
    workdir: Path
    manifest_in: Mapping[str, ManifestEntry]
    cache: ShrinkCache | None
    app: Display
    keep_failed: bool
    sidecars: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per shrunk model, the original's data files (they may leave the archive)."""
    generated: list[str] = field(default_factory=list)
    weak: list[str] = field(default_factory=list)
    unverified: dict[Path | None, list[str]] = field(default_factory=dict)
    """The ``inputs`` of the models kept original (their record advice) -> those models."""

    def decide(self, configured: ModelEntry) -> tuple[_Model, outcome.Decision]:
        """What ships for ``configured`` (shrinking it, or copying it into the work directory, on the way)."""
        source, target = self.root / configured.relpath, self.workdir / configured.relpath
        if (elsewhere := outside(self.root, configured.relpath)) is not None:
            self.app.display_warning(wording.outside_line(configured.relpath, elsewhere))
        sha256 = read_sha256(self.root, configured)
        model = _Model(configured, None, source, target, sha256, source.stat().st_size)
        if self.config.ships_originals:
            return model, outcome.PassThrough(None)
        if passes_through(configured, sha256, self.manifest_in):
            shipped = self.manifest_in[configured.relpath]
            pass_through(configured.relpath, shipped, source, target, sha256=sha256, workdir=self.workdir,
                         cache=self.cache)
            return model, outcome.PassThrough(shipped)
        entry, plan = planned(self.config, configured, sha256, self.app)
        model = replace(model, entry=entry, plan=plan)
        if plan is not None and plan.ships_original:
            return model, outcome.PlannedOriginal(plan)
        return self._shrink(model)

    def _shrink(self, model: _Model) -> tuple[_Model, outcome.Shrinking]:
        entry = model.entry
        try:
            sidecars = sidecars_of(model.source, entry.relpath)
            # What the model weighs with its data files, as the line after the shrink says.
            weighs = model.size + sum(Path(data).stat().st_size for data in sidecars)
            self.app.display_waiting(wording.waiting_line(entry.relpath, weighs, entry.options.method))
            with writing_to(self.workdir):
                model.target.parent.mkdir(parents=True, exist_ok=True)
                job = Job(entry, self.root, model.target,
                          content_sha256(model.sha256, hashes(self.root, sidecars.values())), model.sha256, sidecars)
                decision = shrink_one(job, cache=self.cache, app=self.app, keep_failed=self.keep_failed)
        except ShrinkrayError as exc:
            _name_in_error(exc, self.config, entry, model.source)
            raise
        return replace(model, sidecars=tuple(sidecars.values())), decision

    def speak(self, model: _Model, decision: outcome.Decision) -> outcome.Shipped:
        """Say what ships for ``model``, and note it for the lines after the models."""
        relpath, app = model.entry.relpath, self.app
        if isinstance(decision, outcome.PassThrough):
            if decision.entry is None:
                app.display_success(wording.sdist_original_line(relpath, model.size))
                return model.original(decision, model.source)
            app.display_success(wording.manifest_match_line(relpath, model.size, decision.entry.original_size))
            return model.original(decision, model.target, decision.entry)
        if isinstance(decision, outcome.PlannedOriginal):
            app.display_success(f"{PREFIX} {wording.fix_line(relpath, decision.plan, model.entry.options, model.size)}")
            app.display_debug(wording.fix_detail_line(relpath, decision.plan, model.entry.options))
            return model.original(decision, model.source)
        if isinstance(decision, outcome.AlreadyQuantized):  # shipped as it is, nothing claimed about it
            app.display_warning(wording.already_quantized_line(relpath, model.size, decision.message))
            return model.original(decision, model.source)
        if isinstance(decision, outcome.KeptOriginal):
            app.display_warning(wording.kept_line(relpath, model.size, decision.why))
            app.display_debug(wording.kept_detail_line(relpath, model.size, decision.why))
            verify = model.entry.options.verify
            self.unverified.setdefault(verify.inputs if verify is not None else None, []).append(relpath)
            return model.original(decision, model.target, decision.record.entry)
        if isinstance(decision, outcome.Unchanged):
            app.display_warning(wording.unchanged_line(relpath, model.size, decision.why))
            if (whole := wording.unchanged_detail_line(relpath, model.size, decision.why)) is not None:
                app.display_debug(whole)
            return model.original(decision, model.target, decision.record.entry)
        return self._speak_shrunk(model, decision)

    def _speak_shrunk(self, model: _Model, decision: outcome.Shrunk) -> outcome.Shipped:
        relpath, record, app = model.entry.relpath, decision.record, self.app
        files = [(relpath, model.target)]
        files += [((PurePosixPath(relpath).parent / data.name).as_posix(), data)
                  for data in (() if decision.cached else data_files_beside(model.target))]  # never cached
        self.sidecars[relpath] = model.sidecars
        app.display_success(wording.success_line(relpath, record, decision.cached, model.plan, model.entry.options))
        app.display_debug(wording.detail_line(relpath, record, decision.cached))
        if model.plan is not None:
            if model.plan.remedy is not None:
                app.display_debug(wording.fix_detail_line(relpath, model.plan, model.entry.options))
            confirm_plan(relpath, model.plan, record.entry.shrunk_sha256, app)
        verified = record.entry.verification
        if verified is not None and not verified.real_inputs:
            self.generated.append(relpath)
        elif verified is not None and verified.evidence is not None and verified.evidence.weak:
            self.weak.append(relpath)
        for note in verified.notes if verified is not None else ():  # e.g. no recording of this model
            app.display_warning(wording.note_line(relpath, note))
        return outcome.Shipped(relpath, decision.outcome, record.original_size, record.shrunk_size, tuple(files),
                               entry=record.entry)

    def close(self) -> None:
        """The advice that follows the models: one line per record command, however many models it
        concerns, then the models verified on generated inputs or on weak evidence."""
        for inputs, models in self.unverified.items():
            self.app.display_warning(wording.record_advice_line(self.root, inputs, models))
        if self.generated:
            self.app.display_warning(wording.generated_line(self.generated))
        if self.weak:
            self.app.display_warning(wording.weak_line(self.weak))


def _name_in_error(exc: ShrinkrayError, config: HookConfig, model: ModelEntry, source: Path) -> None:
    """Make an error speak the user's terms: the path they wrote, the option names of their table,
    the plan file's name."""
    if exc.path and Path(exc.path) == source:
        exc.path = model.relpath  # the path the user wrote, not the build's absolute one
    if isinstance(exc, OptionError):
        exc.name_options(model.names)
    if isinstance(exc, PlanError):
        exc.name_plan(config.plan_file.name if config.plan_file is not None else PLAN_NAME)


def _open_cache(config: HookConfig, app: Display) -> ShrinkCache | None:
    if not config.cache:
        app.display_debug(wording.cache_disabled_line())
        return None
    directory = config.cache_dir or default_cache_dir()
    problem = refused(directory)
    if problem:
        raise problem
    app.display_debug(wording.cache_directory_line(directory))
    return ShrinkCache(directory)
