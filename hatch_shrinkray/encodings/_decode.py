"""Decode chains shared by the integer encodings: codes -> float, with exact non-finite restore."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import TensorProto, helper

from hatch_shrinkray.numerics.quant import NotEncodable, Quantized
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode

WHERE_MIN_OPSET = 9
HALF_SCALES = "fp16 scales"
"""How a label says that the scales are stored as fp16."""


def float_decode(q: Quantized, original_dtype: np.dtype[Any], opset: int, label: str) -> Decode:
    """Cast -> [Sub zp] -> Mul scale [-> Where(sentinel)] [-> Cast to the weight's dtype].

    Every node has constant inputs only, so onnxruntime folds the chain into one float tensor
    when the session is created: zero cost per inference. fp16 scales (``numerics.scales``) get a
    ``Cast`` of their own before the ``Mul``, folded with the rest; the label says so.
    """
    stored: dict[str, npt.NDArray[Any]] = {"q": q.codes, "scale": q.scale}
    nodes = [DecodeNode("Cast", ("q",), {"to": TensorProto.FLOAT})]
    if q.zero_point is not None:
        stored["zp"] = q.zero_point
        nodes.append(DecodeNode("Sub", ("@0", "zp")))
    value, scale = f"@{len(nodes) - 1}", "scale"
    if q.scale.dtype == np.float16:
        nodes.append(DecodeNode("Cast", ("scale",), {"to": TensorProto.FLOAT}))
        scale = f"@{len(nodes) - 1}"
        label = f"{label}, {HALF_SCALES}"
    nodes.append(DecodeNode("Mul", (value, scale)))
    if q.nonfinite is not None:
        if opset < WHERE_MIN_OPSET:
            raise NotEncodable(f"has non-finite values and opset {opset} < 9 has no Where")
        stored["sentinel"] = np.array(q.sentinel, dtype=np.float32)
        stored["special"] = np.array(q.nonfinite.value, dtype=np.float32)
        mul = len(nodes) - 1
        nodes.append(DecodeNode("Equal", ("@0", "sentinel")))
        nodes.append(DecodeNode("Where", (f"@{len(nodes) - 1}", "special", f"@{mul}")))
    decoded: npt.NDArray[Any] = q.decoded
    if original_dtype != np.float32:
        to = helper.np_dtype_to_tensor_dtype(original_dtype)
        nodes.append(DecodeNode("Cast", (f"@{len(nodes) - 1}",), {"to": to}))
        decoded = q.decoded.astype(original_dtype)
    return Decode(stored, tuple(nodes), decoded, label)
