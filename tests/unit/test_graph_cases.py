"""Graph shapes real models have, each checked by running original and shrunk in onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import X as PREDECESSOR_X
from hardening import _out
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink

from onnx_builders import const, init, mlp, model, run, save, vi, weight

X = {"x": np.random.default_rng(5).standard_normal((3, 256)).astype(np.float32)}


def shrunk(m: onnx.ModelProto, tmp_path: Path, **kw: object) -> tuple[onnx.ModelProto, object]:
    src = save(m, tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    result = shrink(src, out, ShrinkOptions(**kw))  # type: ignore[arg-type]
    return onnx.load(str(out)), result


def close(a: list[np.ndarray], b: list[np.ndarray], tol: float = 0.03) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape
        assert np.linalg.norm(x - y) / np.linalg.norm(x) < tol


def test_initializers_become_int8_codes_with_float_decode(tmp_path: Path) -> None:
    m = mlp()
    out, result = shrunk(m, tmp_path)
    inits = {t.name: t for t in out.graph.initializer}
    assert inits["W1_q"].data_type == TensorProto.INT8
    assert [n.op_type for n in out.graph.node][:2] == ["Cast", "Mul"]
    close(run(m, X), run(out, X))
    assert result.shrunk_size < 0.3 * result.original_size  # type: ignore[attr-defined]


def test_constant_nodes_are_rewritten_in_place(tmp_path: Path) -> None:
    m = model([const("W", weight((256, 128))), helper.make_node("MatMul", ["x", "W"], ["y"])],
              [vi("x", ["b", 256])], [vi("y", ["b", 128])])
    out, _ = shrunk(m, tmp_path)
    assert [n.op_type for n in out.graph.node] == ["Constant", "Constant", "Cast", "Mul", "MatMul"]
    close(run(m, X), run(out, X))


def _branch(name: str, w: np.ndarray, out: str) -> onnx.GraphProto:
    return helper.make_graph([const("W", w), helper.make_node("MatMul", ["x", "W"], [out])], name, [],
                             [vi(out, ["b", 128])])


def test_same_named_tensors_in_if_branches_are_never_merged(tmp_path: Path) -> None:
    then_w, else_w = weight((256, 128), 1), weight((256, 128), 2)
    if_node = helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", then_w, "t"),
                               else_branch=_branch("else", else_w, "e"))
    m = model([if_node], [vi("x", ["b", 256]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["b", 128])])
    out, result = shrunk(m, tmp_path, verify=VerifyOptions(samples=4))
    for cond in (True, False):
        feeds = {**X, "cond": np.array(cond)}
        close(run(m, feeds), run(out, feeds))
    assert not np.allclose(run(out, {**X, "cond": np.array(True)})[0], run(out, {**X, "cond": np.array(False)})[0])
    assert len(result.encoded) == 2  # type: ignore[attr-defined]


def test_loop_body_weights_are_encoded(tmp_path: Path) -> None:
    body = helper.make_graph(
        [const("Wl", weight((256, 256), 3)), helper.make_node("MatMul", ["h_in", "Wl"], ["mm"]),
         helper.make_node("Tanh", ["mm"], ["h_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", ["b", 256])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", ["b", 256])])
    loop = helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)
    m = model([const("n", np.array(3, dtype=np.int64)), loop], [vi("x", ["b", 256])], [vi("y", ["b", 256])])
    out, result = shrunk(m, tmp_path)
    assert [r.scope for r in result.encoded] == ["main/Loop #1/body"]  # type: ignore[attr-defined]
    close(run(m, X), run(out, X))


def test_unnamed_constant_nodes_keep_their_own_weights(tmp_path: Path) -> None:
    w1, w2 = weight((256, 256), 1), weight((256, 256), 2)
    m = model([const("A", w1), const("B", w2), helper.make_node("MatMul", ["x", "A"], ["h"]),
               helper.make_node("MatMul", ["h", "B"], ["y"])], [vi("x", ["b", 256])], [vi("y", ["b", 256])])
    out, result = shrunk(m, tmp_path)
    close(run(m, X), run(out, X))
    assert len(result.encoded) == 2  # type: ignore[attr-defined]
    names = [n.name for n in out.graph.node if n.name]
    assert len(names) == len(set(names))


def test_shared_weight_is_encoded_once(tmp_path: Path) -> None:
    m = model([helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("MatMul", ["h", "W"], ["y"])],
              [vi("x", ["b", 256])], [vi("y", ["b", 256])], [init("W", weight((256, 256)))])
    out, result = shrunk(m, tmp_path)
    assert [t.name for t in out.graph.initializer] == ["W_q", "W_scale"]
    assert len(result.encoded) == 1  # type: ignore[attr-defined]
    close(run(m, X), run(out, X))


def test_identical_copies_are_deduplicated_across_scopes(tmp_path: Path) -> None:
    w = weight((256, 128), 7)
    if_node = helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", w, "t"),
                               else_branch=_branch("else", w, "e"))
    m = model([if_node], [vi("x", ["b", 256]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["b", 128])])
    out, result = shrunk(m, tmp_path, method="dedup")
    assert result.shrunk_size < 0.6 * result.original_size  # type: ignore[attr-defined]
    for cond in (True, False):
        feeds = {**X, "cond": np.array(cond)}
        np.testing.assert_array_equal(run(m, feeds)[0], run(out, feeds)[0])


def test_weight_that_is_a_graph_input_keeps_the_interface(tmp_path: Path) -> None:
    m = mlp()
    m.graph.input.append(vi("W1", [256, 256]))
    out, result = shrunk(m, tmp_path)
    assert [i.name for i in out.graph.input] == ["x", "W1"]
    assert "W1" in {t.name for t in out.graph.initializer}
    assert [r.name for r in result.encoded] == ["W2"] or not result.encoded  # type: ignore[attr-defined]


def test_a_model_whose_weights_are_all_graph_inputs_says_so(tmp_path: Path) -> None:
    """An older export style lists every initializer as a graph input too: nothing is encoded, and
    the reason names that, not min-elements (which every weight reaches)."""
    m = mlp(k=256, n=256, classes=128)
    m.graph.input.extend([vi("W1", [256, 256]), vi("W2", [256, 128])])
    save(m, tmp_path / "m.onnx")
    result = shrink(tmp_path / "m.onnx", tmp_path / "out.onnx")
    assert not result.encoded
    assert result.kept_original is not None
    assert result.kept_original.startswith("2 of its weights with min-elements (16384) elements or more are also "
                                           "graph inputs"), result.kept_original
    assert (tmp_path / "out.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()


def test_weight_that_is_a_graph_output_keeps_its_name(tmp_path: Path) -> None:
    m = mlp()
    m.graph.output.append(vi("W1", [256, 256]))
    out, _ = shrunk(m, tmp_path)
    assert [o.name for o in out.graph.output] == ["y", "W1"]
    a, b = run(m, X), run(out, X)
    assert np.abs(a[1] - b[1]).max() < np.abs(a[1]).max() / 100


def test_metadata_doc_opset_and_ir_are_preserved(tmp_path: Path) -> None:
    m = mlp()
    m.doc_string = "a doc"
    m.graph.doc_string = "graph doc"
    helper.set_model_props(m, {"character": "abc", "author": "me"})
    out, _ = shrunk(m, tmp_path)
    assert out.doc_string == "a doc" and out.graph.doc_string == "graph doc"
    assert {p.key: p.value for p in out.metadata_props} == {"character": "abc", "author": "me"}
    assert out.ir_version == m.ir_version and list(out.opset_import) == list(m.opset_import)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_decode_to_their_own_dtype(tmp_path: Path, dtype: type) -> None:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256], elem)], [vi("y", ["b", 128], elem)],
              [init("W", weight((256, 128), dtype=dtype))])
    out, result = shrunk(m, tmp_path)
    assert result.encoded[0].dtype == np.dtype(dtype).name  # type: ignore[attr-defined]
    feeds = {"x": X["x"].astype(dtype)}
    close([a.astype(np.float64) for a in run(m, feeds)], [b.astype(np.float64) for b in run(out, feeds)])


def test_nonfinite_mask_and_constant_tensor_come_out_exactly(tmp_path: Path) -> None:
    mask = np.triu(np.full((256, 256), -np.inf, dtype=np.float32), 1)
    flat = np.full((256, 256), 0.001, dtype=np.float32)
    m = model([helper.make_node("Add", ["x", "M"], ["a"]), helper.make_node("Mul", ["a", "C"], ["y"])],
              [vi("x", [256, 256])], [vi("y", [256, 256])], [init("M", mask), init("C", flat)])
    out, result = shrunk(m, tmp_path)
    assert len(result.encoded) == 2  # type: ignore[attr-defined]
    feeds = {"x": np.ones((256, 256), dtype=np.float32)}
    np.testing.assert_array_equal(run(m, feeds)[0], run(out, feeds)[0])


def test_other_constant_attribute_forms_are_left_alone(tmp_path: Path) -> None:
    floats = helper.make_node("Constant", [], ["F"], value_floats=[float(i) for i in range(20000)])
    m = model([floats, helper.make_node("Add", ["x", "F"], ["y"])], [vi("x", [20000])], [vi("y", [20000])])
    out, result = shrunk(m, tmp_path)
    assert not result.encoded  # type: ignore[attr-defined]
    feeds = {"x": np.zeros(20000, dtype=np.float32)}
    np.testing.assert_array_equal(run(m, feeds)[0], run(out, feeds)[0])


def test_exclusions_by_name_glob_and_op(tmp_path: Path) -> None:
    _, by_name = shrunk(mlp(), tmp_path, exclude_tensors=("W1*",))
    assert [t.name for t in by_name.encoded] == ["W2"] or [t.name for t in by_name.encoded] == []  # type: ignore[attr-defined]
    kept = {t.name: t.note for t in by_name.tensors if t.encoding == "kept"}  # type: ignore[attr-defined]
    assert "exclude-tensors" in kept["W1"]
    _, by_op = shrunk(mlp(), tmp_path, exclude_ops=("MatMul",))
    assert not by_op.encoded  # type: ignore[attr-defined]


@pytest.mark.parametrize(("op", "shape", "attrs", "index", "axis"), [
    ("Conv", (64, 32, 3, 3), {}, 1, 0),
    ("ConvTranspose", (32, 64, 3, 3), {}, 1, 1),
    ("Gemm", (128, 256), {"transB": 1}, 1, 0),
    ("Gemm", (256, 128), {}, 1, 1),
    ("MatMul", (256, 128), {}, 1, 1),
    ("Gather", (1000, 64), {}, 0, 0),
    ("LSTM", (1, 4 * 64, 64), {}, 1, 1),
])
def test_channel_axis_follows_the_consumer(op: str, shape: tuple[int, ...], attrs: dict[str, int],
                                           index: int, axis: int) -> None:
    from hatch_shrinkray.onnxgraph.axes import choose_axis

    inputs = ["a", "b", "c"][: index + 1]
    node = helper.make_node(op, inputs, ["o"], **attrs)
    got, _ = choose_axis([(node, index)], shape)
    assert got == axis


def test_gemm_and_conv_models_run_correctly(tmp_path: Path) -> None:
    m = model([helper.make_node("Conv", ["img", "K"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("GlobalAveragePool", ["c"], ["p"]),
               helper.make_node("Flatten", ["p"], ["f"]),
               helper.make_node("Gemm", ["f", "G"], ["y"], transB=1)],
              [vi("img", [1, 32, 16, 16])], [vi("y", [1, 300])],
              [init("K", weight((64, 32, 3, 3))), init("G", weight((300, 64)))])
    out, result = shrunk(m, tmp_path, min_elements=1024)
    assert {t.encoding for t in result.encoded} == {"int8 axis 0"}  # type: ignore[attr-defined]
    feeds = {"img": np.random.default_rng(0).standard_normal((1, 32, 16, 16)).astype(np.float32)}
    close(run(m, feeds), run(out, feeds))


def test_new_names_are_unique_across_subgraphs(tmp_path: Path) -> None:
    body_w = weight((256, 128), 1)
    then = _branch("then", body_w, "t")
    then.node.insert(0, helper.make_node("Identity", ["x"], ["W_q"]))  # a name our encoder would pick
    if_node = helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=_branch("else", body_w * 2, "e"))
    m = model([if_node], [vi("x", ["b", 256]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["b", 128])])
    out, _ = shrunk(m, tmp_path)
    before, after = _defined_names(m), _defined_names(out)
    new = [n for n in after if n not in set(before)]
    assert new, "the encoder should have added names"
    assert len(new) == len(set(new))
    assert "W_q" not in new  # taken in the then-branch, so never reused


def _defined_names(m: onnx.ModelProto) -> list[str]:
    from hatch_shrinkray.onnxgraph.graph import scopes

    names: list[str] = []
    for scope in scopes(m):
        names += [t.name for t in scope.graph.initializer]
        names += [o for n in scope.graph.node for o in n.output]
    return names


# ---------------------------------------------------------------------------------------------
# The predecessor's confirmed defects (onnx-shrink-ray 0.0.11, by number): none may happen here.


@pytest.mark.parametrize("attr", ["value_floats", "value_ints", "value_float", "value_string"])
def test_3_other_constant_attributes_do_not_crash(tmp_path: Path, attr: str) -> None:
    values = {"value_floats": [1.0] * 20000, "value_ints": list(range(20000)), "value_float": 2.0,
              "value_string": "hello"}
    node = helper.make_node("Constant", [], ["c"], **{attr: values[attr]})
    m = model([node, helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256])],
              [vi("y", ["b", 256])], [init("W", weight((256, 256)))])
    elem, shape = {"value_floats": (TensorProto.FLOAT, [20000]), "value_ints": (TensorProto.INT64, [20000]),
                   "value_float": (TensorProto.FLOAT, []), "value_string": (TensorProto.STRING, [])}[attr]
    m.graph.output.append(vi("c", shape, elem))
    out = onnx.load(str(_out(tmp_path, m)))
    assert any(a.name == attr for n in out.graph.node for a in n.attribute)


def test_4_unnamed_constants_keep_distinct_weights(tmp_path: Path) -> None:
    m = model([const("A", weight((256, 256), 1)), const("B", weight((256, 256), 2)),
               helper.make_node("MatMul", ["x", "A"], ["h"]), helper.make_node("MatMul", ["h", "B"], ["y"])],
              [vi("x", ["b", 256])], [vi("y", ["b", 256])])
    for method in ("int8", "float-levels"):
        a, b = run(m, PREDECESSOR_X)[0], run(_out(tmp_path, m, method=method), PREDECESSOR_X)[0]
        assert np.linalg.norm(a - b) / np.linalg.norm(a) < 0.03


def test_5_same_named_initializers_in_if_branches_stay_apart(tmp_path: Path) -> None:
    def branch(seed: int, out: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("MatMul", ["x", "W"], [out])], f"b{seed}", [],
                                 [vi(out, ["b", 128])], [init("W", weight((256, 128), seed))])

    m = model([helper.make_node("If", ["cond"], ["y"], then_branch=branch(1, "t"), else_branch=branch(2, "e"))],
              [vi("x", ["b", 256]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["b", 128])])
    out = _out(tmp_path, m)
    for cond in (True, False):
        feeds = {**PREDECESSOR_X, "cond": np.array(cond)}
        a, b = run(m, feeds)[0], run(out, feeds)[0]
        assert np.linalg.norm(a - b) / np.linalg.norm(a) < 0.03


def test_8_genuine_int_to_float_casts_survive(tmp_path: Path) -> None:
    m = model([helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
               helper.make_node("MatMul", ["f", "W"], ["y"])],
              [vi("ids", ["b", 256], TensorProto.INT64)], [vi("y", ["b", 256])], [init("W", weight((256, 256)))])
    feeds = {"ids": np.arange(512, dtype=np.int64).reshape(2, 256) % 7}
    for method in ("fp16", "int8"):
        out = _out(tmp_path, m, method=method)
        assert any(n.op_type == "Cast" and n.input[0] == "ids" for n in onnx.load(str(out)).graph.node)
        a, b = run(m, feeds)[0], run(out, feeds)[0]
        assert np.linalg.norm(a - b) / np.linalg.norm(a) < 0.03


def test_9_interface_and_metadata_are_unchanged(tmp_path: Path) -> None:
    m = mlp()
    m.graph.input.append(vi("W1", [256, 256]))
    m.graph.output.append(vi("W2", [256, 10]))
    m.doc_string = "doc"
    helper.set_model_props(m, {"k": "v"})
    out = onnx.load(str(_out(tmp_path, m, min_elements=1024)))
    assert [i.name for i in out.graph.input] == ["x", "W1"]
    assert [o.name for o in out.graph.output] == ["y", "W2"]
    assert out.doc_string == "doc" and [(p.key, p.value) for p in out.metadata_props] == [("k", "v")]
