"""``fp16``: float16 storage + Cast back, folded at load; half the size, near-lossless."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import helper

from hatch_shrinkray.numerics.quant import FLUSH, NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode, EncodeContext

FP16_MAX = float(np.finfo(np.float16).max)


class Fp16Encoder:
    name = "fp16"

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        if w.dtype == np.float16:
            raise NotEncodable("already float16")
        finite = w[np.isfinite(w)]
        if finite.size and float(np.abs(finite).max()) > FP16_MAX:
            raise NotEncodable("has values beyond the float16 range")
        half = w.astype(np.float16)
        # float16 subnormals become float32 denormals-free values after the Cast, but tiny
        # values below FLUSH are zero anyway in float16; keep the exact result of the Cast.
        decoded: npt.NDArray[Any] = half.astype(w.dtype)
        decoded[(np.abs(decoded) < FLUSH) & (decoded != 0)] = 0
        to = helper.np_dtype_to_tensor_dtype(w.dtype)
        return Decode({"fp16": half}, (DecodeNode("Cast", ("fp16",), {"to": to}),), decoded, "fp16")
