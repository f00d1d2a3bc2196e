"""Reading models safely and writing them atomically.

Every read problem becomes one ShrinkrayError naming the file and what to do; external-data
locations may not escape the model's directory; writes go to a temp file beside the destination
and are renamed into place, so a failure never leaves a half-written model.

The model file is read once and hashed from the same bytes that are parsed, and every data file
is hashed before it is read, so ``Loaded.sha256`` says exactly what was shrunk; ``changed_file``
tells a caller whether any of them has been rewritten since (a re-export or a checkout racing
a build).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError, Message
from onnx import ModelProto, TensorProto

from hatch_shrinkray.errors import ShrinkrayError, quoted
from hatch_shrinkray.files import NotRegular, TooLarge, file_sha256, read_regular, staging_prefix
from hatch_shrinkray.onnxgraph.graph import scopes
from hatch_shrinkray.onnxgraph.indices import table_rows
from hatch_shrinkray.signals import deferred

TWO_GB = 2**31
SINGLE_FILE_LIMIT = TWO_GB - 64 * 2**20  # protobuf's hard limit, with room for the graph itself


@dataclass
class Loaded:
    model: ModelProto
    label: str
    size: int
    """Bytes read: the model file plus what its tensors take in its external data files (not the
    parts of a shared data file other models use), or the serialized size."""
    path: Path | None
    data_files: tuple[Path, ...] = ()
    sha256: dict[str, str] = field(default_factory=dict)
    """sha256 of every file read, the model file first (empty for a ModelProto source)."""
    tables: dict[str, int] = field(default_factory=dict)
    """The integer inputs that index a table, and its rows (``indices.table_rows``), as read: the
    model is encoded in place later, and generated inputs for the original need them."""


def changed_file(loaded: Loaded) -> str | None:
    """The first file of ``loaded`` whose bytes are no longer what was read, if any."""
    for name, digest in loaded.sha256.items():
        try:
            if file_sha256(Path(name)) != digest:
                return name
        except OSError:
            return name
    return None


def _tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every dense tensor that can hold weights: initializers and tensor attributes, in every
    graph and in model-local functions (onnx loads external data for all of these)."""
    for scope in scopes(model):
        yield from scope.graph.initializer
        yield from _attribute_tensors(scope.graph.node)
    for function in model.functions:
        yield from _attribute_tensors(function.node)


def _external(model: ModelProto) -> Iterator[tuple[TensorProto, dict[str, str]]]:
    """Every tensor whose bytes live in a data file, with its external-data entries by key."""
    for t in _tensors(model):
        if t.data_location == TensorProto.EXTERNAL:
            yield t, {e.key: e.value for e in t.external_data}


def _attribute_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[TensorProto]:
    for node in nodes:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors


def external_locations(model: ModelProto, label: str = "<model>") -> list[str]:
    """Distinct external-data locations, in order; a malformed reference is a ShrinkrayError."""
    out: list[str] = []
    for t, entries in _external(model):
        location = entries.get("location")
        if not isinstance(location, str) or not location or "\0" in location:
            raise ShrinkrayError(f"tensor {quoted(t.name)} has external data without a valid location", path=label,
                                 hint="re-export the model with onnx.save_model(..., save_as_external_data=True)")
        if location not in out:
            out.append(location)
    for scope in scopes(model):
        for sparse in scope.graph.sparse_initializer:
            if TensorProto.EXTERNAL in (sparse.values.data_location, sparse.indices.data_location):
                raise ShrinkrayError(f"sparse initializer {quoted(sparse.values.name)} keeps its data in an "
                                     "external file, which onnx cannot load", path=label,
                                     hint="save the model with its sparse initializers inline")
    return out


def load_model(source: str | os.PathLike[str] | ModelProto) -> Loaded:
    """A private, fully loaded copy of ``source``; the source itself is never modified."""
    if isinstance(source, ModelProto):
        copy = ModelProto()
        copy.CopyFrom(source)
        _check_structure(copy, "<ModelProto>")
        return Loaded(copy, "<ModelProto>", copy.ByteSize(), None, tables=table_rows(copy))
    if not isinstance(source, (str, os.PathLike)):
        raise ShrinkrayError(f"expected a path or an onnx.ModelProto, got {type(source).__name__}")
    path = Path(source)
    label = str(path)
    data = _read(path)
    digests = {label: hashlib.sha256(data).hexdigest()}
    model = _parse(data, label)
    size = len(data)
    del data
    data_files = _resolve_external(model, path)
    referenced = _referenced_bytes(model, path) if data_files else 0
    if data_files:
        for data_file in data_files:
            digests[str(data_file)] = _data_sha256(data_file, label)
        try:
            onnx.load_external_data_for_model(model, str(path.parent))
        except Exception as exc:  # onnx raises OSError, ValueError or its own ValidationError here
            raise ShrinkrayError(f"cannot read its external data: {str(exc).splitlines()[0][:300]}", path=label,
                                 hint="re-export the model with its data file") from exc
        size += referenced
    return Loaded(model, label, size, path, tuple(data_files), digests, table_rows(model))


