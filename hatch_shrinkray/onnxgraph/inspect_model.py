"""``info``: where a model's bytes are, and what each weight would be encoded as."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from hatch_shrinkray.onnxgraph.axes import choose_axis
from hatch_shrinkray.onnxgraph.graph import FLOAT_TYPES, find_sites, opset_version, quantization_signs
from hatch_shrinkray.onnxgraph.modelio import load_model
from hatch_shrinkray.onnxgraph.rewrite import record
from hatch_shrinkray.result import human
from hatch_shrinkray.result import render_table as table


@dataclass(frozen=True)
class WeightRow:
    name: str
    scope: str
    location: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    consumers: str
    axis: str


@dataclass(frozen=True)
class ModelInfo:
    label: str
    size: int
    opset: int
    ir_version: int
    weights: tuple[WeightRow, ...]
    quantized: str | None = None
    """Why it looks already quantized (a build ships it as it is), if it does."""

    @property
    def weight_bytes(self) -> int:
        return sum(w.nbytes for w in self.weights)

    def render(self, min_elements: int = 16384) -> str:
        big = [w for w in self.weights if math.prod(w.shape) >= min_elements]
        head = (f"{self.label}: {human(self.size)}, opset {self.opset}, IR {self.ir_version}; "
                f"float weights {human(self.weight_bytes)} ({100 * self.weight_bytes / max(self.size, 1):.1f}%) "
                f"in {len(self.weights)} tensors, {len(big)} of >= {min_elements} elements "
                f"({human(sum(w.nbytes for w in big))})")
        rows = [["tensor", "scope", "where", "shape", "dtype", "bytes", "consumers", "channel axis"]]
        rows += [[w.name, w.scope, w.location, "x".join(map(str, w.shape)) or "scalar", w.dtype, human(w.nbytes),
                  w.consumers, w.axis] for w in sorted(big, key=lambda w: -w.nbytes)]
        already = f"\nalready quantized: {self.quantized}: a build ships it as it is" if self.quantized else ""
        return head + already + ("\n\n" + table(rows) if big else "")


def model_info(path: str | os.PathLike[str]) -> ModelInfo:
    loaded = load_model(path)
    rows = []
    for site in find_sites(loaded.model):
        if site.dtype not in FLOAT_TYPES:
            continue
        _, how = choose_axis(site.consumers, site.shape)
        rec = record(site, "kept")
        rows.append(WeightRow(site.name, site.scope.path, site.location, site.shape, rec.dtype,
                              rec.original_bytes, ",".join(sorted({n.op_type for n, _ in site.consumers})) or "-",
                              how))
    return ModelInfo(loaded.label, loaded.size, opset_version(loaded.model), loaded.model.ir_version, tuple(rows),
                     quantization_signs(loaded.model))
