"""Test-set accuracy of the digits model, to compare a shrunk model against the original.

Usage::

    python evaluate.py                          # the fp32 model in src/digits_classifier/models/
    python evaluate.py path/to/model.onnx ...   # any model file(s), e.g. one extracted from a built wheel
    python evaluate.py --installed              # the installed digits_classifier package (its predict())

The test split is ``data/digits_test.npz`` (written by ``train.py``; 450 rows).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = HERE / "src" / "digits_classifier" / "models" / "digits_mlp.onnx"
DEFAULT_TEST = HERE / "data" / "digits_test.npz"


def load_test(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as data:
        return data["pixels"].astype(np.float32), data["labels"].astype(np.int64)


def predict_with_model(model: Path, pixels: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (probabilities,) = session.run(["probabilities"], {"pixels": pixels})
    return np.asarray(probabilities).argmax(axis=1)


def predict_installed(pixels: np.ndarray) -> tuple[np.ndarray, str]:
    try:
        import digits_classifier
    except ModuleNotFoundError:
        sys.exit("digits_classifier is not installed: pip install a built wheel first")

    location = str(Path(digits_classifier.__file__).parent)
    if Path(location).resolve().is_relative_to((HERE / "src").resolve()):
        location += "  (WARNING: the source tree, not an installed wheel)"
    size = len(digits_classifier.model_bytes())
    return digits_classifier.predict(pixels), f"installed digits_classifier at {location}, model {size} bytes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the test-set accuracy of digits models.")
    parser.add_argument("models", nargs="*", type=Path, help=f"ONNX model file(s) (default: {DEFAULT_MODEL})")
    parser.add_argument(
        "--installed", action="store_true", help="evaluate the installed digits_classifier package"
    )
    parser.add_argument("--test-data", type=Path, default=DEFAULT_TEST, help="test split .npz")
    args = parser.parse_args(argv)

    pixels, labels = load_test(args.test_data)
    if args.installed and args.models:
        parser.error("give either model paths or --installed, not both")
    runs: list[tuple[str, np.ndarray]] = []
    if args.installed:
        predictions, description = predict_installed(pixels)
        runs.append((description, predictions))
    else:
        for model in args.models or [DEFAULT_MODEL]:
            runs.append((f"{model} ({model.stat().st_size} bytes)", predict_with_model(model, pixels)))
    for description, predictions in runs:
        correct = int((predictions == labels).sum())
        print(f"{description}: accuracy {correct / len(labels):.4f} ({correct}/{len(labels)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
