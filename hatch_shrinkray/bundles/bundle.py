"""``hatch-shrinkray bundle``: the models of a directory tree shrunk in place, or into a copy.

Each configured model goes through exactly what the Hatch hook and ``wheel`` do
(``shipping.ship``: engine, options, recordings, cache, fallbacks, the lines it prints), with the
tree's own files as the archive's (``datafiles``: external data, weights two models share). What
the tree says about the models follows them: the pins of their digests in the package's text
files (``pins``), every installed distribution's ``RECORD`` that lists a changed file
(``records``), and the manifest at the tree's root (``.shrinkray-manifest.json``), through which a
second run ships the same bytes without shrinking again. All of it is written by ``commit``:
a killed run leaves each file original or complete, and the next run finishes the job.

With ``-o OUT`` the tree is copied beside ``OUT`` first and moved there when complete. A check
runs a command (the app's self-test, the package's tests) on the original tree and on the shrunk
one; a test or exit status that regresses undoes everything.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from hatch_shrinkray.bundles.commit import Change, apply, locked, recover, remove_leftovers
from hatch_shrinkray.bundles.records import Records, read_records
from hatch_shrinkray.bundles.tree import Inventory, scan, through_links
from hatch_shrinkray.capture.observe import Observed, observe
from hatch_shrinkray.capture.swap import Instructions
from hatch_shrinkray.checking.check import Settings, looks_like_pytest, require_success, shown
from hatch_shrinkray.checking.verdict import Verdict, judge
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.config import HookConfig
from hatch_shrinkray.shipping.datafiles import ProjectTree
from hatch_shrinkray.shipping.display import PREFIX, Display, writing_to
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, load_manifest, render
from hatch_shrinkray.shipping.outcome import Shipped
from hatch_shrinkray.shipping.pins import MAX_FILES, SUFFIXES, Member, report_pins, shrunk_models
from hatch_shrinkray.shipping.ship import ship_models
from hatch_shrinkray.signals import deferred

STAGING = ".shrinkray-"
"""A copy being made beside ``OUT`` is ``.<OUT's name>.shrinkray-<pid>-<random>``."""


@dataclass(frozen=True)
class Check:
    """A command run on the original tree and again on the shrunk one (``check -- COMMAND``)."""

    command: tuple[str, ...]
    timeout: float | None = None


@dataclass(frozen=True)
class Bundled:
    """What one run did: where, what each model became, which RECORDs it rewrote, the check's verdict."""

    destination: Path
    shipped: tuple[Shipped, ...]
    changed: int
    """Files replaced or removed (models, their data files, pinned files, RECORDs, the manifest)."""
    records: tuple[str, ...]
    verdict: Verdict | None = None


def bundle(source: Path, destination: Path | None, configure: Callable[[Path], HookConfig], app: Display, *,
           force: bool = False, check: Check | None = None) -> Bundled:
    """Shrink the models of the tree at ``source`` in place (``destination`` None) or into a new tree
    at ``destination`` (replacing one there only with ``force``). ``configure`` turns a tree's root
    into the configuration (its globs match paths in the tree)."""
    if destination is None:
        with locked(source):
            return _in_place(source, configure, app, check)
    return _copied(source, destination, configure, app, force=force, check=check)


def _in_place(root: Path, configure: Callable[[Path], HookConfig], app: Display, check: Check | None) -> Bundled:
    said = recover(root)
    if said:
        app.display_warning(f"{PREFIX} {root}: {said}")
    remove_leftovers(root, scan(root).leftovers)
    before = _run(check, check.command if check else (), "run 1 of 2, with the original tree", app)
    return _prepare(root, configure, app, lambda changes: _commit(root, changes, check, before, app))


def _commit(root: Path, changes: Sequence[Change], check: Check | None, before: Observed | None,
            app: Display) -> Verdict | None:
    applied = apply(root, changes, keep=check is not None)
    if applied is None or check is None or before is None:
        return None
    try:
        verdict = judge(before, _observe(check, check.command, "run 2 of 2, with the shrunk tree", app))
    except BaseException:
        applied.undo()
        raise
    applied.commit() if verdict.passed else applied.undo()
    return verdict


