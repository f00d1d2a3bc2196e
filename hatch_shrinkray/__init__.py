"""hatch-shrinkray: shrink ONNX models at build time, verified against the original.

The public names are imported lazily: hatchling imports this package to load the build hook
(and to ask it for its dependencies), which must not pull in onnx, onnxruntime or numpy.

PYTEST_DONT_REWRITE: the package is imported at interpreter start when a command runs under
``hatch-shrinkray record``, before pytest could rewrite its pytest plugin's asserts (it has none);
this marker keeps pytest from warning about it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "shrink": "hatch_shrinkray.engine",
    "shrink_datas": "hatch_shrinkray.bundles.pyinstaller",  # a PyInstaller spec's; a shell, not imported above
    "verify": "hatch_shrinkray.verification.runner",
    "AlreadyQuantizedError": "hatch_shrinkray.errors",
    "ShrinkrayError": "hatch_shrinkray.errors",
    "VerificationError": "hatch_shrinkray.errors",
    "ShrinkOptions": "hatch_shrinkray.options",
    "VerifyOptions": "hatch_shrinkray.options",
    "ShrinkResult": "hatch_shrinkray.shrink_result",
    "TensorRecord": "hatch_shrinkray.result",
    "VerifyResult": "hatch_shrinkray.result",
}

if TYPE_CHECKING:
    from hatch_shrinkray.engine import shrink
    from hatch_shrinkray.errors import AlreadyQuantizedError, ShrinkrayError, VerificationError
    from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
    from hatch_shrinkray.result import TensorRecord, VerifyResult
    from hatch_shrinkray.shrink_result import ShrinkResult
    from hatch_shrinkray.verification.runner import verify


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hatch_shrinkray' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
    "shrink_datas",
    "verify",
]
