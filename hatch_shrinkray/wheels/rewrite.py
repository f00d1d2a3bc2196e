"""``hatch-shrinkray wheel``: shrink the models inside a wheel that any backend built.

The wheel's files are unpacked into a temporary directory, and the configuration's ``models``
globs select files there; each selected model then goes through exactly what the Hatch hook does
(``shipping.ship``: same engine, options, cache and report lines), and the archive is written
anew with the shipped bytes and a fresh ``RECORD``. A model whose bytes a manifest of the project
lists as shipped by hatch-shrinkray passes through without the engine, and one that is already
quantized (our own decode pattern included) is reported and kept. Nothing is left behind when a
model fails verification: the output wheel only appears once every model passed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.config import HookConfig
from hatch_shrinkray.shipping.manifest import ManifestEntry, file_sha256
from hatch_shrinkray.shipping.ship import Display, Shipped, ship_models
from hatch_shrinkray.signals import deferred
from hatch_shrinkray.wheels.archive import extract, open_wheel, write_wheel


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
    root: Path | None = None
    try:
        with deferred():  # a signal right after mkdtemp is delivered inside the try, which cleans up
            root = _work_directory()
        files, work = root / "files", root / "work"
        extract(wheel, files)
        config = configure(files)
        shipped = tuple(ship_models(config, files, work, app, _by_content(config, files, manifest)))
        replace = {rel: path for model in shipped if model.new_bytes for rel, path in model.files}
        drop = frozenset(rel for model in shipped for rel in model.obsolete)
        changed = bool(replace or drop)
        if changed:
            write_wheel(wheel, destination, replace, drop)
        elif destination.resolve() != source.resolve():
            _copy_atomically(source, destination)
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    return Rewritten(source, destination, shipped, changed)


def _work_directory() -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix="hatch-shrinkray-wheel-"))
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


def _copy_atomically(source: Path, destination: Path) -> None:
    tmp: str | None = None
    try:
        with deferred():  # a signal right after mkstemp is delivered inside the try, which cleans up
            fd, tmp = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".tmp")
        os.close(fd)
        shutil.copyfile(source, tmp)
        os.replace(tmp, destination)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
