"""Verification inputs: real samples (a recording, or the user's ``.npz``) or seeded generated ones.

Real samples are what the verdict rests on; generated ones are only a smoke check (noise is not
what a model sees: a text recogniser fed 1-pixel-wide noise "agreed" while the shrunk model misread
real lines), so every source says which kind it is. Generated inputs are made less degenerate:
symbolic dimensions get a plausible size (1 for a batch axis: a name that leads some input of two or
more dimensions, or an unnamed leading axis; otherwise at least ``TYPICAL_DIM`` and at least the
input's largest fixed dimension) instead of 1. A name gets one size in every input it appears in.
When the model does not run on those sizes, the runner retries other sizes (``retries``): audio
lengths for the last axis of a waveform-like input, then other sizes for the other dimensions, and
for the batch axes only after that.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.errors import OptionError, ShrinkrayError
from hatch_shrinkray.hints import record_hint
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.recording.matching import find_recording
from hatch_shrinkray.recording.npz import HINT, read_arrays
from hatch_shrinkray.recording.storage import is_recording, read_recording
from hatch_shrinkray.samples import Sequencing

Feed = dict[str, npt.NDArray[Any]]

ORT_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
    "tensor(string)": np.str_,
}
TYPICAL_DIM = 32
RETRY_DIMS = (224, 16, 1)
"""Sizes for symbolic dimensions tried in turn when the model does not run on the plausible ones
(batch axes keep 1 until every size was tried for the other dimensions)."""
AUDIO_DIMS = (16000, 512)
"""Lengths tried first for the last axis of an audio-like input (float, one or two axes, the last
symbolic), the other axes as by default: one second at 16 kHz, then one streaming chunk. A front
end's convolution is often longer than the plausible size and than 224 (512 taps is common), and
an image size on every axis does not fit a waveform."""


@dataclass(frozen=True)
class Sizing:
    """How generated inputs size their symbolic dimensions: the plausible defaults, or ``retry``
    for every dimension not in ``dims`` (batch axes only with ``batch_too``; with ``audio``, only
    the last axis of audio-like inputs)."""

    retry: int | None = None
    batch_too: bool = False
    audio: bool = False

    def text(self) -> str:
        if self.retry is None:
            return "default"
        return f"{self.retry} (audio length)" if self.audio else f"{self.retry} on every axis" if self.batch_too \
            else str(self.retry)


class GeneratedUnusable(ShrinkrayError):
    """Generated inputs cannot verify this model: it does not run on any size tried (``kind``
    ``cannot-run``), or none of its outputs carries a signal on them (``silent``). Either says
    nothing about the shrunk model; the caller decides whether that fails the build."""

    def __init__(self, message: str, *, kind: str, reason: str, path: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, path=path, hint=hint)
        self.kind = kind
        self.reason = reason
        """The message's substance, worded to follow "original kept: "."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: str
    shape: tuple[int | str | None, ...]
    rows: int | None = None
    """An integer input that indexes a table of this many rows (``onnxgraph.indices``): generated
    values stay inside it, whatever ``int-range`` says."""


@dataclass(frozen=True)
class Samples:
    """Inputs for the verification (and, when real, for calibration) and where they came from."""

    feeds: list[Feed]
    """As stored: the later steps of a stream lack the inputs fed back from the step before."""
    source: str
    """For reports: ``recording tests/inputs/x-1234.npz`` or ``generated (seed 0; ...)``."""
    real: bool
    notes: tuple[str, ...] = field(default_factory=tuple)
    units: tuple[str, ...] = ()
    """Per feed, the independent unit it belongs to (``test:<node id>``, ``stream:<k>``, ``call:<n>``,
    ``sample:<i>``); empty: one unit per feed."""
    feedback: tuple[tuple[str, str], ...] = ()
    """(input, output) pairs of a recurrent model: the output of a stream's step feeds that input at
    the next step."""
    streams: tuple[tuple[int, ...], ...] = ()
    """With feedback: each stream's feed indices in step order. As loaded, the later steps of a stream
    lack the feedback inputs: they are the output of the step before, of whichever model runs the
    stream (``samples.run_in_order``)."""
    symbols: tuple[tuple[str, int], ...] = ()
    """Generated inputs: the size each named symbolic dimension got (``batch=1``), for the line."""

    def sequencing(self) -> Sequencing:
        units = self.units if len(self.units) == len(self.feeds) else tuple(
            f"sample:{i}" for i in range(len(self.feeds)))
        return Sequencing(units, self.feedback, self.streams)


