"""Decide, per configured model, what ships in its place, for any archive (the hook's wheel and
sdist, or a wheel rewritten after the fact).

For each configured model there are six outcomes:

- *pass-through*: the file's sha256 is a manifest's ``shrunk_sha256`` (a wheel built from our own
  sdist) and the file is framed as an ONNX model, or the sdist is configured to carry originals.
  The file ships as it is (the hook still names it explicitly, which keeps it in the archive even
  if a ``.gitignore`` would drop it). Nothing heavy is imported.
- *cached*: the cache holds the shrunk bytes for these exact inputs; they are copied out.
- *shrunk*: the engine writes the shrunk model into the work directory.
- *unchanged*: no weight reaches ``min-elements``, or the shrunk model would not be smaller;
  reported, and the original ships.
- *kept-original*: generated inputs could not verify the shrunk model (it failed on them, the
  original's outputs carry no signal there, or it does not run on them), so the original ships
  with one line that names the ``record`` command that lets the next build shrink it (``strict``
  fails the build instead).
- *already quantized*: the engine refuses it; it is reported and shipped unchanged.

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

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from hatch_shrinkray import progress
from hatch_shrinkray.errors import (
    AlreadyQuantizedError,
    OptionError,
    PlanError,
    ShrinkrayError,
    printable,
)
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.files import copy_hashed, file_sha256
from hatch_shrinkray.hints import check_hint, record_hint, setting
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import human, model_line, size_change
from hatch_shrinkray.shipping.advice import record_advice
from hatch_shrinkray.shipping.cache import (
    CACHE_ENV,
    CachedShrink,
    ShrinkCache,
    cache_key,
    default_cache_dir,
    engine_free_key,
    private_problem,
)
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.datafiles import ProjectTree, Readers, Tree
from hatch_shrinkray.shipping.manifest import (
    MANIFEST_NAME,
    ManifestEntry,
    external_data_refs,
    pass_through_problem,
    tool_versions,
)
from hatch_shrinkray.shipping.plan import PLAN_NAME, PlanEntry

PREFIX = "shrinkray:"
CORE = "hatch-shrinkray-core"
"""The distribution that holds all of hatch-shrinkray's code, light enough for build environments;
``hatch-shrinkray`` is a metapackage that adds the engine (``hatch-shrinkray-core[engine]``)."""
ENGINE_MODULES = ("onnx", "onnxruntime", "numpy", "onnx_ir", "ml_dtypes")
"""What the engine imports: hatch-shrinkray-core installs without them."""


ONLY_FOR = {"onnx-ir": frozenset({"int4", "auto"}), "threadpoolctl": frozenset({"int8", "auto"}),
            "rich": frozenset()}
"""Requirements of the engine extra that a build needs only for some methods (onnx-ir: onnxruntime's
MatMulNBits quantizer; threadpoolctl: one BLAS thread while fitting), or never (rich: the CLI's live
progress). Each package fewer is one less to resolve and install in every isolated build
environment that shrinks (benchmarks/BUILD_TIME.md)."""


def engine_requirements(methods: Iterable[str] | None = None) -> list[str]:
    """What a build that shrinks with ``methods`` (None: any) must install: the engine extra's
    requirements, spelled out, less those in ``ONLY_FOR`` that no method needs. Not
    ``core[engine]==V``: that would install the whole extra, and pip deems it satisfied by the
    installed core anyway when it checks build requirements."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        declared = [Requirement(r) for r in metadata.requires(CORE) or []]
    except metadata.PackageNotFoundError:
        declared = []
    wanted = None if methods is None else set(methods)
    return [f"{r.name}{r.specifier}" for r in declared if r.marker is not None
            and r.marker.evaluate({"extra": "engine"}) and not r.marker.evaluate({"extra": ""})
            and (r.name not in ONLY_FOR or (ONLY_FOR[r.name] & wanted if wanted is not None else r.name != "rich"))]


def engine_missing(exc: ModuleNotFoundError) -> ShrinkrayError | None:
    """The one-line error for an engine module that is not installed, or ``None`` for any other
    missing module (a bug, which keeps its traceback)."""
    name = (exc.name or "").partition(".")[0]
    if name not in ENGINE_MODULES:
        return None
    from hatch_shrinkray import __version__

    return ShrinkrayError(f"the shrinking engine is not installed ({name} is missing)",
                          hint=f"pip install 'hatch-shrinkray=={__version__}' "
                               f"(or '{CORE}[engine]=={__version__}')")


