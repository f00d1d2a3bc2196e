"""Packed 4/6/10/12-bit codes: exact round trip, exact decode in onnxruntime at every opset and
weight location, folded at load, and reachable by ``auto``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.encodings.packing import BITS, pack, packed_decode, stored_bytes, unpack
from hatch_shrinkray.numerics.quant import quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.options import ShrinkOptions as Opts

from onnx_builders import const, init, model, save, vi, weight


@settings(max_examples=80, deadline=None)
@given(bits=st.sampled_from(BITS), shape=st.lists(st.integers(1, 13), min_size=1, max_size=3),
       seed=st.integers(0, 2**31))
def test_pack_round_trip(bits: int, shape: list[int], seed: int) -> None:
    qmax = 2 ** (bits - 1) - 1
    codes = np.random.default_rng(seed).integers(-qmax, qmax + 1, tuple(shape))
    chunks = pack(codes, bits)
    assert all(c.dtype in (np.uint8, np.int8) for c in chunks)
    assert sum(c.size for c in chunks) == stored_bytes(codes.size, bits)
    assert np.array_equal(unpack(chunks, bits, codes.shape), codes)


def test_codes_outside_the_range_are_refused() -> None:
    with pytest.raises(ValueError, match="4-bit"):
        pack(np.array([8]), 4)


class Packed:
    def __init__(self, bits: int) -> None:
        self.bits = bits

    def encode(self, w: np.ndarray, ctx: EncodeContext) -> Decode:
        q = quantize_symmetric(w, ctx.axis, self.bits)
        return packed_decode(q.codes, q.scale, self.bits, opset=ctx.opset, decoded=q.decoded,
                             label=f"int{self.bits}")


def conv_model(opset: int, as_constant: bool, shape: tuple[int, ...] = (33, 16, 3, 3)) -> onnx.ModelProto:
    """Conv with an odd number of weight values (slices needed), weight as initializer or Constant."""
    w = weight(shape, 4)
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])]
    inits = []
    if as_constant:
        nodes.insert(0, const("W", w))
    else:
        inits.append(init("W", w))
    return model(nodes, [vi("x", [1, shape[1], 8, 8])], [vi("y", [1, shape[0], 8, 11 - shape[3]])], inits,
                 opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("as_constant", [False, True])
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("shape", [(33, 16, 3, 3), (33, 16, 3, 4)])
def test_decode_is_exact_and_folded_at_load(tmp_path: Path, opset: int, as_constant: bool, bits: int,
                                            shape: tuple[int, ...]) -> None:
    """Last axis 3: flat planes, Slice + Reshape; 4: planes along the last axis (rows)."""
    m = conv_model(opset, as_constant, shape)
    original = np.asarray(onnx.numpy_helper.to_array(
        m.graph.node[0].attribute[0].t if as_constant else m.graph.initializer[0]))
    records = encode_weights(m, Packed(bits), Opts(min_elements=1))
    assert [r.encoding for r in records] == [f"int{bits}"]
    onnx.checker.check_model(m, full_check=True)
    assert records[0].stored_bytes < original.nbytes * (bits + 1) / 32

    expected_w = quantize_symmetric(original, 0, bits).decoded
    ref = model([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
                [vi("x", [1, 16, 8, 8])], [vi("y", [1, shape[0], 8, 11 - shape[3]])], [init("W", expected_w)],
                opset=opset)
    x = np.random.default_rng(1).standard_normal((1, 16, 8, 8)).astype(np.float32)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    got = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(got, want)
    folded = onnx.load(str(tmp_path / "opt.onnx"))
    assert not {"BitShift", "Concat", "Cast", "Mul"} & {n.op_type for n in folded.graph.node}


@pytest.mark.parametrize("load_factor", [3.0, None])
def test_auto_takes_fewer_int8_levels_not_packed_codes_for_conv_weights(tmp_path: Path,
                                                                         load_factor: float | None) -> None:
    """A loose budget sends a Conv weight (no MatMulNBits there) to fewer levels in int8 codes, whatever
    the load cap (``budget-load``): they load like int8, where packed codes would cost twice its
    folding and compress worse. Either result verifies."""
    m = conv_model(13, False, (64, 64, 3, 3))
    src = save(m, tmp_path / "conv.onnx")
    x = np.random.default_rng(2).standard_normal((32, 1, 64, 8, 8)).astype(np.float32)  # 16 units a side
    np.savez(tmp_path / "x.npz", x=x)
    opts = ShrinkOptions(method="auto", budget_rel_l2=0.2, budget_cosine=0.97, budget_agreement=0.0,
                         budget_load=load_factor or ShrinkOptions().budget_load,
                         verify=VerifyOptions(inputs=tmp_path / "x.npz", max_rel_l2=0.2, min_cosine=0.97))
    result = shrink(src, tmp_path / "out.onnx", opts)
    (rec,) = result.encoded
    assert rec.encoding.startswith("int8 ") and "levels" in rec.encoding, rec
    assert result.verification is not None and result.verification.passed
    assert result.shrunk_sizes is not None and result.original_sizes is not None
    assert result.shrunk_sizes.wheel < 0.2 * result.original_sizes.wheel  # int8's own: about 0.27x


def embedding_model(tied: bool) -> onnx.ModelProto:
    """ids -> Gather(E) -> MatMul(W); ``tied``: E is also the output projection (E^T), as in LMs."""
    e = weight((1000, 64), 7)
    nodes = [helper.make_node("Gather", ["E", "ids"], ["h"]), helper.make_node("MatMul", ["h", "W"], ["y"])]
    outputs = [vi("y", [2, 5, 64])]
    if tied:
        nodes += [helper.make_node("Transpose", ["E"], ["Et"]), helper.make_node("MatMul", ["y", "Et"], ["logits"])]
        outputs.append(vi("logits", [2, 5, 1000]))
    return model(nodes, [vi("ids", [2, 5], onnx.TensorProto.INT64)], outputs,
                 [init("E", e), init("W", weight((64, 64), 8))])


@pytest.mark.parametrize("bits", [4, 6, 8, 10, 12])
@pytest.mark.parametrize("tied", [False, True])
def test_gathered_rows_decode_exactly_and_nothing_is_folded(tmp_path: Path, bits: int, tied: bool) -> None:
    """An embedding read only by Gather is decoded per inference on the gathered rows: the same
    values as the folded table, and no decode of the whole table at load. Tied to another use: folded."""
    m = embedding_model(tied)
    original = onnx.numpy_helper.to_array(m.graph.initializer[0])
    encoder = Packed(bits) if bits != 8 else None
    records = encode_weights(m, encoder or _Int8(), Opts(min_elements=60000))
    (rec,) = records
    assert ("gathered rows" in rec.note) == (not tied)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Gather") == (1 if tied else 3 if bits in (6, 10, 12) else 2)  # codes (+ chunk) + scale
    expected = (quantize_symmetric(original, 0, bits).decoded if encoder else
                quantize_symmetric(original, 0, 8).decoded)
    ref = embedding_model(tied)
    ref.graph.initializer[0].CopyFrom(init("E", expected))
    ids = np.random.default_rng(4).integers(0, 1000, (2, 5))
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    got = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})
    want = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    floats = [np.prod(t.dims) for t in onnx.load(str(tmp_path / "opt.onnx")).graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT]
    assert (max(floats) >= original.size) == tied  # the float table exists only where it was folded


class _Int8:
    def encode(self, w: np.ndarray, ctx: EncodeContext) -> Decode:
        from hatch_shrinkray.encodings.int8 import Int8Encoder

        return Int8Encoder().encode(w, ctx)