def specs_of(session: Any) -> list[InputSpec]:
    return [InputSpec(i.name, i.type, tuple(i.shape)) for i in session.get_inputs()]


def specs_of_model(model: ModelProto) -> list[InputSpec]:
    """The inputs a session of ``model`` would list (graph inputs that are not initializers), as
    onnxruntime spells them, read from the proto: no session needed while the model is in memory."""
    from onnx import helper

    initializers = {t.name for t in model.graph.initializer}
    names = {np.dtype(v): k for k, v in ORT_TYPES.items() if v is not np.str_}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            specs.append(InputSpec(value.name, str(kind), ()))
            continue
        tensor = value.type.tensor_type
        dtype = f"tensor({tensor.elem_type})"
        with contextlib.suppress(KeyError, TypeError, ValueError):
            dtype = names.get(np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)), dtype)
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        specs.append(InputSpec(value.name, dtype, shape))
    return specs


def load_samples(path: Path, specs: list[InputSpec], *, model_sha256: str, model_name: str) -> Samples:
    """Real samples from ``path``: a recording directory, a recording file, or a ``.npz`` with one
    array per input (optionally with a leading sample axis)."""
    notes: tuple[str, ...] = ()
    if path.is_dir():
        path, note = find_recording(path, model_sha256, model_name)
        notes = (note,) if note else ()
    if is_recording(path):
        rec = read_recording(path)
        later = {i for stream in rec.streams for i in stream[1:]}
        fed = {name for name, _ in rec.feedback}
        feeds = _validated([dict(s) for s in rec.samples], specs, path,
                           lambda i: fed if i in later else set())
        units = rec.units or tuple(f"call:{c}" for c in rec.picked)
        source = f"recording {shown(path)} ({_counted(rec, len(feeds))})"
        return Samples(feeds, source, True, notes, units, rec.feedback, rec.streams)
    feeds = _validated(_npz_feeds(read_arrays(path), specs, path), specs, path)
    return Samples(feeds, shown(path), True, notes, tuple(f"sample:{i}" for i in range(len(feeds))))


def _counted(rec: Any, kept: int) -> str:
    if rec.streams and rec.feedback:
        return f"{len(rec.streams)} streams, {kept} steps of {rec.calls} calls"
    return f"{kept} of {rec.calls} calls"