class Display(Protocol):
    """The part of hatchling's ``self.app`` that shipping talks through (plain text, stderr); the
    wheel rewriter provides the same five methods."""

    def display_info(self, message: str = "") -> None: ...
    def display_waiting(self, message: str = "") -> None: ...
    def display_success(self, message: str = "") -> None: ...
    def display_warning(self, message: str = "") -> None: ...
    def display_debug(self, message: str = "", level: int = 1) -> None: ...


@dataclass(frozen=True)
class Shipped:
    """What one model contributed to the archive (for the total line and for tests)."""

    relpath: str
    outcome: str
    """``shrunk``, ``cached``, ``pass-through``, ``unchanged``, ``kept-original`` or ``already-quantized``."""
    original_size: int
    shipped_size: int
    files: tuple[tuple[str, Path], ...] = ()
    """``(relative path in the archive, file whose bytes go there)``: the model and, for outputs
    over 2 GB, its data file."""
    obsolete: tuple[str, ...] = ()
    """Relative external-data files of the original that the shrunk model no longer reads; they
    leave the archive."""
    entry: ManifestEntry | None = None
    """The manifest record (``None`` for an already-quantized model)."""

    @property
    def new_bytes(self) -> bool:
        """Whether what ships differs from the model's own bytes (shrunk or cached); otherwise the
        files are the original, or a copy of it made while it was hashed."""
        return self.outcome in ("shrunk", "cached")


class Sanitized:
    """A display that prints every line as data: names and figures can come from files we did not
    write (a model's tensor names, a plan, a cache record), and a control character in them must not
    move the cursor, colour the log or fake a line (:func:`errors.printable`)."""

    def __init__(self, app: Display) -> None:
        self.app = app

    def display_info(self, message: str = "") -> None:
        self.app.display_info(printable_lines(message))

    def display_waiting(self, message: str = "") -> None:
        self.app.display_waiting(printable_lines(message))

    def display_success(self, message: str = "") -> None:
        self.app.display_success(printable_lines(message))

    def display_warning(self, message: str = "") -> None:
        self.app.display_warning(printable_lines(message))

    def display_debug(self, message: str = "", level: int = 1) -> None:
        self.app.display_debug(printable_lines(message), level)


def printable_lines(text: str) -> str:
    """``text`` with each of its lines made printable (tables keep their line breaks)."""
    return "\n".join(printable(line) for line in text.split("\n"))


LOAD_CHECK = """
import sys
try:
    import onnxruntime as ort
except Exception as exc:
    print("cannot import onnxruntime: " + " ".join(str(exc).split())[:300])
    sys.exit(4)
options = ort.SessionOptions()
options.log_severity_level = 4
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
try:
    ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
except Exception as exc:
    print(" ".join(str(exc).split())[:300])
    sys.exit(3)
"""
"""Creates an onnxruntime session from a file, in a process of its own: bytes we did not just
write (a cache entry, a manifest match) may crash onnxruntime, which must not take the build down
without a word. Optimizations are off: the graph is resolved, typed and given kernels, which is
what loading proves, without folding every weight (seconds and gigabytes on a big model)."""
LOAD_TIMEOUT = 900


def onnxruntime_installed() -> bool:
    """Whether onnxruntime can be loaded here (not in an isolated build from our sdist, which
    installs nothing heavy)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def load_problem(path: Path) -> str | None:
    """Why onnxruntime cannot create a session from ``path``, or ``None`` when it can (or when
    onnxruntime is not installed: see :func:`onnxruntime_installed`)."""
    import subprocess
    import sys

    if not onnxruntime_installed():
        return None
    try:
        proc = subprocess.run([sys.executable, "-c", LOAD_CHECK, str(path)], capture_output=True, text=True,
                              check=False, timeout=LOAD_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"onnxruntime did not load it within {LOAD_TIMEOUT} s"
    except OSError as exc:
        return f"cannot start {sys.executable} to load it: {exc.strerror or exc}"
    said = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode in {0, 4}:  # 4: onnxruntime does not import; nothing to judge with
        return None
    if proc.returncode == 3:
        return f"onnxruntime cannot load it: {said}"
    return f"onnxruntime crashed loading it (exit code {proc.returncode})"


def passes_through(model: ModelEntry, sha256: str, manifest: Mapping[str, ManifestEntry]) -> bool:
    """Whether these bytes are what a manifest says hatch-shrinkray shipped for this path."""
    entry = manifest.get(model.relpath)
    return entry is not None and entry.shrunk_sha256 == sha256


def engine_needed(config: HookConfig, root: Path, manifest: Mapping[str, ManifestEntry]) -> bool:
    """Whether this build will shrink anything (and so needs onnx and onnxruntime installed).

    Where the engine is not installed (an isolated build environment, before the hook asked for
    it), a model whose shrink the cache holds needs none either: installing onnxruntime and its
    dependencies cost an isolated build more than everything else the hook does (benchmarks/
    BUILD_TIME.md), to copy bytes out of the cache."""
    if config.ships_originals:
        return False
    pending = [(m, sha) for m in config.models if not passes_through(m, sha := _read_sha256(root, m), manifest)
               and not ((plan := config.plans.get(sha)) is not None and plan.ships_original)]
    if not pending:
        return False
    if engine_installed():
        return True
    return not all(_cached_without_engine(config, root, m, sha) for m, sha in pending)


def engine_installed() -> bool:
    """Whether the engine's modules can be imported here (without importing them)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime", "numpy"))


