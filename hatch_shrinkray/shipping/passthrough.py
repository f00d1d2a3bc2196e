"""A model whose bytes a manifest says hatch-shrinkray shipped before (a wheel built from our own
sdist) ships as it is, once checked: its entry and structure always, and that onnxruntime loads it
where onnxruntime is installed and the cache has not seen this onnxruntime load these bytes."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import copy_hashed, file_sha256
from hatch_shrinkray.shipping.cache import ShrinkCache
from hatch_shrinkray.shipping.display import writing_to
from hatch_shrinkray.shipping.loadcheck import load_problem, onnxruntime_installed
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, pass_through_problem, tool_versions
from hatch_shrinkray.shipping.shrink import changed


def pass_through(relpath: str, entry: ManifestEntry, source: Path, target: Path, *, sha256: str,
                 workdir: Path, cache: ShrinkCache | None) -> None:
    """Copy a manifest match into the work directory, checking it on the way (the bytes checked
    are hashed again, so they are the bytes shipped)."""
    problem = pass_through_problem(source, entry)
    runtime = tool_versions()["onnxruntime"]
    if problem is None and onnxruntime_installed() and not (cache is not None and cache.loaded(sha256, runtime)):
        problem = load_problem(source)
        if problem is None and _read_sha256_of(source, relpath) != sha256:
            raise changed(relpath)
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
        raise changed(relpath)


def _read_sha256_of(path: Path, relpath: str) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise changed(relpath) from exc
