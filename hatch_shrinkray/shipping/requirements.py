"""What a build must install to ship its models (hatchling's ``dependencies()`` answer): the
engine's requirements when some model will be shrunk, nothing when every model passes through,
ships its original by plan, or is in the cache already."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.shipping.cache import ShrinkCache, default_cache_dir, engine_free_key, private_problem
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.manifest import ManifestEntry, external_data_refs

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
    pending = [(m, sha) for m in config.models if not passes_through(m, sha := read_sha256(root, m), manifest)
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


def read_sha256(root: Path, model: ModelEntry) -> str:
    """The sha256 of a configured model file (one line naming it when it cannot be read)."""
    try:
        return file_sha256(root / model.relpath)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror or exc}", path=model.relpath,
                             hint="check the file's permissions") from exc