def _cached_without_engine(config: HookConfig, root: Path, model: ModelEntry, sha256: str) -> bool:
    """Whether the cache holds this model's shrink for its options (and plan), made by this
    hatch-shrinkray with any engine; only for models without external data (their cache key covers
    the data files, which takes the engine to find)."""
    if not config.cache or external_data_refs(root / model.relpath) != {}:
        return False
    directory = config.cache_dir or default_cache_dir()
    if private_problem(directory):
        return False
    plan = config.plans.get(sha256)
    options = plan.apply(model.options) if plan is not None else model.options
    return ShrinkCache(directory).latest(engine_free_key(sha256, options), sha256) is not None


def _read_sha256(root: Path, model: ModelEntry) -> str:
    try:
        return file_sha256(root / model.relpath)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror or exc}", path=model.relpath,
                             hint="check the file's permissions") from exc


def ship_models(config: HookConfig, root: Path, workdir: Path, app: Display,
                manifest_in: Mapping[str, ManifestEntry], *, keep_failed: bool = False,
                tree: Tree | None = None) -> list[Shipped]:
    """Shrink (or pass through) every configured model under ``root``; say what ships instead.

    ``manifest_in`` maps model paths to what hatch-shrinkray shipped for them before: a model
    whose bytes are that entry's ``shrunk_sha256`` passes through. A model with an entry in the
    plan file gets that plan. ``keep_failed`` (``check`` only, which ships nothing) writes models
    that fail verification too; they are never cached. ``tree`` lists the other files of the
    archive (by default: the files under ``root``), for the models that read a shrunk model's
    external data too (see ``datafiles``).
    """
    with progress.task("models", total=len(config.models)) as counted:
        return _ship_models(config, root, workdir, Sanitized(app), manifest_in, keep_failed=keep_failed, tree=tree,
                            counted=counted)


