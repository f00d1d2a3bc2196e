"""Verification inputs: the user's ``.npz`` samples, or seeded arrays generated from the signature."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import VerifyOptions

Feed = dict[str, npt.NDArray[Any]]

ORT_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
    "tensor(string)": np.str_,
}


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: str
    shape: tuple[int | str | None, ...]


def specs_of(session: Any) -> list[InputSpec]:
    return [InputSpec(i.name, i.type, tuple(i.shape)) for i in session.get_inputs()]


def load_npz(path: Path, specs: list[InputSpec]) -> list[Feed]:
    """Samples from a ``.npz``: one array per input, optionally with a leading sample axis."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ShrinkrayError(f"cannot read sample inputs: {exc}", path=str(path),
                             hint="write it with numpy.savez(path, input_name=array, ...)") from exc
    wanted = {s.name for s in specs}
    missing = sorted(wanted - arrays.keys())
    extra = sorted(arrays.keys() - wanted)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing arrays for inputs {', '.join(missing)}")
        if extra:
            parts.append(f"arrays {', '.join(extra)} match no model input")
        raise ShrinkrayError("; ".join(parts), path=str(path),
                             hint=f"the model's inputs are: {', '.join(s.name for s in specs)}")
    counts = set()
    for spec in specs:
        arr = arrays[spec.name]
        counts.add(arr.shape[0] if arr.ndim == len(spec.shape) + 1 else None)
    if len(counts) == 1 and None not in counts:
        (n,) = counts
        return [{s.name: _cast(arrays[s.name][i], s) for s in specs} for i in range(int(n or 0))]
    return [{s.name: _cast(arrays[s.name], s) for s in specs}]


def _cast(arr: npt.NDArray[Any], spec: InputSpec) -> npt.NDArray[Any]:
    dtype = ORT_TYPES.get(spec.type)
    return np.ascontiguousarray(arr.astype(dtype) if dtype is not None else arr)


def generate(specs: list[InputSpec], options: VerifyOptions, default_dim: int | None = None) -> list[Feed]:
    """Seeded random samples; symbolic dimensions from ``options.dims`` or the default."""
    rng = np.random.default_rng(options.seed)
    dims = options.dim_map()
    fallback = default_dim or options.default_dim
    samples: list[Feed] = []
    for _ in range(options.samples):
        feed: Feed = {}
        for spec in specs:
            dtype = ORT_TYPES.get(spec.type)
            if dtype is None or dtype is np.str_:
                raise ShrinkrayError(f"cannot generate values for input {spec.name!r} of type {spec.type}",
                                     hint="provide sample inputs with `inputs` (a .npz)")
            shape = tuple(d if isinstance(d, int) and d >= 0 else dims.get(str(d), fallback)
                          for d in spec.shape)
            feed[spec.name] = np.asarray(_random(rng, np.dtype(dtype), shape, options))
        samples.append(feed)
    return samples


def symbolic(specs: list[InputSpec], options: VerifyOptions) -> bool:
    """Whether some dimension was filled with the default (so a retry with another may help)."""
    dims = options.dim_map()
    return any(not (isinstance(d, int) and d >= 0) and str(d) not in dims for s in specs for d in s.shape)


def _random(rng: np.random.Generator, dtype: np.dtype[Any], shape: tuple[int, ...],
            options: VerifyOptions) -> npt.NDArray[Any]:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    low = max(options.int_low, int(info.min))
    high = min(options.int_high, int(info.max) + 1)
    return rng.integers(low, high, size=shape).astype(dtype)
