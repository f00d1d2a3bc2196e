"""``int4``: 4-bit block-wise MatMul weights via onnxruntime's MatMulNBits quantizer; every other
weight as ``int8``.

The quantizer mutates the ModelProto it is given (we hand it our private working copy) and is
used in its default QOperator format: its QDQ format raises the opset to 21 without converting
the other ops, which made real opset-11/12 models invalid.
"""

from __future__ import annotations

import logging

from onnx import ModelProto

from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.methods.base import NarrowerDataFree
from hatch_shrinkray.onnxgraph.encoding import Calibration
from hatch_shrinkray.onnxgraph.graph import Names, Site, find_sites
from hatch_shrinkray.onnxgraph.rewrite import encode_weights, record, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord

FLOAT32 = 1


def _matmul_weight(site: Site) -> bool:
    return (site.location == "initializer" and site.dtype == FLOAT32 and len(site.shape) == 2
            and bool(site.consumers) and all(n.op_type == "MatMul" and i == 1 for n, i in site.consumers))


class Int4(NarrowerDataFree):
    name = "int4"

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]:
        targets = [s for s in find_sites(model) if _matmul_weight(s) and skip_reason(s, options) is None]
        names = Names(model)
        include: list[str] = []
        for site in targets:
            for node, _ in site.consumers:
                if not node.name:
                    node.name = names.fresh(f"{site.name}_MatMul")
                include.append(node.name)
        keys = {(s.scope.path, s.name) for s in targets}
        records = [r for r in encode_weights(model, Int8Encoder(), options,
                                             select=lambda s: (s.scope.path, s.name) not in keys)
                   if (r.scope, r.name) not in keys]
        if not include:
            return records
        quantize_matmuls(model, include, options.block_size)
        for site in targets:
            k, n = site.shape
            stored = n * (-(-k // options.block_size)) * (options.block_size // 2 + 4)
            records.append(record(site, f"int4 block {options.block_size} (MatMulNBits)", stored=stored))
        return records


def quantize_matmuls(model: ModelProto, include: list[str], block_size: int) -> None:
    """4-bit symmetric blocks for the named MatMul nodes, in place, with onnxruntime's quantizer
    (QOperator format; it works on and then replaces ``model``'s contents)."""
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as exc:
        raise ShrinkrayError(f"int4 needs onnxruntime's MatMulNBits quantizer: {exc}",
                             hint="pip install onnx-ir (a dependency of hatch-shrinkray)") from exc
    quiet = logging.getLogger("onnxruntime.quantization")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        quant = MatMulNBitsQuantizer(model, block_size=block_size, is_symmetric=True,  # 4 bits by default
                                     nodes_to_include=include)
        quant.process()
    except Exception as exc:  # the quantizer raises bare Exceptions for unsupported graphs
        raise ShrinkrayError(f"onnxruntime's MatMulNBits quantizer failed: {exc}", hint="use method int8") from exc
    finally:
        quiet.setLevel(level)
    model.CopyFrom(quant.model.model)