def _copied(source: Path, destination: Path, configure: Callable[[Path], HookConfig], app: Display, *,
            force: bool, check: Check | None) -> Bundled:
    _refuse_overlap(source, destination, force)
    _remove_stale_copies(destination)
    second = _retarget(check.command, source, destination) if check else ()
    before = _run(check, check.command if check else (), "run 1 of 2, with the original tree", app)
    with _staging(destination) as staging:
        _copy_tree(source, staging)
        recover(staging)  # a stopped in-place run of the source is finished in the copy
        remove_leftovers(staging, scan(staging).leftovers)

        def finish(changes: Sequence[Change]) -> Verdict | None:
            apply(staging, changes)
            with _moved_into_place(staging, destination) as undo:
                if check is None or before is None:
                    return None
                verdict = judge(before, _observe(check, second, "run 2 of 2, with the shrunk tree", app))
                if not verdict.passed:
                    undo()
                return verdict

        bundled = _prepare(staging, configure, app, finish)
    return Bundled(destination, bundled.shipped, bundled.changed, bundled.records, bundled.verdict)


def _prepare(root: Path, configure: Callable[[Path], HookConfig], app: Display,
             commit: Callable[[Sequence[Change]], Verdict | None]) -> Bundled:
    """Ship every configured model of the tree at ``root`` into a work directory, work out every file
    that changes with them, and hand the changes to ``commit``."""
    inventory = scan(root)
    config = through_links(configure(root), root, app)
    manifest_path = root / MANIFEST_NAME
    manifest = load_manifest(manifest_path) if manifest_path.is_file() else {}
    records = read_records(root, inventory.records)
    with _work_directory() as work:
        shipped = _ship(config, root, work / "models", app, manifest)
        replace: dict[str, Path] = {rel: path for m in shipped if m.new_bytes for rel, path in m.files}
        leaving = {rel for m in shipped for rel in m.obsolete}
        members = _members(root, shipped, records, inventory)
        replace.update({f.file: f.path for f in report_pins(members, shrunk_models(shipped, root),
                                                            config.pins == "rewrite", work / "pins", app)})
        rewritten = records.rewritten({_real(root, rel): new for rel, new in replace.items()}
                                      | {_real(root, rel): None for rel in leaving})
        _say_shared(root, records, replace, app)
        with writing_to(work):
            for record, text in rewritten.items():
                path = work / "records" / record
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="")
                replace[record] = path
            entries = _manifest(root, manifest, shipped)
            listing = render(entries) if entries else None
            if listing is not None and (not manifest_path.is_file() or manifest_path.read_text("utf-8") != listing):
                (work / MANIFEST_NAME).write_text(listing, encoding="utf-8", newline="\n")
                replace[MANIFEST_NAME] = work / MANIFEST_NAME
        changes = [Change(rel, path) for rel, path in sorted(replace.items())]
        changes += [Change(rel, None) for rel in sorted(leaving - replace.keys())]
        verdict = commit(changes) if changes else None
    return Bundled(root, tuple(shipped), len(changes), tuple(sorted(rewritten)), verdict)


def _ship(config: HookConfig, root: Path, work: Path, app: Display,
          manifest: Mapping[str, ManifestEntry]) -> list[Shipped]:
    """``ship_models`` over the tree. A tree is not a project whose author chose each model: a file
    the engine cannot take (a runtime's test model that onnx's checker rejects, a damaged file) is
    left as it is with one line, and the others ship, unless its options say ``strict``."""
    left: list[Shipped] = []
    app = _Once(app)  # a second attempt says nothing the first said
    start = time.perf_counter()
    while True:
        try:
            shutil.rmtree(work, ignore_errors=True)
            shipped = [*ship_models(config, root, work, app, manifest, tree=ProjectTree(root), total=False), *left]
            app.display_success(wording.total_line(shipped, time.perf_counter() - start))
            return shipped
        except ShrinkrayError as exc:
            model = next((m for m in config.models if m.relpath == exc.path), None)
            if model is None or model.options.strict:
                raise
            app.display_warning(wording.left_as_is_line(model.relpath, exc.message))
            app.display_debug(f"{PREFIX} {exc}")
            size = (root / model.relpath).stat().st_size
            left.append(Shipped(model.relpath, "unchanged", size, size))
            config = replace(config, models=tuple(m for m in config.models if m is not model))