def _ship_models(config: HookConfig, root: Path, workdir: Path, app: Display,
                 manifest_in: Mapping[str, ManifestEntry], *, keep_failed: bool, tree: Tree | None,
                 counted: progress.Step) -> list[Shipped]:
    cache = _open_cache(config, app)
    readers = Readers(tree or ProjectTree(root))
    sidecars_of: dict[str, tuple[str, ...]] = {}
    shipped: list[Shipped] = []
    generated: list[str] = []
    weak: list[str] = []
    unverified: dict[Path | None, list[str]] = {}
    """The ``inputs`` of the models kept original (their record advice) -> those models."""
    start = time.perf_counter()
    for index, configured in enumerate(config.models):
        counted.at(index, configured.relpath)
        model = configured
        source = root / model.relpath
        target = workdir / model.relpath
        sha256 = _read_sha256(root, model)
        size = source.stat().st_size
        if config.ships_originals:
            app.display_success(f"{PREFIX} {model.relpath}: sdist = \"original\"; shipping as-is ({human(size)})")
            shipped.append(Shipped(model.relpath, "pass-through", size, size, ((model.relpath, source),)))
            continue
        if passes_through(model, sha256, manifest_in):
            entry = manifest_in[model.relpath]
            _pass_through(model.relpath, entry, source, target, sha256=sha256, workdir=workdir, cache=cache)
            app.display_success(f"{PREFIX} {model.relpath}: already shrunk (manifest match); shipping as-is "
                                f"({human(size)})")
            shipped.append(Shipped(model.relpath, "pass-through", size, size, ((model.relpath, target),),
                                   entry=entry))
            continue
        model, plan = _planned(config, configured, sha256, app)
        if plan is not None and plan.ships_original:
            app.display_success(f"{PREFIX} {fix_line(model.relpath, plan, model.options, size)}")
            shipped.append(Shipped(model.relpath, "kept-original", size, size, ((model.relpath, source),)))
            continue
        app.display_waiting(f"{PREFIX} {model.relpath} ({human(size)}): {model.options.method}...")
        try:
            sidecars = _sidecars(source, model.relpath)
            with writing_to(workdir):
                target.parent.mkdir(parents=True, exist_ok=True)
                record, outcome = _shrink_one(model, _content_sha256(sha256, _hashes(root, sidecars.values())),
                                              root, target, sidecars, cache=cache, app=app, keep_failed=keep_failed,
                                              model_file_sha256=sha256)
        except ShrinkrayError as exc:
            if exc.path and Path(exc.path) == source:
                exc.path = model.relpath  # the path the user wrote, not the build's absolute one
            if isinstance(exc, OptionError):
                exc.name_options(model.names)
            if isinstance(exc, PlanError):
                exc.name_plan(config.plan_file.name if config.plan_file is not None else PLAN_NAME)
            raise
        if record is None:  # already quantized: reported, shipped as it is, nothing claimed about it
            shipped.append(Shipped(model.relpath, outcome, size, size, ((model.relpath, source),)))
            continue
        if outcome in ("unchanged", "kept-original"):
            why = record.kept_original or f"nothing to shrink: {_why_unchanged(model.options)}"
            if outcome == "kept-original":
                app.display_warning(kept_line(model.relpath, why))
                app.display_debug(f"{PREFIX} {model.relpath}: original kept: {why}")
                inputs = model.options.verify.inputs if model.options.verify is not None else None
                unverified.setdefault(inputs, []).append(model.relpath)
            else:
                app.display_warning(f"{PREFIX} {model.relpath}: {why}; shipping the original")
            shipped.append(Shipped(model.relpath, outcome, size, size, ((model.relpath, target),), entry=record.entry))
            continue
        files = [(model.relpath, target)]
        files += [((PurePosixPath(model.relpath).parent / data.name).as_posix(), data)
                  for data in (_data_files_beside(target) if outcome == "shrunk" else ())]  # never cached
        sidecars_of[model.relpath] = tuple(sidecars.values())
        app.display_success(_success_line(model.relpath, record, outcome == "cached"))
        app.display_debug(_detail_line(model.relpath, record, outcome == "cached"))
        if plan is not None:
            confirm_plan(model.relpath, plan, record.entry.shrunk_sha256, app)
        verified = record.entry.verification
        if verified is not None and verified.get("real_inputs") is False:
            generated.append(model.relpath)
        elif verified is not None and (verified.get("evidence") or {}).get("weak"):
            # A plan fitted on one half is verified on the other: weak there is not "nothing fitted".
            fitted = " kept:" in str(verified.get("fitting", ""))
            weak.append(f"{model.relpath} (its fitted choice was judged on the held-out units only)" if fitted
                        else model.relpath)
        for note in (record.entry.verification or {}).get("notes", []):  # e.g. no recording of this model
            app.display_warning(f"{PREFIX} {model.relpath}: {note}")
        shipped.append(Shipped(model.relpath, outcome, record.original_size, record.shrunk_size, tuple(files),
                               entry=record.entry))
    counted.at(len(config.models), "")
    shipped = _drop_obsolete_data(shipped, sidecars_of, readers, app)
    for inputs, models in unverified.items():  # one line per record command, however many models it concerns
        app.display_warning(f"{PREFIX} {', '.join(models)}: {record_advice(root, inputs, models=len(models))}")
    if generated:
        app.display_warning(f"{PREFIX} {', '.join(generated)}: verified on generated inputs only, a smoke check; "
                            f"{record_hint()}")
    if weak:
        app.display_warning(f"{PREFIX} {', '.join(weak)}: verified on fewer than {MIN_UNITS} independent units "
                            "(streams, test cases, calls): weak evidence; record more of the program's real use "
                            "(below that, nothing is fitted to the recording)")
    app.display_success(_total_line(shipped, time.perf_counter() - start))
    return shipped


def _drop_obsolete_data(shipped: list[Shipped], sidecars_of: Mapping[str, tuple[str, ...]], readers: Readers,
                        app: Display) -> list[Shipped]:
    """Each shrunk model's original data files, marked obsolete (left out of the archive) unless
    a model that ships its original bytes (not configured, passed through, unchanged) reads them;
    a shipped file that would take such a data file's place is refused."""
    replaced = {s.relpath for s in shipped if s.new_bytes}
    kept_as_is = {s.relpath for s in shipped if not s.new_bytes}
    out = []
    for model in shipped:
        obsolete, written = [], {rel for rel, _ in model.files}
        for rel in sorted(written - {model.relpath} if model.new_bytes else ()):
            clash = sorted(readers.of(rel) - replaced)
            if clash:
                raise ShrinkrayError(f"the shrunk model's data file {rel} would replace the file of that name, which "
                                     f"{clash[0]} reads", path=model.relpath,
                                     hint=f"configure {clash[0]} too, or rename its data file")
        for data in sidecars_of.get(model.relpath, ()):
            still = sorted(readers.of(data) - replaced)
            if still:
                why = "is configured but ships its original bytes" if still[0] in kept_as_is else "is not configured"
                app.display_warning(f"{PREFIX} {model.relpath}: {data} stays in the archive ("
                                    f"{human(readers.tree.size(data))}): {still[0]} reads it too and {why}; configure "
                                    f"{', '.join(still)} as well to leave it out")
            elif data not in written:
                obsolete.append(data)
        if obsolete:
            app.display_info(_left_out_line(model, obsolete, written, readers))
        out.append(replace(model, obsolete=tuple(obsolete)))
    return out