def shown(path: Path) -> str:
    """The path as the user knows it: relative to the working directory when it is under it."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _npz_feeds(arrays: dict[str, Any], specs: list[InputSpec], path: Path) -> list[Feed]:
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
    counts = {arrays[s.name].shape[0] if arrays[s.name].ndim == len(s.shape) + 1 else None for s in specs}
    if len(counts) == 1 and None not in counts:
        (n,) = counts
        return [{s.name: arrays[s.name][i] for s in specs} for i in range(int(n or 0))]
    return [{s.name: arrays[s.name] for s in specs}]


def _validated(feeds: list[Feed], specs: list[InputSpec], path: Path,
               fed_back: Callable[[int], set[str]] = lambda i: set()) -> list[Feed]:
    """The feeds cast to the inputs' types, or a ShrinkrayError naming the array that cannot be used.
    ``fed_back(i)``: the inputs feed ``i`` may lack (a later step of a stream)."""
    label = str(path)
    if not feeds:
        raise ShrinkrayError("holds 0 samples: there is nothing to verify on", path=label, hint=HINT)
    names = {s.name for s in specs}
    out: list[Feed] = []
    for i, feed in enumerate(feeds):
        if not set(feed) <= names or not names - fed_back(i) <= set(feed):
            missing = sorted(names - fed_back(i) - set(feed))
            raise ShrinkrayError(f"sample {i} lacks inputs {', '.join(missing)}" if missing else
                                 f"sample {i} has arrays {', '.join(sorted(set(feed) - names))} that match no "
                                 "model input", path=label, hint=f"the model's inputs are: {', '.join(sorted(names))}")
        out.append({s.name: _cast(feed[s.name], s, label, i, len(feeds)) for s in specs if s.name in feed})
    return out


def _cast(arr: npt.NDArray[Any], spec: InputSpec, label: str, index: int, count: int) -> npt.NDArray[Any]:
    where = f"array {spec.name!r}" + (f" (sample {index})" if count > 1 else "")
    dtype = ORT_TYPES.get(spec.type)
    if dtype is None or dtype is np.str_:
        raise ShrinkrayError(f"input {spec.name!r} has type {spec.type}, which sample files cannot feed",
                             path=label, hint="hatch-shrinkray verifies models with numeric inputs")
    target = np.dtype(dtype)
    if arr.dtype != target and not np.can_cast(arr.dtype, target, casting="same_kind") \
            and not (arr.dtype.kind in "biu" and target.kind == "f"):
        raise ShrinkrayError(f"{where} is {arr.dtype} but the input takes {target}", path=label,
                             hint="save the array with the input's dtype")
    if spec.shape and (arr.ndim != len(spec.shape) or any(
            isinstance(d, int) and d > 0 and n != d for n, d in zip(arr.shape, spec.shape, strict=True))):
        wanted = ", ".join(str(d) if isinstance(d, int) and d > 0 else str(d or "?") for d in spec.shape)
        raise ShrinkrayError(f"{where} has shape ({', '.join(map(str, arr.shape))}) but the input takes ({wanted})",
                             path=label, hint="every sample must fit the model's inputs; record them "
                                                           "again from the model as it is now")
    if arr.dtype.kind == "f" and arr.size and not np.isfinite(arr).any():
        raise ShrinkrayError(f"{where} is entirely NaN/inf: outputs computed from it check nothing", path=label,
                             hint="use real inputs")
    return np.ascontiguousarray(arr.astype(target, copy=False))


GENERATED_MAX_BYTES = 1_000_000_000
"""The most generated inputs may take, all samples together: what a sample file may hold."""


def generate(specs: list[InputSpec], options: VerifyOptions, sizing: Sizing = Sizing()) -> list[Feed]:
    """Seeded random samples; symbolic dimensions from ``options.dims``, else as ``sizing`` says
    (see ``generated_shapes``). Their size is checked before anything is allocated: an OptionError names the
    options that make it."""
    shapes, _ = generated_shapes(specs, options, sizing)
    _check_generated_size(specs, options, shapes)
    rng = np.random.default_rng(options.seed)
    samples: list[Feed] = []
    for _ in range(options.samples):
        feed: Feed = {}
        for spec in specs:
            dtype = ORT_TYPES.get(spec.type)
            if dtype is None or dtype is np.str_:
                raise GeneratedUnusable(f"cannot generate values for input {spec.name!r} of type {spec.type}",
                                        kind="cannot-run", reason=f"generated inputs cannot feed its input "
                                        f"{spec.name!r} ({spec.type})", hint="provide real inputs: " + record_hint())
            feed[spec.name] = np.asarray(_random(rng, np.dtype(dtype), shapes[spec.name], options, spec.rows))
        samples.append(feed)
    return samples


def _check_generated_size(specs: list[InputSpec], options: VerifyOptions, generated: dict[str, tuple[int, ...]]) \
        -> None:
    total, keys, shapes = 0, ["<<samples>>"], []
    dims = options.dim_map()
    for spec in specs:
        dtype = ORT_TYPES.get(spec.type)
        if dtype is None or dtype is np.str_:
            continue
        shape = generated[spec.name]
        count = 1
        for size in shape:
            count *= size
        total += count * np.dtype(dtype).itemsize * options.samples
        shapes.append(f"{spec.name} {'x'.join(map(str, shape)) or 'scalar'}")
        for d, value in zip(spec.shape, shape, strict=True):
            if not _symbolic(d) or value == 1:
                continue
            key = f"<<dims:{d}>>" if str(d) in dims else "<<default_dim>>" if options.default_dim is not None \
                else f"<<dims:{d or 'NAME'}>>"
            if key not in keys:
                keys.append(key)
        kind = np.dtype(dtype)
        if kind.kind in "iu":
            info = np.iinfo(kind)
            if max(options.int_low, int(info.min)) >= min(options.int_high, int(info.max) + 1):
                raise OptionError(f"<<int_range>> [{options.int_low}, {options.int_high}) holds no value of input "
                                  f"{spec.name!r}, which is {kind}", hint="give a range the input's type can hold")
    if total > GENERATED_MAX_BYTES:
        listed = ", ".join(keys[:-1]) + f" or {keys[-1]}" if len(keys) > 1 else keys[0]
        raise OptionError(f"generated inputs would take {total / 1e9:.1f} GB ({options.samples} samples of "
                          f"{'; '.join(shapes)}), over the {GENERATED_MAX_BYTES / 1e9:.0f} GB they may take; "
                          f"lower {listed}", hint="or verify on real inputs: " + record_hint())


def generated_shapes(specs: Sequence[InputSpec], options: VerifyOptions, sizing: Sizing = Sizing()) \
        -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Each input's generated shape, and the size each named symbolic dimension got (one size per
    name, in every input it appears in). Precedence: ``dims``, the retry size, ``default-dim``, then
    the plausible default (module docstring)."""
    dims = options.dim_map()
    batch = {d for s in specs if len(s.shape) >= 2 and isinstance(d := s.shape[0], str) and d}
    named: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        fixed = [d for d in spec.shape if isinstance(d, int) and d > 0]
        shape = []
        for axis, d in enumerate(spec.shape):
            if isinstance(d, int) and d > 0:
                shape.append(d)
                continue
            name = d if isinstance(d, str) and d else None
            leading = (axis == 0 and len(spec.shape) >= 2) or name in batch
            if name is not None and name in named:
                size = named[name]
            elif name is not None and name in dims:
                size = dims[name]
            elif sizing.retry is not None and (
                    (sizing.audio and axis == len(spec.shape) - 1 and audio_like(spec, options))
                    or (not sizing.audio and (sizing.batch_too or not leading))):
                size = sizing.retry
            elif options.default_dim is not None:
                size = options.default_dim
            else:
                size = 1 if leading else max([TYPICAL_DIM, *fixed])
            if name is not None:
                named[name] = size
            shape.append(size)
        shapes[spec.name] = tuple(shape)
    return shapes, named


