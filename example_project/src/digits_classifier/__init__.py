"""digits-classifier: recognise handwritten digits (8x8 images) with a small ONNX MLP.

The model ships inside the package (``digits_classifier/models/digits_mlp.onnx``) and is
run with onnxruntime. Inputs are 8x8 greyscale images flattened to 64 values, in the
format of scikit-learn's ``load_digits``: integer intensities 0..16 divided by 16, i.e.
float values in [0, 1] (use :func:`scale_pixels` on raw 0..16 data).

>>> import numpy as np, digits_classifier
>>> digits_classifier.predict(np.zeros((1, 64), dtype=np.float32)).shape
(1,)
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = [
    "MODEL_RESOURCE",
    "N_CLASSES",
    "N_PIXELS",
    "model_bytes",
    "predict",
    "predict_proba",
    "scale_pixels",
]
__version__ = "1.0.0"

MODEL_RESOURCE = "models/digits_mlp.onnx"
N_PIXELS = 64
N_CLASSES = 10
_INPUT_NAME = "pixels"
_OUTPUT_NAME = "probabilities"


def model_bytes() -> bytes:
    """The serialized ONNX model shipped with the package."""
    return resources.files(__package__).joinpath(MODEL_RESOURCE).read_bytes()


@functools.lru_cache(maxsize=1)
def _get_session() -> ort.InferenceSession:
    """Create the onnxruntime session on first use; later calls return the cached one."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model_bytes(), sess_options=options, providers=["CPUExecutionProvider"])


def scale_pixels(raw: np.ndarray) -> np.ndarray:
    """Convert raw ``load_digits`` intensities (0..16) to the model's [0, 1] float32 input."""
    return (np.asarray(raw, dtype=np.float32) / 16.0).reshape(-1, N_PIXELS)


def _as_batch(pixels: np.ndarray) -> np.ndarray:
    x = np.asarray(pixels, dtype=np.float32)
    if x.ndim == 1 or x.shape == (8, 8):
        x = x.reshape(1, N_PIXELS)
    elif x.ndim == 3 and x.shape[1:] == (8, 8):
        x = x.reshape(len(x), N_PIXELS)
    if x.ndim != 2 or x.shape[1] != N_PIXELS:
        shape = np.shape(pixels)
        raise ValueError(f"expected pixels of shape [N, 64], [N, 8, 8], [64] or [8, 8]; got {shape}")
    return np.ascontiguousarray(x)


def predict_proba(pixels: np.ndarray) -> np.ndarray:
    """Class probabilities, float32 [N, 10], for images scaled to [0, 1] (see module docstring)."""
    x = _as_batch(pixels)
    (probabilities,) = _get_session().run([_OUTPUT_NAME], {_INPUT_NAME: x})
    return np.asarray(probabilities)


def predict(pixels: np.ndarray) -> np.ndarray:
    """Predicted digit labels, int64 [N]."""
    return predict_proba(pixels).argmax(axis=1).astype(np.int64)
