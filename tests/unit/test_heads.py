"""Classifier heads: classes that never compete on the fitting samples get fewer int8 levels (``fitting/heads.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from test_evidence import lines

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.fitting.candidates import int_candidate, split
from hatch_shrinkray.fitting.heads import MIN_CLASSES, competing
from hatch_shrinkray.onnxgraph.encoding import EncodeContext
from hatch_shrinkray.onnxgraph.graph import find_sites

from onnx_builders import init, model, save, vi, weight
from realmodels import ppocr_v6_rec

K, C, HOT = 64, 512, 6


def head(*, axis: int = -1, classes: int = C, branch: bool = False) -> onnx.ModelProto:
    """x -> MatMul A -> Tanh -> MatMul W -> Add b -> Softmax -> y: ``HOT`` classes with large weights
    and no bias penalty compete; the others sit far below them."""
    r = np.random.default_rng(3)
    w = (r.standard_normal((K, classes)) * 0.05).astype(np.float32)
    w[:, :HOT] *= 6
    b = np.full(classes, -4.0, np.float32)
    b[:HOT] = 0
    nodes = [helper.make_node("MatMul", ["x", "A"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("MatMul", ["t", "W"], ["l"]), helper.make_node("Add", ["l", "b"], ["s"]),
             helper.make_node("Softmax", ["s"], ["y"], axis=axis)]
    outputs = [vi("y", ["batch", classes])]
    if branch:  # the logits feed something else too, whose answers the split could move
        nodes.append(helper.make_node("ReduceMax", ["l"], ["top"], keepdims=1))
        outputs.append(vi("top", ["batch", 1]))
    return model(nodes, [vi("x", ["batch", K])], outputs, [init("A", weight((K, K), 1)), init("W", w), init("b", b)])


def _inputs(seed: int, units: int = 32) -> npt.NDArray[np.float32]:
    return (np.random.default_rng(seed).standard_normal((units, 16, K)) * 3).astype(np.float32)


def _competing(m: onnx.ModelProto, x: npt.NDArray[np.float32],
               judges: list[str] | None = None) -> dict[tuple[str, str], npt.NDArray[np.bool_]]:
    sess = ort.InferenceSession(m.SerializeToString())
    names = [o.name for o in sess.get_outputs()]
    base = [sess.run(None, {"x": feed}) for feed in x]
    sites = [s for s in find_sites(m) if s.dtype == onnx.TensorProto.FLOAT]
    return competing(m.graph, sites, names, base, judges or ["auto"] * len(names))


def test_the_competing_classes_are_the_top_two_of_the_original() -> None:
    m, x = head(), _inputs(5, 8)
    masks = _competing(m, x)
    assert list(masks) == [("main", "W")]  # A's channels are hidden units, not classes
    y = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x.reshape(-1, K)})[0]
    want = np.zeros(C, bool)
    want[np.argsort(-y, axis=1)[:, :2].reshape(-1)] = True
    assert np.array_equal(masks[("main", "W")], want) and 2 <= want.sum() <= HOT


def test_no_head_where_the_channels_are_not_the_classes_a_package_reads() -> None:
    x = _inputs(5, 4)
    assert _competing(head(axis=0), x) == {}  # a softmax across the batch mixes the rows
    assert _competing(head(branch=True), x) == {}  # the head's channels meet another op
    assert _competing(head(), x, judges=["values"]) == {}  # the output is judged by its numbers only
    assert _competing(head(classes=MIN_CLASSES - 1), x) == {}  # few classes: the recording sees them all


def test_a_split_takes_each_channel_whole_from_one_rounding() -> None:
    w = (np.random.default_rng(0).standard_normal((K, C)) * 0.1).astype(np.float32)
    ctx = EncodeContext(ShrinkOptions(), 17, (helper.make_node("MatMul", ["x", "W"], ["y"]),), 1, "test")
    hot, cold = int_candidate(w, ctx, None, None), int_candidate(w, ctx, None, None, levels=7)
    mask = np.zeros(C, bool)
    mask[[0, 9, 300]] = True
    both = split(w, hot, cold, mask, axis=1, moments=None, lay=None)
    assert both.kind == "int8-255+7levels" and both.decode is not None
    q, scale = both.decode.stored["q"], both.decode.stored["scale"]
    assert q.dtype == np.int8 and scale.shape == (1, C)
    assert np.array_equal(q[:, mask], hot.decode.stored["q"][:, mask])  # type: ignore[union-attr]
    assert np.array_equal(q[:, ~mask], cold.decode.stored["q"][:, ~mask])  # type: ignore[union-attr]
    assert max(len(np.unique(q[:, j])) for j in np.flatnonzero(~mask)) <= 7
    assert np.array_equal(both.decoded, q.astype(np.float32) * scale)  # exactly what Cast -> Mul gives
    assert both.target_bytes("wheel") < hot.target_bytes("wheel")


def test_auto_gives_the_classes_that_never_compete_fewer_levels(tmp_path: Path) -> None:
    src = save(head(), tmp_path / "m.onnx")
    np.savez(tmp_path / "rec.npz", x=_inputs(5))
    result = shrink(src, tmp_path / "out.onnx", ShrinkOptions(method="auto",
                                                            verify=VerifyOptions(inputs=tmp_path / "rec.npz")))
    row = next(t for t in result.tensors if t.name == "W")
    assert row.encoding.startswith("int8 255 levels for ") and ", 7 for " in row.encoding, row.encoding
    assert result.verification is not None and "auto's plan kept" in result.verification.fitting
    shrunk = onnx.load(str(tmp_path / "out.onnx"))
    codes = next(numpy_helper.to_array(t) for t in shrunk.graph.initializer
                 if t.data_type == onnx.TensorProto.INT8 and tuple(t.dims) == (K, C))
    distinct = np.array([len(np.unique(codes[:, j])) for j in range(C)])
    assert (distinct > 7).sum() <= HOT and (distinct <= 7).sum() >= C - HOT
    # Inputs neither fitted on nor held out: every label as the original's.
    fresh = _inputs(77, 16).reshape(-1, K)
    ref = ort.InferenceSession(str(src)).run(None, {"x": fresh})[0]
    got = ort.InferenceSession(str(tmp_path / "out.onnx")).run(None, {"x": fresh})[0]
    assert np.mean(ref.argmax(1) == got.argmax(1)) >= 0.99


@pytest.mark.network
def test_the_head_of_a_real_ctc_recogniser_is_found() -> None:
    """PP-OCRv6 rec: MatMul -> Add -> Identity -> Softmax(axis 2) -> [N, T, 18710], judged as text."""
    m = onnx.load(str(ppocr_v6_rec()))
    sess = ort.InferenceSession(m.SerializeToString())
    name = sess.get_inputs()[0].name
    base = [sess.run(None, {name: line}) for line in lines(4)]
    sites = [s for s in find_sites(m) if s.dtype == onnx.TensorProto.FLOAT]
    masks = competing(m.graph, sites, [o.name for o in sess.get_outputs()], base, ["auto"])
    assert list(masks) == [("main", "linear_8.w_0")]
    mask = masks[("main", "linear_8.w_0")]
    assert mask.shape == (18710,) and mask[0]  # the CTC blank competes everywhere
    assert 2 < mask.sum() < 500
