"""A content-addressed store of shrunk models, so an unchanged model is shrunk only once.

The key covers everything that determines the output: the model's bytes, the effective options,
the verification inputs' bytes, the versions of hatch-shrinkray, onnx and onnxruntime, and a
digest of hatch-shrinkray's own source (development builds keep one version number). Paths
are left out of the key (the same project built from a checkout and from its unpacked sdist hits
the same entry).

Each entry is two files, ``<key>.onnx`` and ``<key>.json``, each written to a temporary file in the
cache directory and renamed into place; the record is renamed last and names the model's sha256,
so a reader never trusts a half-written entry and concurrent builds can only race to write the
same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray.files import file_sha256, write_atomically
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.manifest import ManifestEntry
from hatch_shrinkray.sizes import Sizes

CACHE_ENV = "HATCH_SHRINKRAY_CACHE_DIR"
KEY_VERSION = 2
"""Bump when the key or record layout changes, so old entries are simply never found."""


@dataclass(frozen=True)
class CachedShrink:
    """A cache record: the manifest entry plus what the build report needs."""

    entry: ManifestEntry
    original_size: int
    shrunk_size: int
    seconds: float
    """How long the original shrink took (reported as time saved)."""
    summary: str | None
    """The verification figure (``VerifyResult.summary()``), or ``None`` without verification."""
    kept: str = ""
    """What stayed float and why (``ShrinkResult.kept_summary()``)."""
    kept_original: str | None = None
    """Why the original ships instead (``ShrinkResult.kept_original``)."""
    sizes: tuple[Sizes, Sizes] | None = None
    """Raw, wheel and web bytes of the original and the shrunk model, for the report line."""

    def to_dict(self) -> dict[str, Any]:
        return {"entry": self.entry.to_dict(), "original_size": self.original_size,
                "shrunk_size": self.shrunk_size, "seconds": self.seconds, "summary": self.summary,
                "kept": self.kept, "kept_original": self.kept_original,
                "sizes": None if self.sizes is None else [s.to_dict() for s in self.sizes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CachedShrink:
        return cls(entry=ManifestEntry.from_dict(data["entry"]), original_size=int(data["original_size"]),
                   shrunk_size=int(data["shrunk_size"]), seconds=float(data["seconds"]),
                   summary=data.get("summary"), kept=str(data.get("kept") or ""),
                   kept_original=data.get("kept_original"),
                   sizes=None if not data.get("sizes") else (Sizes.from_dict(data["sizes"][0]),
                                                             Sizes.from_dict(data["sizes"][1])))


def default_cache_dir() -> Path:
    """``$HATCH_SHRINKRAY_CACHE_DIR``, else the platform's user cache directory + ``hatch-shrinkray``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hatch-shrinkray"


def cache_key(model_sha256: str, options: ShrinkOptions, versions: dict[str, str]) -> str:
    """The entry name for shrinking a model with these bytes and options under these versions."""
    described = options.describe()
    inputs_sha256 = None
    if options.verify is not None and options.verify.inputs is not None:
        inputs_sha256 = inputs_digest(Path(options.verify.inputs))
        described["verify"] = {**described["verify"], "inputs": None}
    payload = {"key_version": KEY_VERSION, "model": model_sha256, "options": described,
               "inputs": inputs_sha256, "versions": versions, "code": code_fingerprint()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def inputs_digest(path: Path) -> str:
    """The sha256 of a sample file, or of a recording directory's ``.npz`` files (names and contents)."""
    if not path.is_dir():
        return file_sha256(path)
    digest = hashlib.sha256()
    for member in sorted(path.glob("*.npz")):
        digest.update(member.name.encode() + b"\0" + file_sha256(member).encode() + b"\0")
    return digest.hexdigest()


@functools.cache
def code_fingerprint() -> str:
    """A digest of hatch-shrinkray's own source files.

    The version number alone does not change between edits of a development build, and build
    frontends keep installing fresh builds of the same version; without this a changed encoder
    could be served output its predecessor made.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class ShrinkCache:
    """One cache directory; ``get`` and ``put`` never raise for I/O trouble (a cache is optional)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.directory / f"{key}.onnx", self.directory / f"{key}.json"

    def get(self, key: str) -> tuple[Path, CachedShrink] | None:
        """The cached model file and its record, if the entry is complete and intact."""
        model, record = self._paths(key)
        try:
            cached = CachedShrink.from_dict(json.loads(record.read_text(encoding="utf-8")))
            if file_sha256(model) != cached.entry.shrunk_sha256:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return model, cached

    def put(self, key: str, shrunk_model: Path, record: CachedShrink) -> str | None:
        """Store an entry; returns why it could not be stored, or ``None`` on success."""
        model, record_path = self._paths(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(model, shrunk_model.read_bytes())
            text = json.dumps(record.to_dict(), sort_keys=True, indent=2).encode()
            write_atomically(record_path, text)
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