class _Once:
    """A display that says each line once."""

    def __init__(self, app: Display) -> None:
        self.app, self.said = app, set[str]()

    def _new(self, message: str) -> bool:
        fresh = message not in self.said
        self.said.add(message)
        return fresh

    def display_info(self, message: str = "") -> None:
        if self._new(message):
            self.app.display_info(message)

    def display_waiting(self, message: str = "") -> None:
        if self._new(message):
            self.app.display_waiting(message)

    def display_success(self, message: str = "") -> None:
        if self._new(message):
            self.app.display_success(message)

    def display_warning(self, message: str = "") -> None:
        if self._new(message):
            self.app.display_warning(message)

    def display_debug(self, message: str = "", level: int = 1) -> None:
        if self._new(message):
            self.app.display_debug(message, level)


def _manifest(root: Path, before: Mapping[str, ManifestEntry], shipped: Sequence[Shipped]) -> dict[str, ManifestEntry]:
    """The tree's manifest after this run: what it ships shrunk (now, from the cache or before) by
    path, and the earlier entries of models this run did not select whose files still hold them."""
    entries = {rel: e for rel, e in before.items() if _holds(root / rel, e.shrunk_sha256)}
    for model in shipped:
        if model.entry is not None and (model.new_bytes or model.outcome == "pass-through"):
            entries[model.relpath] = model.entry
        else:
            entries.pop(model.relpath, None)
    return dict(sorted(entries.items()))


def _holds(path: Path, sha256: str) -> bool:
    try:
        return path.is_file() and file_sha256(path) == sha256
    except OSError:
        return False


def _members(root: Path, shipped: Sequence[Shipped], records: Records, inventory: Inventory) -> list[Member]:
    """The text files that may pin a changed model's digest: the files of the distributions that
    list it, else those under the directory above the model's (its package, in an app folder)."""
    names: set[str] = set()
    for model in shipped:
        if not model.new_bytes:
            continue
        listed = records.of(_real(root, model.relpath))
        for entry in listed:
            base = (root / entry.record).parent.parent
            names.update(_relative(root, base / row[0]) for row in records.rows[entry.record] if row)
        if not listed:
            top = root / PurePosixPath(model.relpath).parent.parent
            names.update(_relative(root, p) for p in sorted(top.rglob("*"))[:MAX_FILES] if p.is_file())
    names.discard("")
    members: list[Member] = []
    for name in sorted(names):
        path = root / name
        if PurePosixPath(name).suffix.lower() in SUFFIXES and path.is_file() and not path.is_symlink():
            members.append((name, path.stat().st_size, path.read_bytes))
    return members[:MAX_FILES]


def _say_shared(root: Path, records: Records, replace: Mapping[str, Path], app: Display) -> None:
    """One line per changed file that more than one installed distribution lists."""
    for rel in sorted(replace):
        listed = records.of(_real(root, rel))
        if len({entry.record for entry in listed}) > 1:
            app.display_info(wording.shared_record_line(rel, [entry.distribution for entry in listed]))


def _real(root: Path, relpath: str) -> Path:
    return Path(os.path.realpath(root / relpath))


