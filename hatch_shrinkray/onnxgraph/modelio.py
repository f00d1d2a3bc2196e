"""Reading models safely and writing them atomically.

Every read problem becomes one ShrinkrayError naming the file and what to do; external-data
locations may not escape the model's directory; writes go to a temp file beside the destination
and are renamed into place, so a failure never leaves a half-written model.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.onnxgraph.graph import scopes

TWO_GB = 2**31
SINGLE_FILE_LIMIT = TWO_GB - 64 * 2**20  # protobuf's hard limit, with room for the graph itself


@dataclass
class Loaded:
    model: ModelProto
    label: str
    size: int
    """Bytes on disk (model file plus external data files), or the serialized size."""
    path: Path | None
    data_files: tuple[Path, ...] = ()


def _tensors(model: ModelProto) -> Iterator[TensorProto]:
    for scope in scopes(model):
        yield from scope.graph.initializer
        for node in scope.graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t


def external_locations(model: ModelProto, label: str = "<model>") -> list[str]:
    """Distinct external-data locations, in order; a malformed reference is a ShrinkrayError."""
    out: list[str] = []
    for t in _tensors(model):
        if t.data_location != TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        location = entries.get("location")
        if not isinstance(location, str) or not location or "\0" in location:
            raise ShrinkrayError(f"tensor {t.name!r} has external data without a valid location", path=label,
                                 hint="re-export the model with onnx.save_model(..., save_as_external_data=True)")
        if location not in out:
            out.append(location)
    return out


def load_model(source: str | os.PathLike[str] | ModelProto) -> Loaded:
    """A private, fully loaded copy of ``source``; the source itself is never modified."""
    if isinstance(source, ModelProto):
        copy = ModelProto()
        copy.CopyFrom(source)
        _check_structure(copy, "<ModelProto>")
        return Loaded(copy, "<ModelProto>", copy.ByteSize(), None)
    if not isinstance(source, (str, os.PathLike)):
        raise ShrinkrayError(f"expected a path or an onnx.ModelProto, got {type(source).__name__}")
    path = Path(source)
    label = str(path)
    size = _readable_size(path)
    model = _parse(path)
    data_files = _resolve_external(model, path)
    if data_files:
        try:
            onnx.load_external_data_for_model(model, str(path.parent))
        except Exception as exc:  # onnx raises OSError, ValueError or its own ValidationError here
            raise ShrinkrayError(f"cannot read its external data: {str(exc).splitlines()[0][:300]}", path=label,
                                 hint="re-export the model with its data file") from exc
        size += sum(p.stat().st_size for p in data_files)
    return Loaded(model, label, size, path, tuple(data_files))


def _readable_size(path: Path) -> int:
    """The size of a readable, non-empty regular file, or a ShrinkrayError saying what is wrong."""
    label = str(path)
    if not path.exists():
        raise ShrinkrayError("no such file", path=label, hint="check the path")
    if path.is_dir():
        raise ShrinkrayError("is a directory, not an .onnx file", path=label,
                             hint="pass the .onnx file inside it (globs like dir/*.onnx work)")
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(1)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read: {exc.strerror}", path=label, hint="check file permissions") from exc
    if not head:
        raise ShrinkrayError("is empty (0 bytes)", path=label, hint="re-export or re-download the model")
    return size


def _parse(path: Path) -> ModelProto:
    """The model proto without its external data, or a ShrinkrayError saying what is wrong."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError, OSError) as exc:
        raise ShrinkrayError("is not a valid ONNX model (the protobuf cannot be parsed; truncated or "
                             "corrupted?)", path=str(path), hint="re-export or re-download the model") from exc
    _check_structure(model, str(path))
    return model


def external_data_files(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The external-data files a model file reads (validated like ``load_model`` does), without
    loading them."""
    _readable_size(Path(path))
    return tuple(_resolve_external(_parse(Path(path)), Path(path)))


def _check_structure(model: ModelProto, label: str) -> None:
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ShrinkrayError("is not an ONNX model (no graph)", path=label,
                             hint="is this really an .onnx file?")
    if not model.opset_import:
        raise ShrinkrayError("is not an ONNX model (no opset import)", path=label)


def _resolve_external(model: ModelProto, path: Path) -> list[Path]:
    base = path.parent.resolve()
    files: list[Path] = []
    for location in external_locations(model, str(path)):
        if os.path.isabs(location) or Path(location).drive:
            raise ShrinkrayError(f"external data location {location!r} is an absolute path; refused",
                                 path=str(path), hint="keep data files beside the model")
        target = (base / location).resolve()
        if base not in target.parents and target != base:
            raise ShrinkrayError(f"external data location {location!r} escapes the model's directory; "
                                 "refused", path=str(path), hint="keep data files beside the model")
        if not target.is_file():
            raise ShrinkrayError(f"external data file {location!r} is missing", path=str(path),
                                 hint="copy the data file next to the model")
        files.append(target)
    return files


def fits_one_file(model: ModelProto) -> bool:
    """Whether ``model`` can be one protobuf file; ByteSize() itself fails for protos over 2 GB."""
    try:
        return int(model.ByteSize()) < SINGLE_FILE_LIMIT
    except Exception:  # google.protobuf.message.EncodeError: "Failed to serialize proto"
        return False


class Staged:
    """A model written into a private directory beside its destination, under its final file
    names, so onnxruntime can load it (data file included) before anything is put in place.
    ``commit`` renames the files into place (data file first); ``discard`` removes them."""

    def __init__(self, model: ModelProto, destination: Path) -> None:
        self.destination = Path(destination)
        parent = self.destination.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.directory = Path(tempfile.mkdtemp(prefix=".shrinkray-", dir=parent))
        except OSError as exc:
            raise ShrinkrayError(f"cannot write to {parent}: {exc.strerror}", path=str(self.destination),
                                 hint="choose a writable output directory") from exc
        self.path = self.directory / self.destination.name
        self.data_files: tuple[Path, ...] = ()
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
            self.discard()
            raise ShrinkrayError(f"cannot write: {exc.strerror}", path=str(self.destination),
                                 hint="check free space and permissions") from exc
        except BaseException:  # Ctrl-C while writing: the caller holds no handle to clean up yet
            self.discard()
            raise

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in (self.path, *self.data_files))

    def commit(self) -> tuple[Path, ...]:
        """Put the files in place; returns the data files' final paths."""
        final = tuple(self.destination.parent / p.name for p in self.data_files)
        try:
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
