"""``float-levels``: snap each channel to N evenly spaced levels, store in the original dtype.

The raw file stays the same size, but gzip/brotli/zstd shrink it far more, with no decode node
at all (the seeds' trick for compressed downloads). Zero is always one of the levels.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics.quant import quantize_affine
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext


class FloatLevelsEncoder:
    name = "float-levels"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        levels = ctx.options.level_count()
        q = quantize_affine(w, ctx.axis, levels + 1 if not np.isfinite(w).all() else levels)
        decoded = q.decoded.astype(w.dtype)
        where = "per-tensor" if ctx.axis is None else f"axis {ctx.axis}"
        return Decode({"levels": decoded}, (), decoded, f"float-levels {levels} {where}")
