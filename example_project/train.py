"""Train the digits MLP with plain numpy and export it to ONNX.

The network is a 64 -> 1024 -> 1024 -> 512 -> 10 multilayer perceptron with ReLU
activations, trained with a hand-written Adam optimiser on scikit-learn's bundled
``load_digits`` dataset (8x8 greyscale images, 10 classes; no network access needed).

Everything is deterministic: fixed seeds, a fixed train/test split
(``train_test_split(..., test_size=0.25, random_state=0)``) and a fixed mini-batch order.
(Float32 BLAS results can differ in the last bits between machines / thread counts, so the
exported bytes are only guaranteed identical on the same machine.)

Outputs (paths relative to this file's directory):

* ``src/digits_classifier/models/digits_mlp.onnx`` - the fp32 model (input ``pixels``
  float32 [batch, 64] in [0, 1], output ``probabilities`` float32 [batch, 10]).
* ``data/digits_test.npz`` - the held-out test split (``pixels`` float32 [N, 64], ``labels`` int64).
* ``data/verify_inputs.npz`` - 64 real training rows (``pixels`` float32 [64, 64]) that the
  hatch-shrinkray build hook feeds to the original and the shrunk model to verify it.
* ``training_report.json`` - accuracies, epochs, wall time, model size.

Run it from anywhere with: ``python train.py`` (needs numpy, scikit-learn, onnx, onnxruntime).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
MODEL_PATH = HERE / "src" / "digits_classifier" / "models" / "digits_mlp.onnx"
TEST_PATH = HERE / "data" / "digits_test.npz"
VERIFY_PATH = HERE / "data" / "verify_inputs.npz"
REPORT_PATH = HERE / "training_report.json"

LAYER_SIZES = (64, 1024, 1024, 512, 10)
SEED = 0
PIXEL_SCALE = 16.0  # load_digits pixels are integers in [0, 16]; the model expects [0, 1]
OPSET = 17
ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 0.9, 0.999, 1e-8
IR_VERSION = 8  # the IR version that goes with opset 17; loadable by onnxruntime >= 1.14

Params = list[tuple[np.ndarray, np.ndarray]]


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    digits = load_digits()
    pixels = (digits.data / PIXEL_SCALE).astype(np.float32)
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(pixels, labels, test_size=0.25, random_state=0)
    return x_train, x_test, y_train, y_test


def init_params(rng: np.random.Generator) -> Params:
    params: Params = []
    for fan_in, fan_out in itertools.pairwise(LAYER_SIZES):
        weight = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)).astype(np.float32)  # He init
        bias = np.zeros(fan_out, dtype=np.float32)
        params.append((weight, bias))
    return params


def forward(params: Params, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Return the logits and the activations feeding each layer (for backprop)."""
    activations = [x]
    h = x
    for i, (weight, bias) in enumerate(params):
        h = h @ weight + bias
        if i < len(params) - 1:
            h = np.maximum(h, 0.0)
            activations.append(h)
    return h, activations


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def accuracy(params: Params, x: np.ndarray, y: np.ndarray) -> float:
    logits, _ = forward(params, x)
    return float((logits.argmax(axis=1) == y).mean())


def adam_step(
    param: np.ndarray,
    grad: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    *,
    lr: float,
    correction1: float,
    correction2: float,
) -> np.ndarray:
    """One Adam update; updates the moment buffers ``m`` and ``v`` in place, returns the new parameter."""
    m *= ADAM_BETA1
    m += (1 - ADAM_BETA1) * grad
    v *= ADAM_BETA2
    v += (1 - ADAM_BETA2) * grad * grad
    update = (lr / correction1) * m / (np.sqrt(v / correction2) + ADAM_EPS)
    return (param - update).astype(np.float32)


