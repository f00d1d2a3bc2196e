"""The encodings that keep weights packed in memory (target ``memory``): ``MatMulNBits`` 8- and 4-bit
on MatMul and Gemm weights, ``GatherBlockQuantized`` 4-bit on embedding tables. Each runs in this
onnxruntime at ``ORT_ENABLE_ALL`` (what users get) and at ``ORT_DISABLE_ALL`` (no optimizer rewrite
to depend on) and must give what its decoded weights give, with no ``DequantizeLinear`` anywhere."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from hatch_shrinkray.encodings.gather_block import GatherBlockEncoder
from hatch_shrinkray.encodings.matmul_nbits import INT8_ACTIVATIONS, MatMulNBitsEncoder
from hatch_shrinkray.numerics.blocks import packed, quantize_blocks, stored_bytes
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.options import ShrinkOptions

from onnx_builders import init, model, vi, weight

LEVELS = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
OPTIONS = ShrinkOptions(min_elements=1000)
EIGHT = MatMulNBitsEncoder(8, 32, INT8_ACTIVATIONS)
FOUR = MatMulNBitsEncoder(4, 32)
GATHER = GatherBlockEncoder(32)


def _run(m: onnx.ModelProto, feeds: dict[str, np.ndarray], level: str) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.log_severity_level = 4
    out: np.ndarray = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    return out


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _encoded(m: onnx.ModelProto, encoder: Any) -> tuple[onnx.ModelProto, dict[str, Decode]]:
    """``m`` encoded, and each weight's decode (what its kernel must compute with)."""
    decodes: dict[str, Decode] = {}

    class Spy:
        def encode(self, w: np.ndarray, ctx: EncodeContext) -> Decode:
            dec = encoder.encode(w, ctx)
            decodes[str(len(decodes))] = dec
            return dec

    work = onnx.ModelProto()
    work.CopyFrom(m)
    encode_weights(work, Spy(), OPTIONS)
    onnx.checker.check_model(work, full_check=True)
    return work, decodes


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node]


def _matmul(k: int = 200, n: int = 96) -> onnx.ModelProto:
    return model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 3, k])], [vi("y", ["b", 3, n])],
                 [init("W", weight((k, n), 1))])


def _gemm(trans_b: int, bias: bool) -> onnx.ModelProto:
    w = weight((96, 200), 2) if trans_b else weight((200, 96), 2)
    inputs = ["x", "W", "C"] if bias else ["x", "W"]
    inits = [init("W", w)] + ([init("C", weight((96,), 3))] if bias else [])
    return model([helper.make_node("Gemm", inputs, ["y"], transB=trans_b)], [vi("x", ["b", 200])], [vi("y", ["b", 96])],
                 inits)


def _gather(d: int = 64) -> onnx.ModelProto:
    return model([helper.make_node("Gather", ["E", "ids"], ["y"])], [vi("ids", ["b", 7], TensorProto.INT64)],
                 [vi("y", ["b", 7, d])], [init("E", weight((700, d), 4))])


X = {"x": np.random.default_rng(0).standard_normal((2, 3, 200)).astype(np.float32)}
X2 = {"x": np.random.default_rng(1).standard_normal((5, 200)).astype(np.float32)}
IDS = {"ids": np.random.default_rng(2).integers(-700, 700, (3, 7)).astype(np.int64)}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("encoder", [FOUR, EIGHT], ids=["4-bit", "8-bit"])
def test_matmul_nbits_computes_with_its_decoded_weight(encoder: MatMulNBitsEncoder, level: str) -> None:
    m = _matmul()
    got, decodes = _encoded(m, encoder)
    assert _ops(got) == ["MatMulNBits"] and got.graph.initializer[0].name != "W"
    expected = X["x"] @ decodes["0"].decoded
    if encoder.accuracy_level:  # int8 activations inside the kernel: close, not equal
        assert _rel(_run(got, X, level), expected) < 2e-2
        assert np.array_equal(_run(got, X, "all"), _run(got, X, "disable"))
    else:  # float compute: the decoded weight is what it multiplies with
        np.testing.assert_allclose(_run(got, X, level), expected, rtol=1e-4, atol=1e-5)
    assert _rel(expected, X["x"] @ onnx.numpy_helper.to_array(m.graph.initializer[0])) < (0.02 if encoder.bits == 8
                                                                                            else 0.15)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("trans_b", "bias"), [(1, True), (0, False), (0, True)])
