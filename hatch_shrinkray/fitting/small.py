"""``auto``'s rung for the float32 tensors below ``min-elements``: biases, norm weights, small
convolutions, stored as fp16 and cast back to float32 when the session is created.

No int8 rung touches them, and in a model whose weights ``auto`` has made small they can be a
sixth of the download (benchmarks/DOWNLOAD.md). fp16 keeps every value to its own precision in
its normal range and decodes with one ``Cast``, which onnxruntime folds at load like int8's chain,
so the graph it runs is the original's. A tensor qualifies only where it is an operand of float
computation (not a shape, an index or a resize scale, which must stay exact and constant) and
where fp16 stores it to that precision: a value beyond fp16's range, or an epsilon of 1e-6 that
fp16 keeps only as a subnormal or zero, leaves its tensor float32. Method ``int8`` never uses this
rung (round-to-nearest int8 is the floor the guard compares with); ``auto``'s guard judges the
plan with it, and without it where it loses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto, numpy_helper

from hatch_shrinkray.encodings.fp16 import Fp16Encoder
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

MIN_ELEMENTS = 128
"""Below this many values a tensor saves at most 256 bytes, and still costs a ``Cast`` for the session
to fold when it is created: a model's many tiny tensors (scalars, a few channels' norms) hold few of
the bytes and most of those nodes (benchmarks/DOWNLOAD.md)."""
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


@dataclass(frozen=True)
class Small:
    """The small tensors ``auto`` stores as fp16, each with its decode."""

    decodes: dict[Key, Decode]
    sizes: dict[str, tuple[int, int]]
    """Per target: the tensors' bytes as float32 and as fp16, as the target counts them."""

    def __bool__(self) -> bool:
        return bool(self.decodes)

    @property
    def values(self) -> dict[Key, npt.NDArray[Any]]:
        """What each tensor holds after the session folds its ``Cast``."""
        return {k: d.decoded for k, d in self.decodes.items()}

    def words(self) -> str:
        """``small tensors in fp16: 112 tensors below min-elements, 573.22 KB -> 286.61 KB``."""
        before, after = self.sizes["disk"]
        n = len(self.decodes)
        return f"{WORDS}: {n} tensor{'s' if n != 1 else ''} below min-elements, {human(before)} -> {human(after)}"


TARGETS = ("disk", "wheel", "web")


def small_tensors(model: ModelProto, options: ShrinkOptions) -> Small:
    """The float32 tensors below ``min-elements`` (and of at least ``MIN_ELEMENTS``) that feed float
    computation only and that fp16 stores to its precision; the user's ``exclude-tensors``,
    ``exclude-ops`` and ``encodings`` apply to them as to any weight."""
    opts = _options(options)
    opset = opset_version(model)
    decodes: dict[Key, Decode] = {}
    originals: list[npt.NDArray[Any]] = []
    for site in find_sites(model):
        if site.dtype != FLOAT32 or site.size >= options.min_elements or not _eligible(site, opts):
            continue
        w = site.array()
        dec = _fp16(w, EncodeContext(opts, opset, tuple(n for n, _ in site.consumers), None, ""))
        if dec is not None:
            decodes[site_key(site)] = dec
            originals.append(w)
    sizes = {t: (sum(estimated_bytes({"w": w}, t) for w in originals),
                 sum(estimated_bytes(d.stored, t) for d in decodes.values())) for t in TARGETS}
    return Small(decodes, sizes)


def write_small(model: ModelProto, options: ShrinkOptions, small: Small) -> list[TensorRecord]:
    """Store ``small``'s tensors as fp16 in ``model`` (in place); a record for each."""
    if not small:
        return []
    records = encode_weights(model, Fp16Encoder(), _options(options),
                             select=lambda site: site_key(site) in small.decodes)
    note = f"below min-elements: fp16 ({WORDS}, auto)"
    return [replace(r, note=note) for r in records if (r.scope, r.name) in small.decodes and r.encoding != "kept"]


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