def _left_out_line(model: Shipped, obsolete: list[str], written: set[str], readers: Readers) -> str:
    """Says which of the original's data files the archive no longer holds, and where the shrunk
    model keeps its weights instead (nothing leaves an archive without a line)."""
    files = ", ".join(f"{data} ({human(readers.tree.size(data))})" for data in obsolete)
    own = sorted(written - {model.relpath})
    where = f"in {', '.join(own)}" if own else "inside the model file"
    verb = "is" if len(obsolete) == 1 else "are"
    return (f"{PREFIX} {model.relpath}: {files}, the original's external data, {verb} left out of the archive: the "
            f"shrunk model holds its weights {where}")


def _pass_through(relpath: str, entry: ManifestEntry, source: Path, target: Path, *, sha256: str,
                  workdir: Path, cache: ShrinkCache | None) -> None:
    """Copy a manifest match into the work directory, checking it on the way (see manifest): its
    entry and structure always, and that onnxruntime loads it where onnxruntime is installed and
    the cache has not seen this onnxruntime load these bytes (the bytes checked are hashed again,
    so they are the bytes shipped)."""
    problem = pass_through_problem(source, entry)
    runtime = tool_versions()["onnxruntime"]
    if problem is None and onnxruntime_installed() and not (cache is not None and cache.loaded(sha256, runtime)):
        problem = load_problem(source)
        if problem is None and _read_sha256_of(source, relpath) != sha256:
            raise _changed(relpath)
        if problem is None and cache is not None:
            cache.note_loaded(sha256, runtime)
    if problem:
        raise ShrinkrayError(f"matches its entry in {MANIFEST_NAME} but {problem}; refusing to ship it",
                             path=relpath,
                             hint=f"rebuild the sdist, or delete {MANIFEST_NAME} to shrink from the original")
    with writing_to(workdir):
        target.parent.mkdir(parents=True, exist_ok=True)
        copied = copy_hashed(source, target)
    if copied != sha256:
        raise _changed(relpath)


def _read_sha256_of(path: Path, relpath: str) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise _changed(relpath) from exc


def _changed(relpath: str) -> ShrinkrayError:
    return ShrinkrayError("changed while the build was reading it; nothing was shipped or cached", path=relpath,
                          hint="wait until the model is completely written, then build again")


