"""Small real ONNX models built with onnx.helper for the engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR = 9


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def weight(shape: tuple[int, ...], seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    """Gaussian weights with a spread of per-channel scales, like trained layers."""
    r = rng(seed)
    w = r.standard_normal(shape) * np.exp(r.normal(0, 0.35, size=(shape[0],) + (1,) * (len(shape) - 1)))
    return (w * 0.05).astype(dtype)


def init(name: str, arr: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(arr, name)


def const(output: str, arr: np.ndarray, name: str = "") -> onnx.NodeProto:
    return helper.make_node("Constant", [], [output], name=name, value=numpy_helper.from_array(arr))


def vi(name: str, shape: list[Any], elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
          initializers: list[TensorProto] = (), opset: int = OPSET, **kw: Any) -> onnx.ModelProto:  # type: ignore[assignment]
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR, **kw)
    onnx.checker.check_model(m, full_check=True)
    return m


def mlp(k: int = 256, n: int = 256, classes: int = 10) -> onnx.ModelProto:
    """x[b,k] -> MatMul W1 -> Relu -> MatMul W2 -> y[b,classes]."""
    return model(
        [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "W2"], ["y"])],
        [vi("x", ["batch", k])], [vi("y", ["batch", classes])],
        [init("W1", weight((k, n), 1)), init("W2", weight((n, classes), 2) * 10)])


def cancelling() -> onnx.ModelProto:
    """y = x @ W + x @ (1e-3 R - W): the answer is the small difference of two large products, which
    int8's rounding of each weight swamps (rel L2 far over 0.1 on any input)."""
    w, r = weight((256, 64), 1), weight((256, 64), 2)
    return model([helper.make_node("MatMul", ["x", "A"], ["a"]), helper.make_node("MatMul", ["x", "B"], ["b"]),
                  helper.make_node("Add", ["a", "b"], ["y"])],
                 [vi("x", ["batch", 256])], [vi("y", ["batch", 64])],
                 [init("A", w), init("B", (1e-3 * r - w).astype(np.float32))])


def conv_model() -> onnx.ModelProto:
    """A 3x3 Conv ``[1, 32, 8, 8] -> [1, 64, 8, 8]`` (opset 13)."""
    return model([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], [vi("x", [1, 32, 8, 8])],
                 [vi("y", [1, 64, 8, 8])], [init("W", weight((64, 32, 3, 3), 1))], opset=13)

def tagger() -> onnx.ModelProto:
    """Integer ids ``[1, T]`` -> embedding -> ``[1, T, 4]`` logits."""
    rng = np.random.default_rng(0)
    return model([helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("MatMul", ["e", "W"], ["tags"])],
              [vi("ids", [1, "T"], onnx.TensorProto.INT64)], [vi("tags", [1, "T", 4])],
              [init("E", rng.standard_normal((64, 8)).astype(np.float32)),
               init("W", rng.standard_normal((8, 4)).astype(np.float32))])


def if_model(k: int = 64) -> onnx.ModelProto:
    """y = If(c, then: x @ W_then, else: x @ W_else) for ``x[batch, k]``, weights as Constant nodes inside the
    branches."""
    def branch(name: str, seed: int) -> onnx.GraphProto:
        w = weight((k, 256), seed)
        return helper.make_graph(
            [helper.make_node("Constant", [], [f"W_{name}"], value=helper.make_tensor(
                f"W_{name}", onnx.TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())),
             helper.make_node("MatMul", ["x", f"W_{name}"], [f"y_{name}"])],
            name, [], [vi(f"y_{name}", ["batch", 256])])

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", 1), else_branch=branch("else", 2))
    return model([node], [vi("x", ["batch", k]), vi("c", [], onnx.TensorProto.BOOL)], [vi("y", ["batch", 256])])


def embedder(tmp_path: Path, rows: int = 4000, width: int = 256) -> tuple[Path, Path]:
    """ids -> embedding table -> two MatMuls -> mean: MatMul and Gather weights, 6 MB of float32 (by
    default: enough for a session's memory to show them)."""
    m = model([helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("MatMul", ["e", "W1"], ["h"]),
               helper.make_node("Relu", ["h"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["o"]),
               helper.make_node("ReduceMean", ["o"], ["y"], axes=[1], keepdims=0)],
              [vi("ids", ["b", 6], TensorProto.INT64)], [vi("y", ["b", width])],
              [init("E", weight((rows, width), 1)), init("W1", weight((width, 4 * width), 2)),
               init("W2", weight((4 * width, width), 3))])
    r = rng(0)
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, ids=r.integers(0, rows, (24, 1, 6)))
    return save(m, tmp_path / "embedder.onnx"), inputs


def char_embedding(path: Path, *, through: str = "Cast") -> Path:
    """ids (int32, [batch, seq]) -> ``through`` -> Gather on a 49-row table -> mean: a character-level
    text model's first layer. ``through = "Add"`` offsets the ids first (no longer plain rows)."""
    table = np.random.default_rng(0).standard_normal((49, 400)).astype(np.float32)
    nodes = [helper.make_node("Cast", ["ids"], ["i64"], to=onnx.TensorProto.INT64)]
    if through == "Add":
        nodes.append(helper.make_node("Add", ["i64", "one"], ["rows"]))
    else:
        nodes.append(helper.make_node("Unsqueeze", ["i64", "axes"], ["u"]))
        nodes.append(helper.make_node("Squeeze", ["u", "axes"], ["rows"]))
    nodes += [helper.make_node("Gather", ["E", "rows"], ["emb"]),
              helper.make_node("ReduceMean", ["emb"], ["out"], axes=[2], keepdims=0)]
    return save(model(nodes, [vi("ids", ["batch", "seq"], onnx.TensorProto.INT32)], [vi("out", ["batch", "seq"])],
                      [init("E", table), init("one", np.array(1, np.int64)), init("axes", np.array([0], np.int64))]),
                path)



def op_types(path: Path) -> set[str]:
    """The op types of the model saved at ``path``."""
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def save(m: onnx.ModelProto, path: Path) -> Path:
    onnx.save(m, str(path))
    return path


def save_external(m: onnx.ModelProto, path: Path, *, one_file: bool = True, location: str | None = None) -> Path:
    """Save a copy of ``m`` with its weights in external data (``<name>.data`` beside it unless ``location``;
    onnx.save with external data rewrites the proto it is given, hence the copy)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    location = location or path.name + ".data"
    (path.parent / location).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
              location=location, size_threshold=1024)
    return path


def run(m: onnx.ModelProto | Path | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    ref = m.SerializeToString() if isinstance(m, onnx.ModelProto) else str(m)
    sess = ort.InferenceSession(ref, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def dtypes(m: onnx.ModelProto) -> dict[str, int]:
    """Each initializer's ``TensorProto`` data type, by name."""
    return {t.name: t.data_type for t in m.graph.initializer}


def close(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    """Every output of ``b`` within 3% relative L2 of ``a``'s (what int8 keeps on these models)."""
    for x, y in zip(a, b, strict=True):
        assert np.linalg.norm(x - y) / np.linalg.norm(x) < 0.03
