"""What the build hook does for one build: decide, per model, what ships, and tell hatchling.

For each configured model there are five outcomes:

- *pass-through*: the file's sha256 is a manifest's ``shrunk_sha256`` (a wheel built from our own
  sdist) or the sdist is configured to carry originals. The in-root file is force-included to its
  own path, which keeps it in the archive even if a ``.gitignore`` would drop it. Nothing heavy is
  imported.
- *cached*: the cache holds the shrunk bytes for these exact inputs; they are copied out.
- *shrunk*: the engine writes the shrunk model into the work directory.
- *unchanged*: no weight reaches ``min-elements``; reported, and the original ships.
- *already quantized*: the engine refuses it; it is reported and shipped unchanged.

Shrunk files live in a work directory outside the project and are force-included file by file at
their project-relative path: hatchling then drops the original from the archive, so it holds
exactly one copy. The caller owns the work directory; this module only mutates
``build_data["force_include"]`` (never reassigns it, which would drop hatchling's own entries).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from hatch_shrinkray.errors import AlreadyQuantizedError, ShrinkrayError
from hatch_shrinkray.hatch.cache import CachedShrink, ShrinkCache, cache_key, default_cache_dir
from hatch_shrinkray.hatch.config import HookConfig, ModelEntry
from hatch_shrinkray.hatch.manifest import (
    MANIFEST_NAME,
    ManifestEntry,
    file_sha256,
    read_manifest,
    render,
    tool_versions,
)
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import human

PREFIX = "shrinkray:"
ENGINE_REQUIREMENTS = ["onnx>=1.16", "onnxruntime>=1.22", "numpy>=1.24"]


class Display(Protocol):
    """The part of hatchling's ``self.app`` the hook talks through (plain text, stderr)."""

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
    """``shrunk``, ``cached``, ``pass-through``, ``unchanged`` or ``already-quantized``."""
    original_size: int
    shipped_size: int
    obsolete: tuple[str, ...] = ()
    """Project-relative external-data files of the original that the shrunk model no longer
    reads; the hook drops them from the archive."""


def passes_through(model: ModelEntry, sha256: str, manifest: dict[str, ManifestEntry]) -> bool:
    """Whether these bytes are what a manifest says hatch-shrinkray shipped for this path."""
    entry = manifest.get(model.relpath)
    return entry is not None and entry.shrunk_sha256 == sha256


def engine_needed(config: HookConfig, root: Path) -> bool:
    """Whether this build will shrink anything (and so needs onnx and onnxruntime installed)."""
    if config.ships_originals:
        return False
    manifest = read_manifest(root)
    return not all(passes_through(m, _read_sha256(root, m), manifest) for m in config.models)


def _read_sha256(root: Path, model: ModelEntry) -> str:
    try:
        return file_sha256(root / model.relpath)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror or exc}", path=model.relpath,
                             hint="check the file's permissions") from exc


def check_outside(workdir: Path, root: Path) -> None:
    """Refuse a work directory inside the project: hatchling would then ship both copies."""
    work, project = os.path.realpath(workdir), os.path.realpath(root)
    if os.path.commonpath([work, project]) == project:
        raise ShrinkrayError(f"the temporary directory {work} is inside the project {project}",
                             hint="point TMPDIR somewhere outside the project")


def ship_models(config: HookConfig, root: Path, build_data: dict[str, Any], workdir: Path,
                app: Display) -> list[Shipped]:
    """Shrink (or pass through) every configured model and register the results with hatchling."""
    check_outside(workdir, root)
    force_include: dict[str, str] = build_data["force_include"]
    manifest_in = read_manifest(root)
    manifest_out: dict[str, ManifestEntry] = {}
    cache = _open_cache(config, app)
    shipped: list[Shipped] = []
    start = time.perf_counter()
    for model in config.models:
        source = root / model.relpath
        size = source.stat().st_size
        sha256 = _read_sha256(root, model)
        if config.ships_originals or passes_through(model, sha256, manifest_in):
            force_include[str(source)] = model.relpath
            if model.relpath in manifest_in:
                manifest_out[model.relpath] = manifest_in[model.relpath]
            why = "sdist = \"original\"" if config.ships_originals else "already shrunk (manifest match)"
            app.display_success(f"{PREFIX} {model.relpath}: {why}; shipping as-is ({human(size)})")
            shipped.append(Shipped(model.relpath, "pass-through", size, size))
            continue
        app.display_waiting(f"{PREFIX} {model.relpath} ({human(size)}): {model.options.method}...")
        target = workdir / model.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            sidecars = _sidecars(source, model.relpath)
            record, outcome = _shrink_one(model, _content_sha256(root, sha256, sidecars), root, target,
                                          cache=cache, app=app)
        except ShrinkrayError as exc:
            if exc.path and Path(exc.path) == source:
                exc.path = model.relpath  # the path the user wrote, not the build's absolute one
            raise
        if record is None or outcome == "unchanged":
            force_include[str(source)] = model.relpath
            if record is not None:
                manifest_out[model.relpath] = record.entry
                app.display_warning(f"{PREFIX} {model.relpath}: nothing to shrink: "
                                    f"{_why_unchanged(model.options)}; shipping it unchanged")
            shipped.append(Shipped(model.relpath, outcome, size, size))
            continue
        force_include[str(target)] = model.relpath
        shipped_data = set()
        for data in _data_files_beside(target):
            rel = (PurePosixPath(model.relpath).parent / data.name).as_posix()
            force_include[str(data)] = rel
            shipped_data.add(rel)
        manifest_out[model.relpath] = record.entry
        app.display_success(_success_line(model.relpath, record, outcome == "cached"))
        shipped.append(Shipped(model.relpath, outcome, record.original_size, record.shrunk_size,
                               tuple(s for s in sidecars if s not in shipped_data)))
    if config.target == "sdist" and manifest_out:
        manifest = workdir / MANIFEST_NAME
        manifest.write_text(render(manifest_out), encoding="utf-8", newline="\n")
        force_include[str(manifest)] = MANIFEST_NAME
        app.display_debug(f"{PREFIX} wrote {MANIFEST_NAME} ({len(manifest_out)} entries)")
    app.display_success(_total_line(shipped, time.perf_counter() - start))
    return shipped


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
    app.display_debug(f"{PREFIX} cache directory {directory}")
    return ShrinkCache(directory)