@contextlib.contextmanager
def writing_to(workdir: Path) -> Iterator[None]:
    """A full or unwritable work directory (TMPDIR) is a one-line error, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise ShrinkrayError(f"cannot write to the temporary directory {workdir}: {exc.strerror or exc}",
                             hint="free some space there or point TMPDIR elsewhere") from exc


def _why_unchanged(options: ShrinkOptions) -> str:
    if options.method == "dedup":
        return "no two weights are identical"
    why = f"no weight has min-elements ({options.min_elements}) elements or more"
    if options.exclude_tensors or options.exclude_ops:
        why += " outside exclude-tensors / exclude-ops"
    return why


def _open_cache(config: HookConfig, app: Display) -> ShrinkCache | None:
    if not config.cache:
        app.display_debug(f"{PREFIX} cache disabled (cache = false)")
        return None
    directory = config.cache_dir or default_cache_dir()
    problem = private_problem(directory)
    if problem:
        raise ShrinkrayError(f"the cache directory {directory} {problem}; whoever can write there chooses the "
                             "models your builds ship, so it is not used",
                             hint=f"chmod 700 {directory} if it is yours, point `cache` (or {CACHE_ENV}) at a "
                                  "directory of your own, or set `cache = false`")
    app.display_debug(f"{PREFIX} cache directory {directory}")
    return ShrinkCache(directory)


def _planned(config: HookConfig, model: ModelEntry, sha256: str, app: Display) -> tuple[ModelEntry, PlanEntry | None]:
    """``model`` with the plan the plan file holds for these bytes, if any (a plan found for other
    bytes of the same path means the model changed since: said, and not applied)."""
    name = config.plan_file.name if config.plan_file is not None else PLAN_NAME
    plan = config.plans.get(sha256)
    if plan is None:
        stale = [p for p in config.plans.values() if p.model == model.relpath]
        if stale:
            app.display_warning(f"{PREFIX} {model.relpath}: {name} holds a plan for other bytes of this model (it "
                                f"changed since it was checked); shipping {model.options.method} without it; run "
                                f"`{_again(stale[0])}` again")
        return model, None
    if plan.remedy is not None:
        if not plan.remedy.original:
            app.display_info(f"{PREFIX} {fix_line(model.relpath, plan, model.options)}")
        return replace(model, options=plan.apply(model.options)), plan
    listed = ", ".join(f"{t} {e}" for _, t, e in plan.tensors[:4]) + (" ..." if len(plan.tensors) > 4 else "")
    what = f"sets {len(plan.tensors)} tensor(s): {listed}" if plan.tensors else "keeps the method as configured"
    app.display_info(f"{PREFIX} {model.relpath}: the plan in {name} {what}")
    return replace(model, options=plan.apply(model.options)), plan


def fix_line(relpath: str, plan: PlanEntry, options: ShrinkOptions, size: int = 0) -> str:
    """What a build says of a model ``check --fix`` chose a remedy for, with the reason it recorded:
    ``m.onnx: int8 round-to-nearest, as check --fix chose (... regressed with the fitted codes)``."""
    assert plan.remedy is not None
    reason = plan.checked.get("reason")
    because = f" ({reason})" if isinstance(reason, str) and reason else ""
    if plan.remedy.original:
        return f"{relpath}: ships its original bytes ({human(size)}), as check --fix chose{because}"
    return f"{relpath}: {plan.remedy.describe(options, plan.tensors)}, as check --fix chose{because}"


def confirm_plan(relpath: str, plan: PlanEntry, shipped_sha256: str, app: Display) -> None:
    """Say whether these bytes are the very model ``check`` accepted."""
    accepted = plan.checked.get("shrunk_sha256")
    if accepted == shipped_sha256:
        verdict = str(plan.checked.get("verdict", ""))
        app.display_success(f"{PREFIX} {relpath}: this is the model `check` accepted ({verdict})")
    elif accepted:
        app.display_warning(f"{PREFIX} {relpath}: differs from the model `check` accepted (the options, inputs or "
                            "tool versions changed since): its tests did not judge these bytes; run "
                            f"`{_again(plan)}` again")
    else:
        app.display_warning(f"{PREFIX} {relpath}: the plan does not record which model `check` accepted, so nothing "
                            f"says its tests judged these bytes; run `{_again(plan)}` again")


def _again(plan: PlanEntry) -> str:
    """The check that made ``plan`` (``--fix`` or ``--search``), with the test command it recorded."""
    command = plan.checked.get("command")
    return check_hint(command if isinstance(command, str) and command else None,
                      fix=plan.remedy is not None)


def _shrink_one(model: ModelEntry, original_sha256: str, root: Path, target: Path, sidecars: Mapping[str, str], *,
                cache: ShrinkCache | None, app: Display, keep_failed: bool = False,
                model_file_sha256: str | None = None) -> tuple[CachedShrink | None, str]:
    """The record for ``model`` and the outcome: ``shrunk``, ``cached``, ``unchanged`` or
    ``kept-original`` (bytes at ``target``; unchanged = the original's, when no weight qualified or
    the result was not smaller; kept-original = the original's, when generated inputs could not
    verify the result), or ``already-quantized`` (no record; ship the original).

    ``original_sha256`` (hashed before) only looks the cache up; what is stored and recorded is
    keyed by the digests of the bytes the engine actually read. An unchanged model is recorded
    with ``shrunk_sha256 == original_sha256``, in the manifest (so a wheel built from the sdist
    passes it through) and in the cache (so it is not re-verified). ``keep_failed`` (``check``)
    keeps a model that fails verification on real inputs; it is never cached.
    """
    source = root / model.relpath
    versions = tool_versions()
    if cache is not None:
        key = cache_key(original_sha256, model.options, versions)
        hit = cache.get(key, original_sha256)
        if hit is None and not engine_installed():  # what this hatch-shrinkray made with any engine
            key = engine_free_key(original_sha256, model.options)
            hit = cache.latest(key, original_sha256)
        if hit is not None and _take_cached(hit, target, key, model.relpath, app, original=model_file_sha256,
                                            cache=cache, runtime=versions["onnxruntime"]):
            if hit[1].unverified:
                return hit[1], "kept-original"
            # the model file's own bytes (its content digest covers its data files too): nothing shrunk
            unchanged = hit[1].entry.shrunk_sha256 in (original_sha256, model_file_sha256) \
                or hit[1].kept_original is not None
            return hit[1], "unchanged" if unchanged else "cached"
    try:
        from hatch_shrinkray.engine import shrink  # heavy: onnx, onnxruntime, numpy
    except ModuleNotFoundError as exc:
        raise engine_missing(exc) or exc from exc

    try:
        result = shrink(source, target, model.options, keep_failed=keep_failed)
    except AlreadyQuantizedError as exc:
        app.display_warning(f"{PREFIX} {model.relpath}: {exc.message}; shipping it unchanged")
        return None, "already-quantized"
    (_, model_sha256), *data = result.source_sha256.items()
    read = _content_sha256(model_sha256, {sidecars.get(path, path): digest for path, digest in data})
    if result.external_data:
        cache = None  # an entry is one file; outputs over 2 GB (model + data file) are not cached
    for tensor in result.tensors:
        app.display_debug(f"{PREFIX}   {tensor.name} {list(tensor.shape)} {tensor.encoding} "
                          f"{human(tensor.original_bytes)} -> {human(tensor.stored_bytes)}")
    unchanged = not result.encoded
    if unchanged:  # ship the original's exact bytes, as hashed now (the engine re-serialized them)
        shrunk_sha256 = copy_hashed(source, target)
        if shrunk_sha256 != model_sha256:
            raise _changed(model.relpath)
    else:
        shrunk_sha256 = file_sha256(target)
    verification = None if unchanged else result.verification
    record = CachedShrink(
        entry=ManifestEntry(original_sha256=read, shrunk_sha256=shrunk_sha256,
                            method=model.options.method, options=portable_options(model.options, root),
                            versions=versions,
                            verification=None if verification is None
                            else _portable(verification.to_dict(), root)),
        original_size=result.original_size, shrunk_size=result.original_size if unchanged else result.shrunk_size,
        seconds=result.seconds,
        summary=None if verification is None else
        verification.summary() + ("" if verification.passed else "; FAILS verification (kept for check only)"),
        kept=result.kept_summary(), kept_original=result.kept_original, unverified=result.unverified,
        sizes=None if result.original_sizes is None or result.shrunk_sizes is None or unchanged else
        (result.original_sizes, result.shrunk_sizes),
        verdict="" if verification is None else verification.brief())
    if cache is not None and (verification is None or verification.passed):
        key = cache_key(read, model.options, versions)
        problem = cache.put(key, target, record, alias=engine_free_key(read, model.options))
        if problem:
            app.display_debug(f"{PREFIX} could not write the cache entry: {problem}")
        elif verification is not None:  # onnxruntime just loaded and ran these bytes
            cache.note_loaded(shrunk_sha256, versions["onnxruntime"])
    return record, "kept-original" if result.unverified else "unchanged" if unchanged else "shrunk"


def _take_cached(hit: tuple[Path, CachedShrink], target: Path, key: str, relpath: str, app: Display, *,
                 original: str | None, cache: ShrinkCache, runtime: str) -> bool:
    """Copy a cache entry's model to ``target`` if it is what its record says and onnxruntime
    loads it (unless it is byte for byte the model file itself, ``original``: a model with nothing
    to shrink, which ships as the user gave it, or the cache saw this onnxruntime load these very
    bytes); otherwise say why, and the model is shrunk again (and the entry rewritten)."""
    path, record = hit
    copied = copy_hashed(path, target)
    known = copied == original or cache.loaded(copied, runtime)
    problem = "its bytes changed while they were read" if copied != record.entry.shrunk_sha256 \
        else None if known else load_problem(target)
    if problem is None and not known and onnxruntime_installed():
        cache.note_loaded(copied, runtime)
    if problem:
        app.display_warning(f"{PREFIX} {relpath}: cache entry {key[:16]} is not used ({problem}); shrinking again")
        target.unlink(missing_ok=True)
        return False
    app.display_debug(f"{PREFIX} cache hit {key[:16]} for {relpath}")
    return True


def _content_sha256(model_sha256: str, sidecars: Mapping[str, str]) -> str:
    """The model file's sha256, extended with its external-data files' (project-relative path ->
    sha256) so that retrained weights in ``a.onnx.data`` (same ``a.onnx``) never hit a stale
    cache entry."""
    if not sidecars:
        return model_sha256
    digest = hashlib.sha256(model_sha256.encode())
    for rel in sorted(sidecars):
        digest.update(b"\0" + rel.encode() + b"\0" + sidecars[rel].encode())
    return digest.hexdigest()


def _hashes(root: Path, relpaths: Iterable[str]) -> dict[str, str]:
    return {rel: file_sha256(root / rel) for rel in relpaths}


def _data_files_beside(target: Path) -> list[Path]:
    """The shrunk model's own data file (outputs over 2 GB only), written beside it."""
    from hatch_shrinkray.onnxgraph.modelio import data_file_name

    data = target.with_name(data_file_name(target))
    return [data] if data.is_file() else []


