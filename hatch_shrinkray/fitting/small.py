"""``auto``'s rungs for the float32 tensors below ``min-elements``: biases, norm weights, small
convolutions, stored as fp16 and cast back to float32 when the session is created; and the small
weights of Conv, MatMul and Gemm among them encoded by ``auto``'s plan, on the rungs of the large
ones (int8 per channel, fewer levels, coarser steps).

No int8 rung touches them, and in a model whose weights ``auto`` has made small they can be a
large share of the download. fp16 keeps every value to its own precision in
its normal range and decodes with one ``Cast``, which onnxruntime folds at load like int8's chain,
so the graph it runs is the original's. A tensor qualifies only where it is an operand of float
computation (not a shape, an index or a resize scale, which must stay exact and constant) and
where fp16 stores it to that precision: a value beyond fp16's range, or an epsilon of 1e-6 that
fp16 keeps only as a subnormal or zero, leaves its tensor float32. Method ``int8`` never uses these
rungs (round-to-nearest int8 is the floor the guard compares with); ``auto``'s guard judges the
plan with them, and without them where it loses.

A small weight (a depthwise or pointwise convolution, a small projection; ``small_weight``) is a
tensor int8 would store as int8 if only it were larger: its codes and one scale per channel
(``Cast`` and ``Mul``, folded at load like every int8 weight) take about half of fp16's bytes, even
with nine values a channel. But such weights are often the most sensitive of a model (a stem
convolution, depthwise kernels: rounded to nearest together they moved a recogniser's outputs as
much as every large weight's int8), so ``auto`` does not round them blindly: they enter its search
like the large weights (output-aware rounding, fewer levels, coarser steps, 16 bits or float32,
each measured alone), with float32 as their floor, as method int8 keeps them. Those the plan
encodes are written here with the plan's decode; the rest of the small tensors as fp16. Where the
plan with them loses, the guard judges the same plan's other weights with every small tensor in fp16
(the small weights back at float32), then without any small tensor stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto, numpy_helper

from hatch_shrinkray.encodings.fp16 import Fp16Encoder
from hatch_shrinkray.fitting.choices import Planned
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.numerics.entropy import estimated_bytes
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.graph import Site, find_sites, opset_version
from hatch_shrinkray.onnxgraph.rewrite import encode_weights, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord, human

Key = tuple[str, str]
FLOAT32 = 1
WORDS = "small tensors in fp16"
"""The rung as the report line names it."""
PLANNED_WORDS = "small weights in the plan"

MIN_ELEMENTS = 128
"""Below this many values a tensor saves at most 256 bytes, and still costs a ``Cast`` for the session
to fold when it is created: a model's many tiny tensors (scalars, a few channels' norms) hold few of
the bytes and most of those nodes."""
PRECISION = 2.0 ** -11
"""fp16's relative rounding error at its worst in its normal range: a tensor whose relative error
(L2) is larger holds values fp16 keeps only as subnormals or zero."""

_ALL = None
FLOAT_OPERANDS: dict[str, frozenset[int] | None] = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Sum", "Mean", "Max", "Min", "MatMul", "Gemm", "Concat"),
                    _ALL),
    "Conv": frozenset({1, 2}), "ConvTranspose": frozenset({1, 2}), "PRelu": frozenset({1}),
    "BatchNormalization": frozenset({1, 2, 3, 4}), "InstanceNormalization": frozenset({1, 2}),
    "LayerNormalization": frozenset({1, 2}), "GroupNormalization": frozenset({1, 2}),
    "LSTM": frozenset({1, 2, 3, 5, 6, 7}), "GRU": frozenset({1, 2, 3, 5}), "RNN": frozenset({1, 2, 3, 5}),
    "Where": frozenset({1, 2}),
    **dict.fromkeys(("Slice", "Gather", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Tile"),
                    frozenset({0})),
}
"""Per standard op, the inputs that are float operands of its computation (None: every input). A
small tensor read anywhere else (a ``Resize`` scale, a ``Range`` bound, a ``Clip`` bound, a contrib
op) stays float32."""
WEIGHT_MIN_ELEMENTS = 1024
"""Below this many values a small weight saves at most about a kilobyte over fp16, and its decode costs
a ``Mul`` beside fp16's ``Cast`` for the session to fold when it is created: it stays with the fp16
rung."""
WEIGHT_INPUTS: dict[str, frozenset[int]] = {"Conv": frozenset({1}), "ConvTranspose": frozenset({1}),
                                            "MatMul": frozenset({0, 1}), "Gemm": frozenset({0, 1})}
"""The inputs that are a layer's weight matrix or kernel: a small tensor read only there may be int8
(a bias or a norm's scale holds one value a channel, where a per-channel scale would save nothing)."""


@dataclass(frozen=True)
class Small:
    """The small tensors ``auto`` stores as fp16 (or as its plan encoded them: ``planned``), each with
    its decode."""

    decodes: dict[Key, Decode]
    sizes: dict[str, tuple[int, int]]
    """Per target: the tensors' bytes as float32 and as stored, as the target counts them."""
    planned: frozenset[Key] = frozenset()
    """The small weights among ``decodes`` stored as ``auto``'s plan encoded them (int8 and its rungs)."""
    fp16: Small | None = None
    """The same tensors with every one fp16 can hold in fp16 (possibly none): the rung without the
    planned small weights, judged where the plan with them loses (None: this is that rung already)."""

    def __bool__(self) -> bool:
        return bool(self.decodes)

    @property
    def name(self) -> str:
        """The rung in words: ``small tensors in fp16``, or ``small weights in the plan and tensors in fp16``."""
        if not self.planned:
            return WORDS
        return PLANNED_WORDS if len(self.planned) == len(self.decodes) else f"{PLANNED_WORDS} and tensors in fp16"

    @property
    def values(self) -> dict[Key, npt.NDArray[Any]]:
        """What each tensor holds after the session folds its ``Cast``."""
        return {k: d.decoded for k, d in self.decodes.items()}

    def words(self) -> str:
        """``small tensors in fp16: 112 tensors below min-elements, 573.22 KB -> 286.61 KB``, or
        ``small weights in the plan and tensors in fp16: 28 + 40 tensors below min-elements, ...``."""
        before, after = self.sizes["disk"]
        n, k = len(self.decodes), len(self.planned)
        count = f"{k} + {n - k} tensors" if 0 < k < n else f"{n} tensor{'s' if n != 1 else ''}"
        return f"{self.name}: {count} below min-elements, {human(before)} -> {human(after)}"


TARGETS = ("disk", "wheel", "web")


def small_tensors(model: ModelProto, options: ShrinkOptions, weights: Mapping[Key, Decode] | None = None) -> Small:
    """The float32 tensors below ``min-elements`` (and of at least ``MIN_ELEMENTS``) that feed float
    computation only, as fp16 where it stores them to its precision; the small weights ``auto``'s plan
    encoded (``weights``: ``small_weight`` ones) with the plan's decode instead. The user's
    ``exclude-tensors``, ``exclude-ops`` and ``encodings`` apply to them as to any weight. Its ``fp16``
    is the same without ``weights``."""
    opts = _options(options)
    opset = opset_version(model)
    planned = dict(weights or {})
    halves: dict[Key, Decode] = {}
    originals: dict[Key, npt.NDArray[Any]] = {}
    for site in find_sites(model):
        if site.dtype != FLOAT32 or site.size >= options.min_elements or not _eligible(site, opts):
            continue
        w = site.array()
        key = site_key(site)
        dec = _fp16(w, EncodeContext(opts, opset, tuple(n for n, _ in site.consumers), None, ""))
        if dec is not None:
            halves[key] = dec
        if key in halves or key in planned:
            originals[key] = w
    fp16 = _small(halves, originals, frozenset())
    ints = {k: d for k, d in planned.items() if k in originals}
    return fp16 if not ints else replace(_small({**halves, **ints}, originals, frozenset(ints)), fp16=fp16)


def small_weight(site: Site, options: ShrinkOptions) -> bool:
    """A float32 weight of a Conv, MatMul or Gemm below ``min-elements`` (and of at least
    ``WEIGHT_MIN_ELEMENTS``) that this rung may store: ``auto`` searches its encoding as a large weight's."""
    return (site.dtype == FLOAT32 and WEIGHT_MIN_ELEMENTS <= site.size < options.min_elements
            and _eligible(site, _options(options)) and bool(site.consumers)
            and all(n.op_type in WEIGHT_INPUTS and i in WEIGHT_INPUTS[n.op_type] for n, i in site.consumers))


def _small(decodes: dict[Key, Decode], originals: dict[Key, npt.NDArray[Any]], planned: frozenset[Key]) -> Small:
    sizes = {t: (sum(estimated_bytes({"w": originals[k]}, t) for k in decodes),
                 sum(estimated_bytes(d.stored, t) for d in decodes.values())) for t in TARGETS}
    return Small(decodes, sizes, planned)


def write_small(model: ModelProto, options: ShrinkOptions, small: Small) -> list[TensorRecord]:
    """Store ``small``'s tensors in ``model`` (in place), each with its decode; a record for each."""
    if not small:
        return []
    enc = Planned(small.decodes, Fp16Encoder(), fallback_float32=False)
    records = encode_weights(model, enc, _options(options), select=lambda site: site_key(site) in small.decodes
                             and enc.select(site))
    return [replace(r, note=f"below min-elements: {r.encoding} ({_rung(small, (r.scope, r.name))}, auto)")
            for r in records if (r.scope, r.name) in small.decodes and r.encoding != "kept"]


def _rung(small: Small, key: Key) -> str:
    return PLANNED_WORDS if key in small.planned else WORDS


def with_values(model: ModelProto, values: Mapping[Key, npt.NDArray[Any]]) -> None:
    """Put ``values`` in place of the tensors they name (float32, as the folded ``Cast`` gives them),
    in ``model`` itself: a probe copy judges the plan with them."""
    for site in find_sites(model):
        key = site_key(site)
        if key in values:
            site.tensor.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(values[key]), site.name))


def _options(options: ShrinkOptions) -> ShrinkOptions:
    return replace(options, min_elements=MIN_ELEMENTS)


def _eligible(site: Site, options: ShrinkOptions) -> bool:
    if skip_reason(site, options) is not None or not site.consumers:
        return False
    if any(o.name == site.name for o in site.scope.graph.output):
        return False
    for node, index in site.consumers:
        if node.domain not in ("", "ai.onnx") or node.op_type not in FLOAT_OPERANDS:
            return False
        inputs = FLOAT_OPERANDS[node.op_type]
        if inputs is not None and index not in inputs:
            return False
    return True


def _fp16(w: npt.NDArray[Any], ctx: EncodeContext) -> Decode | None:
    """The fp16 decode of ``w`` where fp16 stores it to its precision, else None."""
    try:
        dec = Fp16Encoder().encode(w, ctx)
    except NotEncodable:
        return None
    finite = np.isfinite(w)
    if not np.array_equal(np.isfinite(dec.decoded), finite):
        return None
    exact = w[finite].astype(np.float64)
    error = float(np.linalg.norm(dec.decoded[finite].astype(np.float64) - exact))
    return dec if error <= PRECISION * float(np.linalg.norm(exact)) else None
