"""``hatch-shrinkray wheel``: shrink the models inside a wheel that any backend built.

The configuration's ``models`` globs select entries of the wheel (matched against an empty
placeholder per entry, so they mean what they mean in a project); only the selected models, the
data files they read and the other models beside them are unpacked into a temporary directory.
Each selected model then goes through exactly what the Hatch hook does (``shipping.ship``: same
engine, options, cache and report lines), and the archive is written anew: every other entry is
copied as it is stored (no temporary copy, so the space needed is about the models'), with the
shipped bytes and a fresh ``RECORD``. A model whose bytes a manifest of the project lists as
shipped by hatch-shrinkray passes through without the engine, and one that is already quantized
(our own decode pattern included) is reported and kept. Nothing is left behind when a model fails
verification: the output wheel only appears once every model passed.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import temporary_prefix
from hatch_shrinkray.shipping.config import HookConfig
from hatch_shrinkray.shipping.datafiles import Readers
from hatch_shrinkray.shipping.display import PREFIX, Display, writing_to
from hatch_shrinkray.shipping.manifest import ManifestEntry, file_sha256
from hatch_shrinkray.shipping.outcome import Shipped
from hatch_shrinkray.shipping.pins import report_pins, shrunk_models
from hatch_shrinkray.shipping.ship import ship_models
from hatch_shrinkray.signals import deferred
from hatch_shrinkray.wheels.archive import Wheel, extract, head, open_wheel, write_wheel, written_beside

ONNX_START = b"\x08"
"""What a serialized ModelProto starts with (field 1, ir_version, as every exporter writes it
first): an entry that does not is not unpacked to look for external-data references."""


class WheelTree:
    """A wheel's entries as files under ``root``: empty placeholders, filled in with an entry's
    bytes only when something reads it (:meth:`materialize`)."""

    def __init__(self, wheel: Wheel, root: Path, archive: zipfile.ZipFile) -> None:
        self.root, self.archive = root, archive
        self.infos = {i.filename: i for i in wheel.entries}
        self._real: set[str] = set()
        for name in self.infos:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def files_in(self, directory: str) -> list[str]:
        prefix = f"{directory}/" if directory else ""
        return sorted(n for n in self.infos if n.startswith(prefix) and "/" not in n[len(prefix):])

    def materialize(self, relpath: str) -> Path:
        if relpath not in self._real and relpath in self.infos:
            extract(self.archive, self.infos[relpath], self.root / relpath)
            self._real.add(relpath)
        return self.root / relpath

    def fetch(self, relpath: str) -> Path | None:
        if relpath not in self._real and head(self.archive, self.infos[relpath], len(ONNX_START)) != ONNX_START:
            return None
        return self.materialize(relpath)

    def size(self, relpath: str) -> int:
        info = self.infos.get(relpath)
        return 0 if info is None else info.file_size


@dataclass(frozen=True)
class Rewritten:
    """One wheel's outcome: where it went and what each model became."""

    source: Path
    destination: Path
    shipped: tuple[Shipped, ...]
    changed: bool
    """Whether any entry changed; an unchanged wheel is copied byte for byte."""


def rewrite_wheel(source: Path, destination: Path, configure: Callable[[Path], HookConfig],
                  manifest: Mapping[str, ManifestEntry], app: Display) -> Rewritten:
    """Write ``source`` with its configured models shipped to ``destination`` (which may be
    ``source`` itself: the input is replaced only once the new wheel is complete).

    ``configure`` turns the directory of unpacked wheel files into the configuration (its globs
    match paths inside the wheel); ``manifest`` holds what hatch-shrinkray shipped before, by any
    path: a model with one of those ``shrunk_sha256`` passes through.
    """
    wheel = open_wheel(source)
    for name in wheel.duplicates:
        app.display_warning(f"{PREFIX} {source.name}: {name} is in the archive more than once, with the same bytes; "
                            "written once")
    root: Path | None = None
    stack = ExitStack()
    try:
        with deferred():  # a signal right after mkdtemp is delivered inside the try, which cleans up
            root = _work_directory()
        files, work = root / "files", root / "work"
        archive = stack.enter_context(zipfile.ZipFile(wheel.path))
        with writing_to(root):
            tree = WheelTree(wheel, files, archive)
            config = configure(files)
            for model in config.models:
                tree.materialize(model.relpath)
            matches = _by_content(config, files, manifest)
            readers = Readers(tree)
            for model in config.models:
                if model.relpath not in matches and not config.ships_originals:
                    for data in readers.refs(model.relpath):
                        tree.materialize(data)
        shipped = tuple(ship_models(config, files, work, app, matches, tree=tree))
        replace = {rel: path for model in shipped if model.new_bytes for rel, path in model.files}
        replace.update(_pins(archive, files, shipped, config, out=root / "pins", app=app))
        drop = frozenset(rel for model in shipped for rel in model.obsolete)
        changed = bool(replace or drop or wheel.duplicates)
        if changed:
            write_wheel(wheel, destination, replace, drop)
        elif destination.resolve() != source.resolve():
            with written_beside(destination) as tmp:
                shutil.copyfile(source, tmp)
    finally:
        stack.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    return Rewritten(source, destination, shipped, changed)


def _pins(archive: zipfile.ZipFile, files: Path, shipped: tuple[Shipped, ...], config: HookConfig, *, out: Path,
          app: Display) -> dict[str, Path]:
    """Where the wheel's other files pin a digest of a model it now ships shrunk: warned of, or with
    ``pins = "rewrite"`` their entries replaced by copies (under ``out``) that name the shrunk model."""
    models = shrunk_models(shipped, files)
    if not models:
        return {}
    members = [(i.filename, i.file_size, lambda i=i: archive.read(i)) for i in archive.infolist() if not i.is_dir()]
    return {f.file: f.path for f in report_pins(members, models, config.pins == "rewrite", out, app)}


def _work_directory() -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=temporary_prefix("wheel")))
    except OSError as exc:
        raise ShrinkrayError(f"cannot create a temporary directory: {exc}",
                             hint="point TMPDIR at a writable directory") from exc


def _by_content(config: HookConfig, files: Path, manifest: Mapping[str, ManifestEntry]) -> dict[str, ManifestEntry]:
    """Manifest entries keyed by the wheel paths whose bytes they say were shipped (a project's
    manifest names project paths, which a wheel's layout need not keep)."""
    shipped = {entry.shrunk_sha256: entry for entry in manifest.values()}
    if not shipped:
        return {}
    found = {}
    for model in config.models:
        entry = shipped.get(file_sha256(files / model.relpath))
        if entry is not None:
            found[model.relpath] = entry
    return found
