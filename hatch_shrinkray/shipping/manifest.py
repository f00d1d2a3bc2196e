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
import mmap
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

from hatch_shrinkray.codec import AT_LEAST_0, SHA256, Invalid, encode, loads
from hatch_shrinkray.errors import Malformed, ShrinkrayError
from hatch_shrinkray.files import file_sha256, read_regular
from hatch_shrinkray.options import METHODS
from hatch_shrinkray.result import VerificationRecord

MANIFEST_NAME = ".shrinkray-manifest.json"
SDIST_MARKER = "PKG-INFO"
"""Every sdist has it at its root (the core metadata, PEP 643); a source checkout does not."""
MAX_BYTES = 64 << 20
"""A manifest holds a few hundred bytes per model. Larger is not ours."""
VERSIONED = ("onnx", "onnxruntime")
__all__ = ["MANIFEST_NAME", "ManifestEntry", "file_sha256", "load_manifest", "read_manifest", "render", "tool_versions"]


@dataclass(frozen=True)
class ManifestEntry:
    """What was done to one model: enough to recognise the shrunk file and to audit it."""

    original_sha256: Annotated[str, SHA256]
    shrunk_sha256: Annotated[str, SHA256]
    method: str
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    verification: VerificationRecord | None = None
    original_size: Annotated[int, AT_LEAST_0] | None = None
    """The original's bytes (the model file and its data files), for a build that ships the shrunk
    model as the sdist holds it to say what it weighed."""


