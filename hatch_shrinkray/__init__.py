"""hatch-shrinkray: shrink ONNX models at build time, verified against the original."""

from __future__ import annotations

from hatch_shrinkray.engine import shrink
from hatch_shrinkray.errors import AlreadyQuantizedError, ShrinkrayError, VerificationError
from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.result import ShrinkResult, TensorRecord, VerifyResult
from hatch_shrinkray.verify import verify

__version__ = "0.1.0"

__all__ = [
    "AlreadyQuantizedError",
    "ShrinkOptions",
    "ShrinkResult",
    "ShrinkrayError",
    "TensorRecord",
    "VerificationError",
    "VerifyOptions",
    "VerifyResult",
    "__version__",
    "shrink",
    "verify",
]