def train(
    x_train: np.ndarray,
    y_train: np.ndarray,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
) -> tuple[Params, list[float]]:
    rng = np.random.default_rng(SEED)
    params = init_params(rng)
    # Adam moments, one (weight, bias) pair per layer
    first = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
    second = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
    step = 0
    losses: list[float] = []
    n = len(x_train)
    for epoch in range(epochs):
        # cosine learning-rate decay, from lr down to 0
        epoch_lr = lr * 0.5 * (1.0 + np.cos(np.pi * epoch / epochs))
        order = rng.permutation(n)
        epoch_loss = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            xb, yb = x_train[idx], y_train[idx]
            logits, acts = forward(params, xb)
            probs = softmax(logits)
            epoch_loss += float(-np.log(probs[np.arange(len(yb)), yb] + 1e-12).sum())
            # d(mean cross-entropy)/d(logits)
            grad = probs
            grad[np.arange(len(yb)), yb] -= 1.0
            grad /= len(yb)
            step += 1
            correction1, correction2 = 1 - ADAM_BETA1**step, 1 - ADAM_BETA2**step
            for i in reversed(range(len(params))):
                weight = params[i][0]
                grads = (acts[i].T @ grad + weight_decay * weight, grad.sum(axis=0))
                if i > 0:
                    grad = (grad @ weight.T) * (acts[i] > 0)
                new_weight, new_bias = (
                    adam_step(p, g, m, v, lr=epoch_lr, correction1=correction1, correction2=correction2)
                    for p, g, m, v in zip(params[i], grads, first[i], second[i], strict=True)
                )
                params[i] = (new_weight, new_bias)
        losses.append(epoch_loss / n)
        print(f"epoch {epoch + 1:3d}/{epochs}  loss {losses[-1]:.4f}  lr {epoch_lr:.2e}", flush=True)
    return params, losses


def export_onnx(params: Params, path: Path) -> onnx.ModelProto:
    nodes: list[onnx.NodeProto] = []
    initializers: list[TensorProto] = []
    current = "pixels"
    for i, (weight, bias) in enumerate(params):
        w_name, b_name = f"fc{i}.weight", f"fc{i}.bias"
        initializers.append(numpy_helper.from_array(weight.astype(np.float32), w_name))
        initializers.append(numpy_helper.from_array(bias.astype(np.float32), b_name))
        nodes.append(helper.make_node("MatMul", [current, w_name], [f"fc{i}.matmul"], name=f"fc{i}_matmul"))
        out = f"fc{i}.out" if i < len(params) - 1 else "logits"
        nodes.append(helper.make_node("Add", [f"fc{i}.matmul", b_name], [out], name=f"fc{i}_add"))
        if i < len(params) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"], name=f"relu{i}"))
            current = f"relu{i}"
    nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", LAYER_SIZES[0]])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", LAYER_SIZES[-1]])],
        initializer=initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="digits-classifier/train.py",
        ir_version=IR_VERSION,
    )
    model.doc_string = (
        "MLP 64-1024-1024-512-10 (ReLU) trained on sklearn load_digits. "
        "Input 'pixels': float32 [batch, 64], raw 0..16 pixel values divided by 16. "
        "Output 'probabilities': float32 [batch, 10] softmax over digits 0-9."
    )
    onnx.checker.check_model(model, full_check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    args = parser.parse_args(argv)

    x_train, x_test, y_train, y_test = load_split()
    print(f"train {x_train.shape}, test {x_test.shape}")
    t0 = time.perf_counter()
    params, losses = train(
        x_train,
        y_train,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
    )
    seconds = time.perf_counter() - t0
    train_acc = accuracy(params, x_train, y_train)
    test_acc = accuracy(params, x_test, y_test)
    print(f"train accuracy {train_acc:.4f}  test accuracy {test_acc:.4f}  ({seconds:.1f} s)")

    export_onnx(params, MODEL_PATH)
    TEST_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(TEST_PATH, pixels=x_test.astype(np.float32), labels=y_test.astype(np.int64))
    np.savez_compressed(VERIFY_PATH, pixels=x_train[:64].astype(np.float32))

    # Cross-check the exported graph against the numpy forward pass.
    import onnxruntime as ort

    session = ort.InferenceSession(str(MODEL_PATH), providers=["CPUExecutionProvider"])
    (onnx_probs,) = session.run(["probabilities"], {"pixels": x_test})
    numpy_probs = softmax(forward(params, x_test)[0])
    max_diff = float(np.abs(onnx_probs - numpy_probs).max())
    onnx_test_acc = float((onnx_probs.argmax(axis=1) == y_test).mean())
    print(f"onnxruntime test accuracy {onnx_test_acc:.4f}, max |p_onnx - p_numpy| = {max_diff:.2e}")
    if onnx_test_acc != test_acc:
        raise SystemExit("exported model disagrees with the numpy model")

    n_params = sum(w.size + b.size for w, b in params)
    report = {
        "architecture": "-".join(str(s) for s in LAYER_SIZES),
        "parameters": int(n_params),
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "weight_decay": args.weight_decay,
        "seed": SEED,
        "train_samples": len(x_train),
        "test_samples": len(x_test),
        "final_train_loss": round(losses[-1], 6),
        "train_accuracy": round(train_acc, 6),
        "test_accuracy": round(test_acc, 6),
        "training_seconds": round(seconds, 1),
        "model_bytes": MODEL_PATH.stat().st_size,
        "opset": OPSET,
        "ir_version": IR_VERSION,
    }
    REPORT_PATH.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
