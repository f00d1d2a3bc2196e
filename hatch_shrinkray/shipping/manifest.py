"""``.shrinkray-manifest.json``: the provenance record an sdist carries for its shrunk models.

A wheel built from that sdist finds each model's bytes listed as ``shrunk_sha256`` and ships the
file untouched, so a model is never quantized twice and the wheel build needs no onnxruntime. The
file is deterministic (sorted keys, no timestamps, fixed formatting) so sdists stay reproducible.

The manifest is only as trustworthy as the sdist that carries it (whoever can edit one can edit
the other), so a match is not taken on faith: ``pass_through_problem`` also checks that the entry
is one hatch-shrinkray could have written (a known method, no failed verification) and that the
file is framed as an ONNX model, by walking its top-level protobuf fields (a few reads and seeks).

This module imports nothing heavy: ``dependencies()`` reads the manifest to decide whether the
engine is needed at all, and the pass-through path must work where onnx is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.options import METHODS

MANIFEST_NAME = ".shrinkray-manifest.json"
VERSIONED = ("onnx", "onnxruntime")
__all__ = ["MANIFEST_NAME", "ManifestEntry", "file_sha256", "read_manifest", "render", "tool_versions"]


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


VARINT, I64, LEN, I32 = 0, 1, 2, 5
MODEL_FIELDS = {1: VARINT, 2: LEN, 3: LEN, 4: LEN, 5: VARINT, 6: LEN, 7: LEN, 8: LEN, 14: LEN, 20: LEN, 25: LEN,
                26: LEN}
"""onnx.ModelProto's fields and their wire types (ir_version, producer_*, domain, model_version,
doc_string, graph, opset_import, metadata_props, training_info, functions, configuration)."""
REQUIRED = {1: "ir_version", 7: "graph", 8: "opset_import"}


def pass_through_problem(path: Path, entry: ManifestEntry) -> str | None:
    """Why a file whose sha256 matches ``entry`` must not be shipped as it is, or ``None``."""
    if entry.method not in METHODS:
        return f"its entry names an unknown method {entry.method!r}"
    if isinstance(entry.verification, dict) and entry.verification.get("passed") is False:
        return "its entry records a failed verification"
    problem = onnx_framing_problem(path)
    return None if problem is None else f"is not an ONNX model ({problem})"


def onnx_framing_problem(path: Path) -> str | None:
    """Whether ``path`` is framed as a serialized onnx.ModelProto: every top-level field has a
    valid tag and wire type and ends inside the file, and ir_version, graph and opset_import are
    present. Cheap (nested messages are skipped by seeking) and free of onnx and protobuf."""
    size = path.stat().st_size
    seen: set[int] = set()
    with open(path, "rb") as fh:
        while fh.tell() < size:
            key = _varint(fh)
            if key is None:
                return "a field tag runs past the end of the file"
            number, wire = key >> 3, key & 7
            if number == 0 or wire not in (VARINT, I64, LEN, I32):
                return f"byte {fh.tell() - 1} is not a protobuf field tag"
            if number in MODEL_FIELDS and MODEL_FIELDS[number] != wire:
                return f"field {number} has wire type {wire}, not {MODEL_FIELDS[number]}"
            skip = {I64: 8, I32: 4}.get(wire, 0)
            if wire in (VARINT, LEN):
                value = _varint(fh)
                if value is None:
                    return f"field {number} runs past the end of the file"
                skip = value if wire == LEN else 0
            if fh.tell() + skip > size:
                return f"field {number} runs past the end of the file"
            fh.seek(skip, 1)
            seen.add(number)
    missing = [name for number, name in REQUIRED.items() if number not in seen]
    return f"no {', '.join(missing)}" if missing else None


def _varint(fh: BinaryIO) -> int | None:
    value = 0
    for shift in range(0, 70, 7):
        byte = fh.read(1)
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
    return None