def test_gemm_becomes_matmul_nbits_with_its_bias_added(trans_b: int, bias: bool, level: str) -> None:
    m = _gemm(trans_b, bias)
    got, decodes = _encoded(m, FOUR)
    assert _ops(got) == (["MatMulNBits", "Add"] if bias else ["MatMulNBits"])
    c = onnx.numpy_helper.to_array(m.graph.initializer[1]) if bias else 0
    w = decodes["0"].decoded
    assert w.shape == ((96, 200) if trans_b else (200, 96))  # the weight's own layout
    expected = X2["x"] @ (w.T if trans_b else w) + c
    np.testing.assert_allclose(_run(got, X2, level), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("level", LEVELS)
def test_gather_block_quantized_gathers_its_decoded_rows(level: str) -> None:
    m = _gather()
    got, decodes = _encoded(m, GATHER)
    assert _ops(got) == ["GatherBlockQuantized"]
    np.testing.assert_array_equal(_run(got, IDS, level), decodes["0"].decoded[IDS["ids"]])  # negative ids too


def test_no_dequantize_linear_and_the_contrib_domain_is_imported() -> None:
    for m, enc in [(_matmul(), EIGHT), (_gemm(1, True), FOUR), (_gather(), GATHER)]:
        got, _ = _encoded(m, enc)
        assert "DequantizeLinear" not in _ops(got)
        assert {i.domain for i in got.opset_import} == {"", "com.microsoft"}


def test_what_cannot_be_replaced_stays_as_it_was() -> None:
    gather_and_matmul = model([helper.make_node("Gather", ["W", "ids"], ["e"]),
                               helper.make_node("MatMul", ["e", "W"], ["y"])],
                              [vi("ids", ["b"], TensorProto.INT64)], [vi("y", ["b", 64])],
                              [init("W", weight((64, 64), 1))])
    alpha = model([helper.make_node("Gemm", ["x", "W"], ["y"], alpha=0.5)], [vi("x", ["b", 200])],
                  [vi("y", ["b", 96])], [init("W", weight((200, 96), 2))])
    odd = _gather(d=40)  # rows of 40 values: no blocks of 32
    for m, enc, why in [(gather_and_matmul, FOUR, "not Gather"), (alpha, FOUR, "alpha"),
                        (odd, GATHER, "blocks of 32"), (_matmul(), GATHER, "Gather on axis 0 only")]:
        work = onnx.ModelProto()
        work.CopyFrom(m)
        records = encode_weights(work, enc, OPTIONS)
        assert [r.encoding for r in records] == ["kept"] and why in records[0].note, records[0].note
        assert work == m


def test_a_weight_in_a_constant_node_and_in_an_if_branch_is_replaced_where_it_lives() -> None:
    w = weight((200, 96), 5)
    branch = helper.make_graph([helper.make_node("Constant", [], ["Wb"], value=onnx.numpy_helper.from_array(w, "v")),
                                helper.make_node("MatMul", ["x", "Wb"], ["yb"])], "then", [], [vi("yb", ["b", 96])])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "W0"], ["yo"])], "else", [], [vi("yo", ["b", 96])],
                              [init("W0", w)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
              [vi("x", ["b", 200]), vi("c", [], TensorProto.BOOL)], [vi("y", ["b", 96])])
    got, decodes = _encoded(m, FOUR)
    assert len(decodes) == 2
    for then in (True, False):
        feeds = {**X2, "c": np.array(then)}
        for level in LEVELS:
            np.testing.assert_allclose(_run(got, feeds, level), X2["x"] @ decodes["0"].decoded, rtol=1e-4, atol=1e-5)
    subgraphs = [a.g for a in got.graph.node[0].attribute]
    assert all([n.op_type for n in g.node] == ["MatMulNBits"] for g in subgraphs)


def test_block_codes_use_every_level_and_hold_zeros_and_short_blocks() -> None:
    rows = np.random.default_rng(3).standard_normal((5, 70)).astype(np.float32)
    rows[1] = 0  # a zero row: scale 1, codes at the zero point
    for bits in (4, 8):
        b = quantize_blocks(rows, bits, 32)
        assert b.codes.shape == (5, 3, 32) and b.scale.shape == (5, 3)
        for r in (0, 2, 3, 4):  # each block's value of largest magnitude is code 0 (-2^(b-1)), and decodes to itself
            for k in range(3):
                at = 32 * k + int(np.abs(rows[r, 32 * k:32 * k + 32]).argmax())
                assert b.codes[r, k, at - 32 * k] == 0
                np.testing.assert_allclose(b.decoded[r, at], rows[r, at], rtol=1e-6)
        assert np.all(b.decoded[1] == 0) and np.all(b.scale[1] == 1)
        assert np.all(b.codes[:, 2, 70 - 64:] == 2 ** (bits - 1))  # the padding of the short last block is zero
        step = np.abs(b.scale).repeat(32, axis=1)[:, :70]
        error = np.abs(b.decoded - rows)
        clipped = b.codes.reshape(5, 96)[:, :70] == 2 ** bits - 1  # the side opposite the extreme has a code fewer
        assert np.all(error[~clipped] <= step[~clipped] / 2 * (1 + 1e-6)) and np.all(error <= step * (1 + 1e-6))
        assert packed(b).nbytes + b.scale.nbytes == stored_bytes(5, 70, bits, 32)
    with pytest.raises(NotEncodable, match="non-finite"):
        quantize_blocks(np.array([[np.inf, 1.0]], np.float32), 4, 32)
