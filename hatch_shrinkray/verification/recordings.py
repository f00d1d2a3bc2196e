"""Recordings: the inputs a real workload fed to onnxruntime, one file per model.

Format, version 1 (``hatch-shrinkray record`` writes it; numpy alone reads it with
``np.load(path, allow_pickle=False)``):

* the file is ``<model stem>-<first 16 hex digits of the model's sha256>.npz`` in the recording
  directory;
* ``__meta__`` is a 0-d string array holding JSON: ``format`` (``hatch-shrinkray-recording``),
  ``version`` (1), ``model_sha256`` (of the model bytes the session was given), ``model`` (the path
  as given, for people; ``<bytes>`` for a session made from bytes), ``inputs`` (input names in
  order), ``samples``, ``calls`` (``run()`` calls seen) and ``picked`` (which calls were kept, counting the calls of
  several processes one after the other);
* ``s<i>_<j>`` (``s0003_1``) is sample ``i``'s value for input ``inputs[j]``; every sample has its own
  shapes (text lines of different widths, audio chunks of different lengths).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.verification.npz import read_arrays, write_arrays

FORMAT = "hatch-shrinkray-recording"
VERSION = 1
META = "__meta__"
SHA_DIGITS = 16

Feed = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class Recording:
    model_sha256: str
    model: str
    inputs: tuple[str, ...]
    samples: tuple[Feed, ...]
    calls: int
    picked: tuple[int, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    """Other metadata (who recorded it), kept as written."""

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for feed in self.samples for a in feed.values())


def file_name(model_sha256: str, model: str) -> str:
    """``<stem>-<sha16>.npz``: the stem for people, the digest so that two models never share a file."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).stem if model != "<bytes>" else "model")[:60]
    return f"{stem or 'model'}-{model_sha256[:SHA_DIGITS]}.npz"


def write_recording(directory: Path, rec: Recording, *, name: str | None = None) -> Path:
    """Write ``rec`` as ``directory/<file_name>`` (or ``name``), atomically and reproducibly."""
    meta = {"format": FORMAT, "version": VERSION, "model_sha256": rec.model_sha256, "model": rec.model,
            "inputs": list(rec.inputs), "samples": len(rec.samples), "calls": rec.calls,
            "picked": list(rec.picked), **rec.extra}
    arrays: dict[str, npt.NDArray[Any]] = {META: np.array(json.dumps(meta, sort_keys=True))}
    for i, feed in enumerate(rec.samples):
        for j, key in enumerate(rec.inputs):
            arrays[f"s{i:04d}_{j}"] = feed[key]
    path = directory / (name or file_name(rec.model_sha256, rec.model))
    write_arrays(path, arrays)
    return path


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a recording file (it has a ``__meta__`` member), without reading arrays."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return f"{META}.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def read_recording(path: Path) -> Recording:
    label = str(path)
    arrays = read_arrays(path, text=frozenset({META}))
    try:
        meta = json.loads(str(arrays.pop(META)[()]))
        if meta.get("format") != FORMAT:
            raise ValueError(f"format is {meta.get('format')!r}")
        if meta.get("version") != VERSION:
            raise ValueError(f"version {meta.get('version')!r}; this hatch-shrinkray reads version {VERSION}")
        inputs = tuple(str(n) for n in meta["inputs"])
        count = int(meta["samples"])
        samples = tuple({name: arrays.pop(f"s{i:04d}_{j}") for j, name in enumerate(inputs)} for i in range(count))
    except (KeyError, ValueError, TypeError) as exc:
        why = f"its metadata or arrays lack {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ShrinkrayError(f"not a readable recording: {why}", path=label,
                             hint="record it again with `hatch-shrinkray record`") from exc
    if arrays:
        raise ShrinkrayError(f"not a readable recording: unexpected arrays {', '.join(sorted(arrays)[:5])}",
                             path=label, hint="record it again with `hatch-shrinkray record`")
    known = {"format", "version", "model_sha256", "model", "inputs", "samples", "calls", "picked"}
    return Recording(str(meta["model_sha256"]), str(meta["model"]), inputs, samples, int(meta.get("calls", count)),
                     tuple(int(i) for i in meta.get("picked", range(count))),
                     {k: v for k, v in meta.items() if k not in known})


def find_recording(directory: Path, model_sha256: str, model_name: str) -> tuple[Path, str]:
    """The recording of the model with these bytes, or of the same file name (with a note saying so)."""
    label = str(directory)
    files = sorted(p for p in directory.glob("*.npz") if p.is_file())
    exact = [p for p in files if p.name.endswith(f"-{model_sha256[:SHA_DIGITS]}.npz")]
    for path in exact:
        if read_recording(path).model_sha256 == model_sha256:
            return path, ""
    stem = Path(model_name).stem
    named = [p for p in files if p.name.rsplit("-", 1)[0] == re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[:60]]
    if len(named) == 1:
        return named[0], (f"matched {named[0].name} by file name, not by content: {model_name} changed since it "
                          "was recorded; record again to verify on inputs of this exact model")
    have = ", ".join(p.name for p in files[:6]) or "no recordings"
    more = " (several by that name)" if named else ""
    raise ShrinkrayError(f"holds no recording of {model_name} (sha256 {model_sha256[:SHA_DIGITS]}...){more}; it has: "
                         f"{have}", path=label,
                         hint="run the code that uses this model under `hatch-shrinkray record --output "
                              f"{directory} -- COMMAND`")


def merge(parts: Sequence[Recording], max_samples: int, max_bytes: int) -> Recording:
    """One recording from the parts that several processes wrote for one model, bounded again.

    Parts are ordered by their content (not by process id or finishing order), so the same runs give
    the same file; the samples kept are spread evenly over the merged sequence.
    """
    ordered = sorted(parts, key=_digest)
    samples = [s for p in ordered for s in p.samples]
    offsets = [sum(p.calls for p in ordered[:k]) for k in range(len(ordered))]
    calls = [offset + i for p, offset in zip(ordered, offsets, strict=True) for i in p.picked]
    keep = spread(len(samples), max_samples)
    while len(keep) > 1 and sum(_nbytes(samples[i]) for i in keep) > max_bytes:
        keep = spread(len(samples), len(keep) - 1)
    first = ordered[0]
    model = next((p.model for p in ordered if p.model != "<bytes>"), first.model)
    return Recording(first.model_sha256, model, first.inputs, tuple(samples[i] for i in keep),
                     sum(p.calls for p in ordered), tuple(calls[i] for i in keep), first.extra)


def spread(total: int, wanted: int) -> list[int]:
    """``wanted`` indices evenly spread over ``range(total)``, first and last included."""
    if total <= wanted:
        return list(range(total))
    if wanted <= 1:
        return [0][:wanted]
    return sorted({round(k * (total - 1) / (wanted - 1)) for k in range(wanted)})


def _nbytes(feed: Feed) -> int:
    return sum(int(a.nbytes) for a in feed.values())


def _digest(rec: Recording) -> str:
    import hashlib

    h = hashlib.sha256()
    for feed in rec.samples:
        for name in rec.inputs:
            a = np.ascontiguousarray(feed[name])
            h.update(f"{name}{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()