def _sidecars(source: Path, relpath: str) -> dict[str, str]:
    """The original's external-data files: absolute path (as the engine names them) ->
    project-relative path (ShrinkrayError for a corrupt model or a missing/escaping data file)."""
    if external_data_refs(source) == {}:  # read without onnx: most models have no data file
        return {}
    from hatch_shrinkray.onnxgraph.modelio import external_data_files

    parent = PurePosixPath(relpath).parent
    here = source.parent.resolve()
    return {str(p): (parent / p.name).as_posix() if p.parent == here
            else (parent / os.path.relpath(p, here)).as_posix()
            for p in sorted(external_data_files(source))}


def portable_options(options: ShrinkOptions, root: Path) -> dict[str, Any]:
    """``options.describe()`` with the inputs path relative to the project (see ``_portable``)."""
    described = options.describe()
    verify = described.get("verify")
    if isinstance(verify, dict):
        described["verify"] = _portable(verify, root)
    return described


def _portable(record: dict[str, Any], root: Path) -> dict[str, Any]:
    """``record`` with an absolute ``inputs`` path under ``root`` made project-relative, so
    manifests written from a checkout and from a copy elsewhere are identical and leak no paths."""
    inputs = record.get("inputs")
    if isinstance(inputs, str) and Path(inputs).is_absolute() and Path(inputs).is_relative_to(root):
        return {**record, "inputs": PurePosixPath(Path(inputs).relative_to(root)).as_posix()}
    return record


