"""``dynamic``: onnxruntime's own ``quantize_dynamic`` (int8 weights *and* activations).

Faster on MatMul-heavy models but the computation is no longer float, so accuracy may drop
(Moonshine Tiny WER 4.5% -> 31% with the predecessor): verification decides whether it ships.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import onnx
from onnx import ModelProto

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.onnxgraph.encoding import DataFree, Feed
from hatch_shrinkray.onnxgraph.graph import FLOAT_TYPES, find_sites
from hatch_shrinkray.onnxgraph.modelio import fits_one_file
from hatch_shrinkray.onnxgraph.rewrite import record, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord


class Dynamic(DataFree):
    name = "dynamic"

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Sequence[Feed] | None = None) -> list[TensorRecord]:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        sites = [s for s in find_sites(model) if s.dtype in FLOAT_TYPES and s.size >= options.min_elements]
        excluded = [s for s in sites if skip_reason(s, options) is not None]
        exclude_nodes = sorted({n.name for s in excluded for n, _ in s.consumers if n.name})
        with tempfile.TemporaryDirectory(prefix="shrinkray-dynamic-") as tmp:
            out = Path(tmp) / "dynamic.onnx"
            source: ModelProto | Path = model
            if fits_one_file(model):  # onnxruntime < 1.17's quantize_dynamic takes paths only
                source = Path(tmp) / "source.onnx"
                onnx.save(model, str(source))
            try:
                quantize_dynamic(source, out, weight_type=QuantType.QInt8, per_channel=True,
                                 nodes_to_exclude=exclude_nodes)
                result = onnx.load(str(out))
            except Exception as exc:  # onnxruntime raises bare Exceptions for unsupported graphs
                raise ShrinkrayError(f"onnxruntime's quantize_dynamic failed: {exc}".strip(),
                                     hint="use method int8, which keeps computation in float") from exc
        remaining = {t.name for t in result.graph.initializer}
        records = []
        for site in sites:
            reason = skip_reason(site, options)
            if reason is None and site.location == "initializer" and site.name not in remaining:
                records.append(record(site, "dynamic int8 (onnxruntime)", stored=site.size))
            else:
                records.append(record(site, "kept", reason or "not quantized by quantize_dynamic"))
        model.CopyFrom(result)
        return records