def _symbolic(d: int | str | None) -> bool:
    return not (isinstance(d, int) and d > 0)


def _left(d: int | str | None, dims: dict[str, int]) -> bool:
    """Whether dimension ``d`` is symbolic and not given by ``dims``."""
    return _symbolic(d) and str(d) not in dims


def audio_like(spec: InputSpec, options: VerifyOptions) -> bool:
    """A waveform, as far as a signature tells: float, one or two axes, the last one symbolic."""
    return spec.type in ("tensor(float)", "tensor(float16)", "tensor(double)") and 1 <= len(spec.shape) <= 2 \
        and _left(spec.shape[-1], options.dim_map())


def retries(specs: Sequence[InputSpec], options: VerifyOptions) -> list[Sizing]:
    """The sizings tried in turn after the plausible one, when the model does not run on it: audio
    lengths where an input looks like a waveform, then ``RETRY_DIMS`` for the other dimensions, then
    for the batch axes too (but ``default-dim``, already tried). The runner skips a sizing that
    gives shapes already tried."""
    dims = options.dim_map()
    if not any(_left(d, dims) for s in specs for d in s.shape):
        return []
    audio = [Sizing(d, audio=True) for d in AUDIO_DIMS
             if d != options.default_dim and any(audio_like(s, options) for s in specs)]
    others = [d for d in RETRY_DIMS if d != options.default_dim]
    return [*audio, *(Sizing(d) for d in others), *(Sizing(d, batch_too=True) for d in others)]


def describe_generated(specs: Sequence[InputSpec], options: VerifyOptions, sizing: Sizing) -> str:
    shapes, _ = generated_shapes(specs, options, sizing)
    listed = "; ".join(f"{s.name} {'x'.join(map(str, shapes[s.name])) or 'scalar'}" for s in specs)
    return f"generated (seed {options.seed}; {listed})"


def _random(rng: np.random.Generator, dtype: np.dtype[Any], shape: tuple[int, ...],
            options: VerifyOptions, rows: int | None = None) -> npt.NDArray[Any]:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    low, high = integer_range(dtype, options, rows)
    return rng.integers(low, high, size=shape).astype(dtype)


def integer_range(dtype: np.dtype[Any], options: VerifyOptions, rows: int | None = None) -> tuple[int, int]:
    """``[low, high)`` of generated values of an integer input: ``int-range`` within what the type
    holds, and inside a table of ``rows`` the input indexes (where ``int-range`` reaches past it)."""
    info = np.iinfo(dtype)
    low = max(options.int_low, int(info.min))
    high = min(options.int_high, int(info.max) + 1)
    if rows is not None and max(low, 0) < min(high, rows):
        low, high = max(low, 0), min(high, rows)
    return low, high