def render(entries: Mapping[str, ManifestEntry]) -> str:
    """The manifest text: byte-identical for identical entries, whatever their insertion order."""
    return json.dumps(encode(dict(entries)), sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def read_manifest(root: Path, warn: Callable[[str], None] | None = None) -> dict[str, ManifestEntry]:
    """The manifest at the project root (present when building from our own sdist), or ``{}``.

    hatch-shrinkray writes it into sdists only, so it is honoured only where the root is one (a
    ``PKG-INFO`` beside it): a manifest in a source checkout (copied from an sdist, or written by
    hand) could otherwise mark any file, the original included, as already shrunk. It is then
    ignored, and ``warn`` says so."""
    path = root / MANIFEST_NAME
    if not path.is_file():
        return {}
    if not (root / SDIST_MARKER).is_file():
        if warn is not None:
            warn(f"shrinkray: {MANIFEST_NAME} is ignored: hatch-shrinkray writes it into sdists only, and this is "
                 f"not one (no {SDIST_MARKER}); every configured model is shrunk from its file (delete "
                 f"{MANIFEST_NAME} to silence this)")
        return {}
    return load_manifest(path)


def load_manifest(path: Path) -> dict[str, ManifestEntry]:
    """The entries of the manifest at ``path``, whoever wrote it where (one ShrinkrayError when it
    cannot be read; ``Malformed``, listing every problem, when it is not shaped like one)."""
    hint = "hatch-shrinkray writes it; delete it to shrink from scratch"
    try:
        entries: dict[str, ManifestEntry] = loads(dict[str, ManifestEntry], read_regular(path, MAX_BYTES))
    except OSError as exc:
        raise ShrinkrayError(f"cannot read the manifest: {exc.strerror or exc}", path=str(path), hint=hint) from exc
    except Invalid as exc:
        raise Malformed("\n".join(exc.problems), path=str(path), hint=hint) from exc
    return entries


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
SCHEMA: dict[str, dict[int, str]] = {
    "Model": {1: "varint", 2: "bytes", 3: "bytes", 4: "bytes", 5: "varint", 6: "bytes", 7: "Graph", 8: "Opset",
              14: "Entry", 20: "Training", 25: "Function", 26: "Device"},
    "Opset": {1: "bytes", 2: "varint"},
    "Entry": {1: "bytes", 2: "bytes"},
    "Graph": {1: "Node", 2: "bytes", 5: "Tensor", 10: "bytes", 11: "ValueInfo", 12: "ValueInfo", 13: "ValueInfo",
              14: "Annotation", 15: "Sparse", 16: "Entry"},
    "Node": {1: "bytes", 2: "bytes", 3: "bytes", 4: "bytes", 5: "Attribute", 6: "bytes", 7: "bytes", 8: "bytes",
             9: "Entry", 10: "NodeDevice"},
    "Attribute": {1: "bytes", 2: "i32", 3: "varint", 4: "bytes", 5: "Tensor", 6: "Graph", 7: "i32", 8: "varint",
                  9: "bytes", 10: "Tensor", 11: "Graph", 13: "bytes", 14: "Type", 15: "Type", 20: "varint",
                  21: "bytes", 22: "Sparse", 23: "Sparse"},
    "Tensor": {1: "varint", 2: "varint", 3: "Segment", 4: "i32", 5: "varint", 6: "bytes", 7: "varint", 8: "bytes",
               9: "bytes", 10: "i64", 11: "varint", 12: "bytes", 13: "Entry", 14: "varint", 16: "Entry"},
    "Segment": {1: "varint", 2: "varint"},
    "Sparse": {1: "Tensor", 2: "Tensor", 3: "varint"},
    "ValueInfo": {1: "bytes", 2: "Type", 3: "bytes", 4: "Entry"},
    "Type": {1: "TensorType", 4: "SequenceType", 5: "MapType", 6: "bytes", 7: "OpaqueType", 8: "TensorType",
             9: "SequenceType"},
    "TensorType": {1: "varint", 2: "Shape"},
    "SequenceType": {1: "Type"},
    "MapType": {1: "varint", 2: "Type"},
    "OpaqueType": {1: "bytes", 2: "bytes"},
    "Shape": {1: "Dimension"},
    "Dimension": {1: "varint", 2: "bytes", 3: "bytes"},
    "Annotation": {1: "bytes", 2: "Entry"},
    "Training": {1: "Graph", 2: "Graph", 3: "Entry", 4: "Entry"},
    "Function": {1: "bytes", 4: "bytes", 5: "bytes", 6: "bytes", 7: "Node", 8: "bytes", 9: "Opset", 10: "bytes",
                 11: "Attribute", 12: "ValueInfo", 13: "bytes", 14: "Entry"},
    "Device": {1: "bytes", 2: "varint", 3: "bytes"},
    "NodeDevice": {1: "bytes", 2: "Sharding", 3: "varint"},
    "Sharding": {1: "bytes", 2: "varint", 3: "IntList", 4: "ShardedDim"},
    "IntList": {1: "varint", 2: "varint"},
    "ShardedDim": {1: "varint", 2: "SimpleShardedDim"},
    "SimpleShardedDim": {1: "varint", 2: "bytes", 3: "varint"},
}
"""onnx.proto's messages as (field number -> kind), onnx 1.16-1.20: what every nested message of a
ModelProto may hold. Unknown field numbers are skipped, as protobuf does."""
WIRE = {"varint": (VARINT, LEN), "i32": (I32, LEN), "i64": (I64, LEN), "bytes": (LEN,)}
"""Scalar kinds and the wire types they may come in (repeated numbers may be packed)."""
REQUIRED = {1: "ir_version", 7: "graph", 8: "opset_import"}
MAX_DEPTH = 64
"""Messages nest a few levels per subgraph; deeper is not a model a person exported."""


def pass_through_problem(path: Path, entry: ManifestEntry) -> str | None:
    """Why a file whose sha256 matches ``entry`` must not be shipped as it is, or ``None``."""
    if entry.method not in METHODS:
        return f"its entry names an unknown method {entry.method!r}"
    if entry.verification is not None and not entry.verification.passed:
        return "its entry records a failed verification"
    problem = onnx_framing_problem(path)
    return None if problem is None else f"is not an ONNX model ({problem})"


def onnx_framing_problem(path: Path) -> str | None:
    """Whether ``path`` is a well-formed serialized onnx.ModelProto, checked without onnx or
    protobuf: every field of every nested message (graph, nodes, attributes, subgraphs, tensors,
    types, functions) has a valid tag, the wire type its field takes, and ends inside its message;
    ir_version, graph and opset_import are present. Tensor data is skipped, not read (the file is
    memory-mapped), so it is cheap even for a big model. Garbage inside a well-framed file fails
    here; what only onnxruntime can judge (ops, types) is left to it."""
    return _scan(path).problem


def external_data_refs(path: Path) -> dict[str, list[tuple[int, int | None]]] | None:
    """The external-data files a model file reads, as written in it (``location`` -> the
    ``(offset, length)`` of every tensor stored there; length ``None``: to the end of the file), or
    ``None`` when ``path`` is not a well-formed model. Free of onnx, like the check above."""
    scan = _scan(path, tensors=True)
    return None if scan.problem else scan.external


@dataclass
class _Scan:
    problem: str | None = None
    top: set[int] = field(default_factory=set)
    """The ModelProto's own field numbers."""
    tensors: list[tuple[int, int]] | None = None
    """Where each TensorProto lies, when asked for."""
    external: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)


