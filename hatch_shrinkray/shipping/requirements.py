"""What a build must install to ship its models (hatchling's ``dependencies()`` answer): the
engine's requirements when some model will be shrunk, nothing when every model passes through,
or ships its original by plan."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.method_facts import FACTS, facts
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.manifest import ManifestEntry

CORE = "hatch-shrinkray-core"
"""The distribution that holds all of hatch-shrinkray's code, light enough for build environments;
``hatch-shrinkray`` is a metapackage that adds the engine (``hatch-shrinkray-core[engine]``)."""
ENGINE_MODULES = ("onnx", "onnxruntime", "numpy", "onnx_ir", "ml_dtypes")
"""What the engine imports: hatch-shrinkray-core installs without them."""


OPTIONAL = frozenset({"rich"}).union(*(f.requires for f in FACTS.values()))
"""Requirements of the engine extra that a build needs only for some methods (``Facts.requires``:
onnx-ir, onnxruntime's MatMulNBits quantizer; threadpoolctl, one BLAS thread while fitting), or never
(rich: the CLI's live progress). Each package fewer is one less to resolve and install in every isolated build
environment that shrinks."""


def engine_requirements(methods: Iterable[str] | None = None) -> list[str]:
    """What a build that shrinks with ``methods`` (None: any) must install: the engine extra's
    requirements, spelled out, less those in ``OPTIONAL`` that no method needs. Not
    ``core[engine]==V``: that would install the whole extra, and pip deems it satisfied by the
    installed core anyway when it checks build requirements."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        declared = [Requirement(r) for r in metadata.requires(CORE) or []]
    except metadata.PackageNotFoundError:
        declared = []
    wanted = None if methods is None else frozenset().union(*(facts(m).requires for m in methods))
    return [f"{r.name}{r.specifier}" for r in declared if r.marker is not None
            and r.marker.evaluate({"extra": "engine"}) and not r.marker.evaluate({"extra": ""})
            and (r.name not in OPTIONAL or (r.name in wanted if wanted is not None else r.name != "rich"))]


def engine_missing(exc: ModuleNotFoundError) -> ShrinkrayError | None:
    """The one-line error for an engine module that is not installed, or ``None`` for any other
    missing module (a bug, which keeps its traceback)."""
    name = (exc.name or "").partition(".")[0]
    if name not in ENGINE_MODULES:
        return None
    from importlib import metadata

    try:
        direct = json.loads(metadata.distribution(CORE).read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        direct = {}
    return ShrinkrayError(f"the shrinking engine is not installed ({name} is missing)", hint=install_hint(direct))


def install_hint(direct: Mapping[str, Any]) -> str:
    """How to add the engine, given how the core was installed (its PEP 610 ``direct_url.json``): from
    a directory (a checkout, until it is on PyPI), that directory with the extra; else by name."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname  # here: the hook's light path does not import urllib's client

    from hatch_shrinkray import __version__

    url = str(direct.get("url", ""))
    info = direct.get("dir_info")
    if isinstance(info, dict) and url.startswith("file:"):
        return f"pip install {'-e ' if info.get('editable') else ''}'{url2pathname(urlparse(url).path)}[engine]'"
    return f"pip install 'hatch-shrinkray=={__version__}', or '{CORE}[engine]=={__version__}'"


def passes_through(model: ModelEntry, sha256: str, manifest: Mapping[str, ManifestEntry]) -> bool:
    """Whether these bytes are what a manifest says hatch-shrinkray shipped for this path."""
    entry = manifest.get(model.relpath)
    return entry is not None and entry.shrunk_sha256 == sha256


def engine_needed(config: HookConfig, root: Path, manifest: Mapping[str, ManifestEntry]) -> bool:
    """Whether this build will shrink anything (and so needs onnx and onnxruntime installed). A
    model the cache holds needs the engine too: a cache hit ships only once its outputs agree with
    the original's (``shipping.recheck``)."""
    if config.ships_originals:
        return False
    return any(not passes_through(m, sha := read_sha256(root, m), manifest)
               and not ((plan := config.plans.get(sha)) is not None and plan.ships_original) for m in config.models)


def read_sha256(root: Path, model: ModelEntry) -> str:
    """The sha256 of a configured model file (one line naming it when it cannot be read)."""
    try:
        return file_sha256(root / model.relpath)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror or exc}", path=model.relpath,
                             hint="check the file's permissions") from exc
