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
from hatch_shrinkray.methods.packing import BITS, pack, packed_decode, stored_bytes, unpack
from hatch_shrinkray.numerics.quant import quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.options import ShrinkOptions as Opts

from onnx_builders import const, init, model, save, vi, weight


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from(BITS), n=st.integers(1, 300), seed=st.integers(0, 2**31))
def test_pack_round_trip(bits: int, n: int, seed: int) -> None:
    qmax = 2 ** (bits - 1) - 1
    codes = np.random.default_rng(seed).integers(-qmax, qmax + 1, n)
    chunks = pack(codes, bits)
    assert all(c.dtype in (np.uint8, np.int8) for c in chunks)
    assert sum(c.size for c in chunks) == stored_bytes(n, bits)
    assert np.array_equal(unpack(chunks, bits, n), codes)


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
    return model(nodes, [vi("x", [1, shape[1], 8, 8])], [vi("y", [1, shape[0], 8, 8])], inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("as_constant", [False, True])
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("shape", [(33, 16, 3, 3), (32, 16, 3, 3)])
def test_decode_is_exact_and_folded_at_load(tmp_path: Path, opset: int, as_constant: bool, bits: int,
                                            shape: tuple[int, ...]) -> None:
    """Odd first axis: flat planes, Slice + Reshape; even: planes in the weight's shape."""
    m = conv_model(opset, as_constant, shape)
    original = np.asarray(onnx.numpy_helper.to_array(
        m.graph.node[0].attribute[0].t if as_constant else m.graph.initializer[0]))
    records = encode_weights(m, Packed(bits), Opts(min_elements=1))
    assert [r.encoding for r in records] == [f"int{bits}"]
    onnx.checker.check_model(m, full_check=True)
    assert records[0].stored_bytes < original.nbytes * (bits + 1) / 32

    expected_w = quantize_symmetric(original, 0, bits).decoded
    ref = model([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
                [vi("x", [1, 16, 8, 8])], [vi("y", [1, shape[0], 8, 8])], [init("W", expected_w)], opset=opset)
    x = np.random.default_rng(1).standard_normal((1, 16, 8, 8)).astype(np.float32)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    got = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(got, want)
    folded = onnx.load(str(tmp_path / "opt.onnx"))
    assert not {"BitShift", "Concat", "Cast", "Mul"} & {n.op_type for n in folded.graph.node}


def test_auto_uses_packed_levels_for_conv_weights(tmp_path: Path) -> None:
    """A loose budget sends a Conv weight (no MatMulNBits there) below 8 bits; the result verifies."""
    m = conv_model(13, False, (64, 64, 3, 3))
    src = save(m, tmp_path / "conv.onnx")
    x = np.random.default_rng(2).standard_normal((8, 1, 64, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    opts = ShrinkOptions(method="auto", budget_rel_l2=0.2, budget_cosine=0.97, budget_agreement=0.0,
                         verify=VerifyOptions(inputs=tmp_path / "x.npz", max_rel_l2=0.2, min_cosine=0.97))
    result = shrink(src, tmp_path / "out.onnx", opts)
    (rec,) = result.encoded
    assert rec.encoding.startswith(("int4", "int6")), rec
    assert result.verification is not None and result.verification.passed
    assert result.ratio < 0.22
