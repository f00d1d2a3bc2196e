"""``GatherBlockQuantized``: an embedding table (read only by ``Gather`` on axis 0) kept as block-wise
4-bit codes that onnxruntime's contrib kernel gathers and decodes row by row, so the table stays
packed in memory after the session loads.

The chain replaces each ``Gather(table, ids)`` by ``GatherBlockQuantized(codes, ids, scales)``: codes
``uint8`` with ``bits = 4`` (two to a byte along the row, the first in the low nibble; zero point 8),
one float32 scale per ``block`` values of a row (``numerics.blocks``). The kernel's ``uint8`` form
needs onnxruntime 1.23 (``methods.runtimes``); its ``int4`` form would reach 1.20 but needs IR
version 10, which older runtimes refuse for the whole model. At 8 bits nothing here is needed:
``int8`` already keeps such a table as int8 codes in memory and decodes the gathered rows
(``onnxgraph.rewrite``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics.blocks import packed, quantize_blocks
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode, EncodeContext

CONTRIB = "com.microsoft"
BITS = 4


class GatherBlockEncoder:
    name = "gather-block"

    def __init__(self, block: int) -> None:
        self.block = block

    def label(self) -> str:
        return f"GatherBlockQuantized {BITS}-bit, block {self.block}"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        if w.dtype != np.float32 or w.ndim != 2:
            raise NotEncodable("GatherBlockQuantized reads 2-D float32 tables")
        if any(n.op_type != "Gather" or any(a.name == "axis" and a.i != 0 for a in n.attribute)
               for n in ctx.consumers) or not ctx.consumers:
            raise NotEncodable("GatherBlockQuantized replaces Gather on axis 0 only")
        if w.shape[1] % self.block:
            raise NotEncodable(f"rows of {w.shape[1]} values do not split into blocks of {self.block}")
        b = quantize_blocks(w, BITS, self.block)
        codes = packed(b).reshape(w.shape[0], w.shape[1] * BITS // 8)
        attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": self.block, "bits": BITS}
        node = DecodeNode("GatherBlockQuantized", ("q", "$1", "scales"), attrs, CONTRIB)
        return Decode({"q": codes, "scales": b.scale}, (node,), b.decoded, self.label(), replaces="Gather")