def _read(path: Path) -> bytes:
    """The bytes of a readable, non-empty regular file, or a ShrinkrayError saying what is wrong."""
    label = str(path)
    if not path.exists():
        raise ShrinkrayError("no such file", path=label, hint="check the path")
    if path.is_dir():
        raise ShrinkrayError("is a directory, not an .onnx file", path=label,
                             hint="pass the .onnx file inside it (globs like dir/*.onnx work)")
    try:
        data = read_regular(path, TWO_GB)
    except NotRegular as exc:
        raise ShrinkrayError(f"is {exc.kind}, not an .onnx file", path=label,
                             hint="pass the model file itself") from exc
    except TooLarge as exc:
        raise ShrinkrayError("is over 2 GB, more than one protobuf file can hold, so it is not an ONNX model",
                             path=label, hint="a model this big keeps its weights in external data files") from exc
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror}", path=label, hint="check file permissions") from exc
    if not data:
        raise ShrinkrayError("is empty (0 bytes)", path=label, hint="re-export or re-download the model")
    return data


def _data_sha256(data_file: Path, label: str) -> str:
    try:
        return file_sha256(data_file)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read external data file {quoted(data_file.name)}: {exc.strerror}",
                             path=label, hint="check file permissions") from exc


def _parse(data: bytes, label: str) -> ModelProto:
    """The model proto without its external data, or a ShrinkrayError saying what is wrong."""
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeWarning, ValueError, OSError) as exc:
        raise ShrinkrayError("is not a valid ONNX model (the protobuf cannot be parsed; truncated or "
                             "corrupted?)", path=label, hint="re-export or re-download the model") from exc
    _check_structure(model, label)
    return model