def _relative(root: Path, path: Path) -> str:
    """``path`` (a RECORD row may leave its directory) as a real path relative to the tree, or ""."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return real.relative_to(top).as_posix() if real.is_relative_to(top) else ""


def _run(check: Check | None, command: Sequence[str], which: str, app: Display) -> Observed | None:
    """The check's first run (on the original tree), refused when the command fails there without
    saying which test failed: then nothing the shrunk tree does could be blamed on the models."""
    if check is None:
        return None
    observed = _observe(check, command, which, app)
    require_success(observed, Settings(tuple(command), looks_like_pytest(command)))
    return observed


def _observe(check: Check, command: Sequence[str], which: str, app: Display) -> Observed:
    app.display_info(wording.check_run_line(which, shown(command)))
    # Nothing is swapped: the files on disk are what is judged (a frozen app's interpreter takes no
    # instruction from outside, so only its exit status and its pytest outcomes, if any, speak).
    return observe(command, lambda reports: Instructions("original", False, 0.5, reports, ()),
                   timeout=check.timeout)


def _retarget(command: Sequence[str], source: Path, destination: Path) -> tuple[str, ...]:
    """``command`` with every argument that names a path under ``source`` naming the same path under
    ``destination`` (the second run judges the shrunk copy); refused when none does."""
    top = Path(os.path.abspath(source))
    out: list[str] = []
    for arg in command:
        absolute = Path(os.path.abspath(arg)) if arg and not arg.startswith("-") else None
        if absolute is not None and absolute.is_relative_to(top):
            rest = absolute.relative_to(top)
            out.append(str(destination / rest) if rest.parts else str(destination))
        else:
            out.append(arg)
    if tuple(out) == tuple(command):
        raise ShrinkrayError(f"the command names nothing under {source}, so its second run could not judge the "
                             f"shrunk copy in {destination}",
                             hint=f"name the app by its path inside {source} (e.g. -- {source}/app ARGS), or use "
                                  "--in-place")
    return tuple(out)


def _refuse_overlap(source: Path, destination: Path, force: bool) -> None:
    src, out = Path(os.path.realpath(source)), Path(os.path.realpath(destination))
    if out == src or out.is_relative_to(src) or src.is_relative_to(out):
        raise ShrinkrayError(f"the output {destination} and the input {source} overlap", path=str(destination),
                             hint="choose an -o directory outside the input, or use --in-place")
    if (destination.exists() or destination.is_symlink()) and not force:
        raise ShrinkrayError("the output exists", path=str(destination), hint="use --force to replace it")
    if destination.exists() and not destination.is_dir():
        raise ShrinkrayError("the output exists and is not a directory", path=str(destination),
                             hint="choose another -o directory")


def _remove_stale_copies(destination: Path) -> None:
    """Copies a killed run left beside ``destination`` (its process is gone): never finished, never used."""
    parent = destination.parent
    prefix = f".{destination.name}{STAGING}"
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if entry.name.startswith(prefix) and not _alive(entry.name[len(prefix):].partition("-")[0]):
                shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _staging(destination: Path) -> Iterator[Path]:
    """A new directory beside ``destination`` (its file system), removed however the run ends unless
    it was moved into place."""
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        with deferred():
            staging = destination.parent / f".{destination.name}{STAGING}{os.getpid()}-{secrets.token_hex(4)}"
            staging.mkdir()
    except OSError as exc:
        raise ShrinkrayError(f"cannot create the output directory: {exc.strerror or exc}", path=str(destination),
                             hint="choose a writable -o directory") from exc
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_tree(source: Path, staging: Path) -> None:
    """``source``'s files into ``staging``, links as links, permissions and times kept."""
    try:
        shutil.copytree(source, staging, symlinks=True, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        first = exc.args[0][0] if isinstance(exc, shutil.Error) and exc.args and exc.args[0] else exc
        raise ShrinkrayError(f"cannot copy the tree: {first}", path=str(source),
                             hint="make every file of it readable and free some space beside the output") from exc


@contextlib.contextmanager
def _moved_into_place(staging: Path, destination: Path) -> Iterator[Callable[[], None]]:
    """Rename the finished copy to ``destination`` (an existing one is set aside until the block
    ends, and is put back by the ``undo`` it yields, or when the block fails)."""
    aside = destination.with_name(f".{destination.name}{STAGING}{os.getpid()}-old")
    had = destination.exists()
    with deferred():
        if had:
            os.replace(destination, aside)
        os.replace(staging, destination)
    undone = False

    def undo() -> None:
        nonlocal undone
        with deferred():
            os.replace(destination, staging)
            if had:
                os.replace(aside, destination)
        undone = True

    try:
        yield undo
    except BaseException:
        if not undone:
            undo()
        raise
    if had and not undone:
        shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _work_directory() -> Iterator[Path]:
    try:
        with deferred():
            work = Path(tempfile.mkdtemp(prefix="hatch-shrinkray-bundle-"))
    except OSError as exc:
        raise ShrinkrayError(f"cannot create a temporary directory: {exc.strerror or exc}",
                             hint="point TMPDIR at a writable directory") from exc
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
