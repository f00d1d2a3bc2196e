"""``.shrinkray-manifest.json``: the provenance record an sdist carries for its shrunk models.

A wheel built from that sdist finds each model's bytes listed as ``shrunk_sha256`` and ships the
file untouched, so a model is never quantized twice and the wheel build needs no onnxruntime. The
file is deterministic (sorted keys, no timestamps, fixed formatting) so sdists stay reproducible.

This module imports nothing heavy: ``dependencies()`` reads the manifest to decide whether the
engine is needed at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError

MANIFEST_NAME = ".shrinkray-manifest.json"
VERSIONED = ("onnx", "onnxruntime")


@dataclass(frozen=True)
class ManifestEntry:
    """What was done to one model: enough to recognise the shrunk file and to audit it."""

    original_sha256: str
    shrunk_sha256: str
    method: str
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    verification: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManifestEntry:
        return cls(original_sha256=str(data["original_sha256"]), shrunk_sha256=str(data["shrunk_sha256"]),
                   method=str(data["method"]), options=dict(data.get("options") or {}),
                   versions=dict(data.get("versions") or {}), verification=data.get("verification"))


def render(entries: Mapping[str, ManifestEntry]) -> str:
    """The manifest text: byte-identical for identical entries, whatever their insertion order."""
    body = {rel: entry.to_dict() for rel, entry in entries.items()}
    return json.dumps(body, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def read_manifest(root: Path) -> dict[str, ManifestEntry]:
    """The manifest at the project root (present when building from our own sdist), or ``{}``."""
    path = root / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("the top level is not an object")
        return {str(rel): ManifestEntry.from_dict(entry) for rel, entry in data.items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise ShrinkrayError(f"cannot read the manifest: {exc}", path=str(path),
                             hint="hatch-shrinkray writes it; delete it to shrink from scratch") from exc


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tool_versions() -> dict[str, str]:
    """Installed versions of the tools whose behaviour determines the shrunk bytes.

    Read from package metadata so that nothing is imported just to learn a version (our own
    package is already imported, and its ``__version__`` is right even in a source checkout).
    """
    from hatch_shrinkray import __version__

    versions = {"hatch-shrinkray": __version__}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
