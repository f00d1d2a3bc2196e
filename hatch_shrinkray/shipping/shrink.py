"""One model's shrink through the cache: take the cache's entry when it holds these exact inputs
(and onnxruntime loads it), else run the engine and store what it made; either way, decide what
ships (``outcome``).

``original_sha256`` (hashed before) only looks the cache up; what is stored and recorded is keyed
by the digests of the bytes the engine actually read. An unchanged model is recorded with
``shrunk_sha256 == original_sha256``, in the manifest (so a wheel built from the sdist passes it
through) and in the cache (so it is not re-verified).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from hatch_shrinkray.errors import AlreadyQuantizedError, ShrinkrayError
from hatch_shrinkray.files import copy_hashed, file_sha256
from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.cache import CachedShrink, ShrinkCache, cache_key
from hatch_shrinkray.shipping.config import ModelEntry
from hatch_shrinkray.shipping.display import PREFIX, Display
from hatch_shrinkray.shipping.loadcheck import load_problem, onnxruntime_installed
from hatch_shrinkray.shipping.manifest import ManifestEntry, external_data_refs, tool_versions
from hatch_shrinkray.shipping.outcome import AlreadyQuantized, KeptOriginal, Shrinking, Shrunk, Unchanged
from hatch_shrinkray.shipping.recheck import recheck
from hatch_shrinkray.shipping.requirements import engine_missing
from hatch_shrinkray.verdict import line_words

if TYPE_CHECKING:
    from hatch_shrinkray.shrink_result import ShrinkResult


@dataclass(frozen=True)
class Job:
    """One model to shrink: its configuration, where it is read and written, and its digests."""

    model: ModelEntry
    root: Path
    target: Path
    original_sha256: str
    """The model's bytes and its data files' (``content_sha256``), as hashed before: the cache's key."""
    model_file_sha256: str
    sidecars: Mapping[str, str]
    """The original's external-data files: absolute path (as the engine names them) -> project-relative."""


def shrink_one(job: Job, *, cache: ShrinkCache | None, app: Display, keep_failed: bool = False) -> Shrinking:
    """What ships for ``job.model``, its bytes at ``job.target`` (the original's when nothing was
    shrunk, it was not smaller, or generated inputs could not verify the result); nothing is
    written for an already-quantized model. ``keep_failed`` (``check``) keeps a model that fails
    verification under ``strict`` (a build would fail); it is never cached."""
    versions = tool_versions()
    if cache is not None:
        cached = _from_cache(job, cache, app, versions=versions)
        if cached is not None:
            return cached
    try:
        from hatch_shrinkray.engine import shrink  # heavy: onnx, onnxruntime, numpy
    except ModuleNotFoundError as exc:
        raise engine_missing(exc) or exc from exc
    try:
        result = shrink(job.root / job.model.relpath, job.target, job.model.options, keep_failed=keep_failed)
    except AlreadyQuantizedError as exc:
        return AlreadyQuantized(exc.message)
    for tensor in result.tensors:
        app.display_debug(wording.tensor_line(tensor))
    record, read = _record(job, result, versions)
    verification = result.verification if result.encoded else None
    if cache is not None and not result.external_data and (verification is None or verification.passed):
        _store(cache, app, record, job, read, loaded=verification is not None)
    return _decided(job.model, record, unverified=result.unverified, unchanged=not result.encoded, cached=False)


def _from_cache(job: Job, cache: ShrinkCache, app: Display, *, versions: Mapping[str, str]) -> Shrinking | None:
    """The decision the cache's entry for these inputs makes, when it holds one that may be used."""
    key = cache_key(job.original_sha256, job.model.options, dict(versions))
    hit = cache.get(key, job.original_sha256)
    if hit is None or not take_cached(hit, job, key, app, cache=cache, runtime=versions["onnxruntime"]):
        return None
    record = hit[1]
    # the model file's own bytes (its content digest covers its data files too): nothing shrunk
    unchanged = record.entry.shrunk_sha256 == job.model_file_sha256
    return _decided(job.model, record, unverified=record.unverified, unchanged=unchanged, cached=True)


def _decided(model: ModelEntry, record: CachedShrink, *, unverified: bool, unchanged: bool,
             cached: bool) -> Shrinking:
    why = record.kept_original or wording.nothing_to_shrink(model.options)
    if unverified:
        return KeptOriginal(record, why)
    return Unchanged(record, why) if unchanged else Shrunk(record, cached)


def _record(job: Job, result: ShrinkResult, versions: Mapping[str, str]) -> tuple[CachedShrink, str]:
    """The record of what the engine made, and the content digest of what it read (the cache's key
    from now on); an unchanged model ships the original's exact bytes, as hashed now (the engine
    re-serialized them)."""
    model, root, target = job.model, job.root, job.target
    (_, model_sha256), *data = result.source_sha256.items()
    read = content_sha256(model_sha256, {job.sidecars.get(path, path): digest for path, digest in data})
    unchanged = not result.encoded
    if unchanged:
        shrunk_sha256 = copy_hashed(root / model.relpath, target)
        if shrunk_sha256 != model_sha256:
            raise changed(model.relpath)
    else:
        shrunk_sha256 = file_sha256(target)
    verification = None if unchanged else result.verification
    label, verdicts = line_words(result)
    record = CachedShrink(
        entry=ManifestEntry(original_sha256=read, shrunk_sha256=shrunk_sha256,
                            method=result.method, options=portable_options(result.options, root),
                            versions=dict(versions),
                            verification=None if verification is None
                            else replace(verification.record(), inputs=portable(verification.input_source, root)),
                            original_size=result.original_size),
        original_size=result.original_size, shrunk_size=result.original_size if unchanged else result.shrunk_size,
        seconds=result.seconds,
        summary=None if verification is None else "; ".join(filter(None, (
            result.fallback_text(), verification.summary() + ("" if verification.passed else wording.FAILS_KEPT)))),
        kept=result.kept_summary(), kept_original=result.kept_original, unverified=result.unverified,
        sizes=None if result.original_sizes is None or result.shrunk_sizes is None or unchanged else
        (result.original_sizes, result.shrunk_sizes),
        label=label, verdicts=tuple(verdicts))
    return record, read