def _scan(path: Path, *, tensors: bool = False) -> _Scan:
    scan = _Scan(tensors=[] if tensors else None)
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                scan.problem = "the file is empty"
                return scan
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                scan.problem = _walk(buf, 0, len(buf), "Model", 0, scan=scan)
                for start, end in scan.tensors or []:
                    _external(buf, start, end, scan.external)
    except (OSError, ValueError) as exc:
        scan.problem = f"cannot read it: {exc}"
    if scan.problem is None:
        missing = [name for number, name in REQUIRED.items() if number not in scan.top]
        scan.problem = f"no {', '.join(missing)}" if missing else None
    return scan


def _walk(buf: mmap.mmap, pos: int, end: int, message: str, depth: int, *, scan: _Scan) -> str | None:
    """Why the bytes ``buf[pos:end]`` are not a well-formed ``message``, or None."""
    fields = SCHEMA[message]
    if message == "Tensor" and scan.tensors is not None:
        scan.tensors.append((pos, end))
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if key is None:
            return f"a field tag of {message} runs past its end"
        number, wire = key >> 3, key & 7
        if number == 0 or wire not in (VARINT, I64, LEN, I32):
            return f"byte {pos - 1} is not a protobuf field tag (in {message})"
        body = pos
        if wire == VARINT:
            value, pos = _varint(buf, pos, end)
            if value is None:
                return f"{message} field {number} runs past its end"
        elif wire == LEN:
            length, body = _varint(buf, pos, end)
            if length is None:
                return f"{message} field {number} runs past its end"
            pos = body + length
        else:
            pos += 8 if wire == I64 else 4
        if pos > end:
            return f"{message} field {number} runs past its end"
        if depth == 0:
            scan.top.add(number)
        kind = fields.get(number)
        if kind is None:
            continue
        if wire not in WIRE.get(kind, (LEN,)):
            return f"{message} field {number} has wire type {wire}, which its {kind} does not take"
        if kind in SCHEMA:
            if depth >= MAX_DEPTH:
                return f"messages are nested more than {MAX_DEPTH} deep"
            problem = _walk(buf, body, pos, kind, depth + 1, scan=scan)
            if problem:
                return problem
    return None


EXTERNAL = 1
"""TensorProto.DataLocation.EXTERNAL."""


def _external(buf: mmap.mmap, pos: int, end: int, found: dict[str, list[tuple[int, int | None]]]) -> None:
    """Record where a well-formed TensorProto in ``buf[pos:end]`` keeps its data, if outside."""
    entries: dict[str, str] = {}
    location = 0
    for number, wire, body, stop in _fields(buf, pos, end):
        if number == 14 and wire == VARINT:  # data_location
            location = _varint(buf, body, stop)[0] or 0
        elif number == 13 and wire == LEN:  # external_data: key/value entries
            pair = {n: bytes(buf[b:e]).decode("utf-8", "replace")
                    for n, w, b, e in _fields(buf, body, stop) if w == LEN}
            if 1 in pair:
                entries[pair[1]] = pair.get(2, "")
    if location != EXTERNAL or not entries.get("location"):
        return
    try:
        offset = int(entries.get("offset") or 0)
        length = int(entries["length"]) if entries.get("length") else None
    except ValueError:
        offset, length = 0, None
    found.setdefault(entries["location"], []).append((offset, length))


def _fields(buf: mmap.mmap, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(number, wire type, start, end)`` of each field of a message already found well formed."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if key is None:
            return
        number, wire = key >> 3, key & 7
        body = pos
        if wire == VARINT:
            _, pos = _varint(buf, pos, end)
        elif wire == LEN:
            length, body = _varint(buf, pos, end)
            pos = body + (length or 0)
        else:
            pos += 8 if wire == I64 else 4
        yield number, wire, body, pos


def _varint(buf: mmap.mmap, pos: int, end: int) -> tuple[int | None, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= end:
            return None, pos
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    return None, pos