def external_data_files(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The external-data files a model file reads (validated like ``load_model`` does), without
    loading them."""
    return tuple(_resolve_external(_parse(_read(Path(path)), str(path)), Path(path)))


def _check_structure(model: ModelProto, label: str) -> None:
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ShrinkrayError("is not an ONNX model (no graph)", path=label,
                             hint="is this really an .onnx file?")
    if not model.opset_import:
        raise ShrinkrayError("is not an ONNX model (no opset import)", path=label)
    problem = _not_utf8(model, "")
    if problem:
        raise ShrinkrayError(f"is not a valid ONNX model: {problem}", path=label,
                             hint="protobuf strings must be UTF-8; re-export the model")


TENSOR_TEXT = ("name", "doc_string", "external_data", "metadata_props")
"""The text-bearing fields of a TensorProto; its data fields are never touched (no copies)."""


def _not_utf8(message: Message, where: str) -> str | None:
    """Where ``message`` holds a string that is not UTF-8 (protobuf hands those back as bytes,
    and onnx, onnxruntime and our own code then fail far from the cause), as a readable path:
    ``graph.node[2].then_branch.node[0].value.name``."""
    if isinstance(message, TensorProto):
        fields: Iterable[tuple[Any, Any]] = ((message.DESCRIPTOR.fields_by_name[name], getattr(message, name))
                                             for name in TENSOR_TEXT if name in message.DESCRIPTOR.fields_by_name)
    else:
        fields = message.ListFields()
    for descriptor, value in fields:
        if descriptor.type not in (descriptor.TYPE_STRING, descriptor.TYPE_MESSAGE):
            continue
        if isinstance(message, onnx.AttributeProto) and descriptor.name in ("g", "t"):
            path = where  # the attribute's own name already says which graph or tensor
        else:
            path = f"{where}.{descriptor.name}" if where else descriptor.name
        single = isinstance(value, (str, bytes, Message))
        for index, item in enumerate([value] if single else value):
            at = path if single else f"{path}[{index}]"
            if isinstance(item, onnx.AttributeProto) and isinstance(item.name, str):
                at = f"{where}.{item.name}"
            if isinstance(item, bytes):
                return f"{at} is not UTF-8 text ({quoted(item, 40)})"
            if isinstance(item, Message):
                problem = _not_utf8(item, at)
                if problem:
                    return problem
    return None


def _resolve_external(model: ModelProto, path: Path) -> list[Path]:
    base = path.parent.resolve()
    files: list[Path] = []
    for location in external_locations(model, str(path)):
        if os.path.isabs(location) or Path(location).drive:
            raise ShrinkrayError(f"external data location {quoted(location)} is an absolute path; refused",
                                 path=str(path), hint="keep data files beside the model")
        try:
            target = (base / location).resolve()
            escapes = base not in target.parents and target != base
            present = target.is_file()
        except OSError as exc:  # ENAMETOOLONG, ELOOP, ...
            raise ShrinkrayError(f"cannot open external data file {quoted(location)}: {exc.strerror}",
                                 path=str(path), hint="re-export the model with its data file beside it") from exc
        if escapes:
            raise ShrinkrayError(f"external data location {quoted(location)} escapes the model's directory; "
                                 "refused", path=str(path), hint="keep data files beside the model")
        if not present:
            raise ShrinkrayError(f"external data file {quoted(location)} is missing", path=str(path),
                                 hint="copy the data file next to the model")
        files.append(target)
    if files:
        _check_extents(model, path)
    return files


def _check_extents(model: ModelProto, path: Path) -> None:
    """Every external tensor lies inside its data file (a cut-off copy is the usual cause)."""
    sizes: dict[str, int] = {}
    for t, entries in _external(model):
        location = entries["location"]
        if location not in sizes:
            sizes[location] = (path.parent / location).stat().st_size
        try:
            offset, length = int(entries.get("offset") or 0), int(entries.get("length") or 0)
        except ValueError:
            continue  # onnx's own loader reports malformed numbers
        if offset + length > sizes[location]:
            raise ShrinkrayError(f"external data file {quoted(location)} is too short for tensor {quoted(t.name)} "
                                 f"(needs {length} bytes from offset {offset}, the file has {sizes[location]})",
                                 path=str(path), hint="the data file is truncated; copy or export it again")


def _referenced_bytes(model: ModelProto, path: Path) -> int:
    """The bytes of its data files that the model's tensors take, each range counted once: all of
    a data file of its own, and only its part of one it shares with another model (two models may
    point into one ``weights.bin``; the other's tensors are not this model's input)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for _, entries in _external(model):
        location = entries["location"]
        size = (path.parent / location).stat().st_size
        try:
            offset = int(entries.get("offset") or 0)
            end = offset + int(entries["length"]) if entries.get("length") else size
        except ValueError:
            offset, end = 0, size
        spans.setdefault(location, []).append((offset, min(end, size)))
    total = 0
    for ranges in spans.values():
        reached = 0
        for start, end in sorted(ranges):
            begin = max(start, reached)
            if end > begin:
                total += end - begin
                reached = end
    return total


PACKED_4BIT = {TensorProto.INT4, TensorProto.UINT4, getattr(TensorProto, "FLOAT4E2M1", -1)}


def fits_one_file(model: ModelProto) -> bool:
    """Whether ``model`` can be one protobuf file.

    The weights' bytes are added up from their shapes first: ``ByteSize()`` serializes the whole
    model to measure it (protobuf's upb backend has no size-only pass), which for a model over
    2 GB first fails only after holding most of it twice.
    """
    payload = 0
    for t in _tensors(model):
        if t.data_location == TensorProto.EXTERNAL:
            continue
        count = 1
        for d in t.dims:
            count *= d
        if t.data_type in PACKED_4BIT:
            payload += (count + 1) // 2
        elif t.data_type == TensorProto.STRING:
            payload += t.ByteSize()
        else:
            try:
                payload += count * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
            except (KeyError, TypeError, ValueError):
                payload += t.ByteSize()
        if payload >= SINGLE_FILE_LIMIT:
            return False
    try:
        return int(model.ByteSize()) < SINGLE_FILE_LIMIT
    except Exception:  # google.protobuf.message.EncodeError: "Failed to serialize proto"
        return False


class Staged:
    """A private directory beside the destination where a model is written under its final file
    names, so onnxruntime can load it (data file included) before anything is put in place.
    ``commit`` renames the files into place (data file first); ``discard`` removes them.

    Create it with ``with deferred(): staged = Staged(destination)`` and clean up in a
    ``finally``: a signal can then never strike between the directory appearing and its owner
    knowing about it.
    """

    def __init__(self, destination: Path) -> None:
        self.destination = Path(destination)
        parent = self.destination.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.directory = Path(tempfile.mkdtemp(prefix=staging_prefix(parent), dir=parent))
        except OSError as exc:
            raise ShrinkrayError(f"cannot write to {parent}: {exc.strerror}", path=str(self.destination),
                                 hint="choose a writable output directory") from exc
        self.path = self.directory / self.destination.name
        self.data_files: tuple[Path, ...] = ()

    def write(self, model: ModelProto) -> None:
        try:
            if fits_one_file(model):
                with open(self.path, "wb") as fh:
                    fh.write(model.SerializeToString())
            else:
                location = data_file_name(self.destination)
                onnx.save_model(model, str(self.path), save_as_external_data=True, all_tensors_to_one_file=True,
                                location=location, size_threshold=1024)
                self.data_files = (self.directory / location,)
        except OSError as exc:
            raise ShrinkrayError(f"cannot write: {exc.strerror}", path=str(self.destination),
                                 hint="check free space and permissions") from exc

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in (self.path, *self.data_files))

    def commit(self) -> tuple[Path, ...]:
        """Put the files in place; returns the data files' final paths."""
        final = tuple(self.destination.parent / p.name for p in self.data_files)
        try:
            with deferred():  # the model and its data file land together or not at all
                for staged, target in zip(self.data_files, final, strict=True):
                    os.replace(staged, target)
                os.replace(self.path, self.destination)
        except OSError as exc:
            raise ShrinkrayError(f"cannot write: {exc.strerror}", path=str(self.destination),
                                 hint="check free space and permissions") from exc
        finally:
            self.discard()
        return final

    def discard(self) -> None:
        if self.directory.exists():
            for leftover in self.directory.iterdir():
                leftover.unlink()
            self.directory.rmdir()


def data_file_name(destination: Path) -> str:
    """The one external data file of an output over 2 GB: ``<name>.data``, deterministic."""
    return Path(destination).name + ".data"