def _store(cache: ShrinkCache, app: Display, record: CachedShrink, job: Job, read: str, *, loaded: bool) -> None:
    """Put a shrink into the cache (an entry is one file: outputs over 2 GB are not cached);
    ``loaded``: onnxruntime just loaded and ran these bytes."""
    problem = cache.put(cache_key(read, job.model.options, dict(record.entry.versions)), job.target, record)
    if problem:
        app.display_debug(wording.cache_unwritten_line(problem))
    elif loaded:
        cache.note_loaded(record.entry.shrunk_sha256, record.entry.versions["onnxruntime"])


def take_cached(hit: tuple[Path, CachedShrink], job: Job, key: str, app: Display, *, cache: ShrinkCache,
                runtime: str) -> bool:
    """Copy a cache entry's model to ``job.target`` if it is what its record says, onnxruntime loads
    it (unless the cache saw this onnxruntime load these very bytes) and its outputs agree with the
    original's on the inputs the build verifies with (``recheck``), unless it is byte for byte the
    model file itself (a model with nothing to shrink, which ships as the user gave it). Otherwise
    say why in one line and drop the entry; the model is then shrunk again (and the entry rewritten)."""
    path, record = hit
    relpath, target = job.model.relpath, job.target
    copied = copy_hashed(path, target)
    own = copied == job.model_file_sha256
    problem = _cached_problem(job, record, copied, cache=cache, runtime=runtime)
    summary = ""
    if problem is None and not own:
        rechecked = recheck(job.root / relpath, target, job.model.options, label=relpath,
                            sha256=job.model_file_sha256)
        problem, summary = rechecked.problem, rechecked.summary
    if problem:
        app.display_warning(wording.cache_unused_line(relpath, key, problem))
        if summary:
            app.display_debug(f"{PREFIX} {relpath}: {summary}")
        target.unlink(missing_ok=True)
        cache.discard(key)
        return False
    app.display_debug(wording.cache_hit_line(relpath, key, summary))
    return True


def _cached_problem(job: Job, record: CachedShrink, copied: str, *, cache: ShrinkCache, runtime: str) -> str | None:
    """Why the copied entry cannot ship before its outputs are even compared: bytes that changed while
    read, a record that says the original ships over other bytes, a model onnxruntime does not load,
    or a size that is not the file's."""
    if copied != record.entry.shrunk_sha256:
        return "its bytes changed while they were read"
    if copied == job.model_file_sha256:
        return None
    if record.kept_original is not None or record.unverified:
        return "it claims the original over other bytes"
    if not cache.loaded(copied, runtime):
        problem = load_problem(job.target)
        if problem is not None:
            return problem
        if onnxruntime_installed():
            cache.note_loaded(copied, runtime)
    return "its size is not the one its record says" if record.shrunk_size != job.target.stat().st_size else None


def content_sha256(model_sha256: str, sidecars: Mapping[str, str]) -> str:
    """The model file's sha256, extended with its external-data files' (project-relative path ->
    sha256) so that retrained weights in ``a.onnx.data`` (same ``a.onnx``) never hit a stale
    cache entry."""
    if not sidecars:
        return model_sha256
    digest = hashlib.sha256(model_sha256.encode())
    for rel in sorted(sidecars):
        digest.update(b"\0" + rel.encode() + b"\0" + sidecars[rel].encode())
    return digest.hexdigest()


def hashes(root: Path, relpaths: Iterable[str]) -> dict[str, str]:
    return {rel: file_sha256(root / rel) for rel in relpaths}


def data_files_beside(target: Path) -> list[Path]:
    """The shrunk model's own data file (outputs over 2 GB only), written beside it."""
    from hatch_shrinkray.onnxgraph.modelio import data_file_name

    data = target.with_name(data_file_name(target))
    return [data] if data.is_file() else []


def sidecars_of(source: Path, relpath: str) -> dict[str, str]:
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


def portable_options(options: dict[str, Any], root: Path) -> dict[str, Any]:
    """``options`` (``ShrinkOptions.describe()``) with the inputs path relative to the project (see
    ``portable``)."""
    described = dict(options)
    verify = described.get("verify")
    if isinstance(verify, dict) and isinstance(verify.get("inputs"), str):
        described["verify"] = {**verify, "inputs": portable(verify["inputs"], root)}
    return described


def portable(inputs: str, root: Path) -> str:
    """``inputs`` made project-relative when it is an absolute path under ``root``, so manifests
    written from a checkout and from a copy elsewhere are identical and leak no paths."""
    if Path(inputs).is_absolute() and Path(inputs).is_relative_to(root):
        return PurePosixPath(Path(inputs).relative_to(root)).as_posix()
    return inputs


def changed(relpath: str) -> ShrinkrayError:
    return ShrinkrayError("changed while the build was reading it; nothing was shipped or cached", path=relpath,
                          hint="wait until the model is completely written, then build again")