def _success_line(relpath: str, record: CachedShrink, cached: bool) -> str:
    """The model's one line: sizes, method and the verdict in words (``_detail_line`` has the figures)."""
    verdict = record.verdict or ("not verified" if record.summary is None else record.summary)
    timing = "cached" if cached else f"{record.seconds:.1f} s"
    return f"{PREFIX} " + model_line(relpath, record.original_size, record.shrunk_size, record.entry.method,
                                     verdict, tail=timing)


def _detail_line(relpath: str, record: CachedShrink, cached: bool) -> str:
    """What ``-v`` adds under the model's line: the compressed sizes, the verification's figures and
    the guard's comparison, what stayed float, and the time a cache hit saved."""
    parts = [size_change(*record.sizes)] if record.sizes is not None else []
    parts.append(record.summary or f"not verified ({setting('verify', False)})")
    parts += [record.kept] if record.kept else []
    parts += [f"cached: {record.seconds:.1f} s saved"] if cached else []
    return f"{PREFIX} {relpath}: " + "; ".join(parts)


OUTCOME_WORDS = {"shrunk": "shrunk", "cached": "cached", "pass-through": "pass-through",
                 "kept-original": "kept original", "unchanged": "unchanged", "already-quantized": "already-quantized"}
"""The outcomes in the order the total line counts them."""


def _total_line(shipped: list[Shipped], seconds: float) -> str:
    """``total 3 models (1 shrunk, 2 kept original): 6 MB -> 3 MB (50.0%) in 2.1 s``; when no model
    was shrunk (now, from the cache, or before: a pass-through), it says so first."""
    before = sum(s.original_size for s in shipped)
    after = sum(s.shipped_size for s in shipped)
    counts = {o: sum(s.outcome == o for s in shipped) for o in OUTCOME_WORDS}
    plural = "s" if len(shipped) != 1 else ""
    if shipped and not any(counts[o] for o in ("shrunk", "cached", "pass-through")):
        parts = []
        if counts["kept-original"]:
            n = counts["kept-original"]
            parts.append(f"{n} kept {'their' if n != 1 else 'its'} original (the lines above say why)")
        parts += [f"{n} {OUTCOME_WORDS[o]}" for o, n in counts.items() if n and o != "kept-original"]
        return (f"{PREFIX} total {len(shipped)} model{plural}: no model was shrunk: {', '.join(parts)}; "
                f"{human(before)} in {seconds:.1f} s")
    detail = ", ".join(f"{n} {OUTCOME_WORDS[o]}" for o, n in counts.items() if n)
    ratio = f" ({100 * after / before:.1f}%)" if before else ""
    return (f"{PREFIX} total {len(shipped)} model{plural} ({detail}): {human(before)} -> {human(after)}"
            f"{ratio} in {seconds:.1f} s")


def kept_line(relpath: str, why: str) -> str:
    """The one short line for a model whose original ships because generated inputs could not
    verify it: why, without its figures (``-v`` has them; the record command follows the models)."""
    cut = min((i for i in (why.find(" ("), why.find(": ")) if i > 0), default=len(why))
    return f"{PREFIX} {relpath}: original kept: {why[:cut]}"