def _shrink_one(model: ModelEntry, original_sha256: str, root: Path, target: Path, *,
                cache: ShrinkCache | None, app: Display) -> tuple[CachedShrink | None, str]:
    """The record for ``model`` and the outcome: ``shrunk`` or ``cached`` (bytes at ``target``),
    ``unchanged`` (no weight qualified; ship the original) or ``already-quantized`` (no record).

    An unchanged model is recorded with ``shrunk_sha256 == original_sha256``, in the manifest
    (so a wheel built from the sdist passes it through) and in the cache (so it is not re-verified).
    """
    source = root / model.relpath
    versions = tool_versions()
    key = cache_key(original_sha256, model.options, versions) if cache else None
    if cache is not None and key is not None:
        hit = cache.get(key)
        if hit is not None:
            app.display_debug(f"{PREFIX} cache hit {key[:16]} for {model.relpath}")
            shutil.copyfile(hit[0], target)
            unchanged = hit[1].entry.shrunk_sha256 == original_sha256
            return hit[1], "unchanged" if unchanged else "cached"
    from hatch_shrinkray.engine import shrink  # heavy: onnx, onnxruntime, numpy

    try:
        result = shrink(source, target, model.options)
    except AlreadyQuantizedError as exc:
        app.display_warning(f"{PREFIX} {model.relpath}: {exc.message}; shipping it unchanged")
        return None, "already-quantized"
    if result.external_data:
        cache = None  # an entry is one file; outputs over 2 GB (model + data file) are not cached
    for tensor in result.tensors:
        app.display_debug(f"{PREFIX}   {tensor.name} {list(tensor.shape)} {tensor.encoding} "
                          f"{human(tensor.original_bytes)} -> {human(tensor.stored_bytes)}")
    unchanged = not result.encoded
    kept = source if unchanged else target
    verification = None if unchanged else result.verification
    record = CachedShrink(
        entry=ManifestEntry(original_sha256=original_sha256, shrunk_sha256=file_sha256(kept),
                            method=model.options.method, options=portable_options(model.options, root),
                            versions=versions,
                            verification=None if verification is None
                            else _portable(verification.to_dict(), root)),
        original_size=result.original_size, shrunk_size=result.original_size if unchanged else result.shrunk_size,
        seconds=result.seconds,
        summary=None if verification is None else verification.summary())
    if cache is not None and key is not None:
        problem = cache.put(key, kept, record)
        if problem:
            app.display_debug(f"{PREFIX} could not write the cache entry: {problem}")
    return record, "unchanged" if unchanged else "shrunk"


def _content_sha256(root: Path, model_sha256: str, sidecars: tuple[str, ...]) -> str:
    """The model file's sha256, extended with its external-data files' so that retrained
    weights in ``a.onnx.data`` (same ``a.onnx``) never hit a stale cache entry."""
    if not sidecars:
        return model_sha256
    digest = hashlib.sha256(model_sha256.encode())
    for rel in sidecars:
        digest.update(b"\0" + rel.encode() + b"\0" + file_sha256(root / rel).encode())
    return digest.hexdigest()


def _data_files_beside(target: Path) -> list[Path]:
    """The shrunk model's own data file (outputs over 2 GB only), written beside it."""
    from hatch_shrinkray.onnxgraph.modelio import data_file_name

    data = target.with_name(data_file_name(target))
    return [data] if data.is_file() else []


def _sidecars(source: Path, relpath: str) -> tuple[str, ...]:
    """The original's external-data files, as project-relative paths (ShrinkrayError for a
    corrupt model or a missing/escaping data file)."""
    from hatch_shrinkray.onnxgraph.modelio import external_data_files

    parent = PurePosixPath(relpath).parent
    return tuple(sorted((parent / p.name).as_posix() if p.parent == source.parent.resolve()
                        else (parent / os.path.relpath(p, source.parent.resolve())).as_posix()
                        for p in external_data_files(source)))


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
    ratio = record.shrunk_size / record.original_size if record.original_size else 1.0
    figure = record.summary or "not verified (verify = false)"
    timing = f"cached, {record.seconds:.1f} s saved" if cached else f"{record.seconds:.1f} s"
    return (f"{PREFIX} {relpath}: {human(record.original_size)} -> {human(record.shrunk_size)} "
            f"({100 * ratio:.1f}%), {record.entry.method}, {figure}, {timing}")


def _total_line(shipped: list[Shipped], seconds: float) -> str:
    before = sum(s.original_size for s in shipped)
    after = sum(s.shipped_size for s in shipped)
    counts = {o: sum(s.outcome == o for s in shipped)
              for o in ("shrunk", "cached", "pass-through", "unchanged", "already-quantized")}
    detail = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    ratio = f" ({100 * after / before:.1f}%)" if before else ""
    plural = "s" if len(shipped) != 1 else ""
    return (f"{PREFIX} total {len(shipped)} model{plural} ({detail}): {human(before)} -> {human(after)}"
            f"{ratio} in {seconds:.1f} s")
