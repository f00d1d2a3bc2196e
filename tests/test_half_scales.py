"""``auto``'s int8 scales in fp16: rounded before the codes are, stored as fp16 where fp16 holds every
one of them, cast back to float32 when the session is created; method ``int8`` keeps float32 scales."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.encodings._decode import float_decode
from hatch_shrinkray.methods.auto_search import choose, write_chosen
from hatch_shrinkray.methods.auto_weights import analyse
from hatch_shrinkray.numerics.quant import quantize_symmetric
from hatch_shrinkray.numerics.scales import HALF_MIN, on_half_grid, stored_scales

from onnx_builders import init, model, run, save, vi, weight

K = 128
HIDDEN = 256
OUT = 64


def two_layers() -> onnx.ModelProto:
    """x -> MatMul W1 -> Relu -> MatMul W2 -> y: both weights reach ``min-elements``."""
    return model([helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                  helper.make_node("MatMul", ["r", "W2"], ["y"])],
                 [vi("x", ["batch", K])], [vi("y", ["batch", OUT])],
                 [init("W1", weight((K, HIDDEN), 1)), init("W2", weight((HIDDEN, OUT), 2))])


def inputs(tmp_path: Path, seed: int = 6) -> Path:
    x = np.random.default_rng(seed).standard_normal((32, 16, K)).astype(np.float32)
    path = tmp_path / "calib.npz"
    np.savez(path, x=x)
    return path


def scale_tensors(m: onnx.ModelProto) -> dict[str, int]:
    """The data type of every stored scale (the second input of a decode ``Mul``, through its ``Cast``)."""
    made_by = {o: n for n in m.graph.node for o in n.output}
    inits = {t.name: t.data_type for t in m.graph.initializer}
    out = {}
    for node in m.graph.node:
        if node.op_type == "Mul" and node.input[1] in made_by and made_by[node.input[1]].op_type == "Cast":
            out[made_by[node.input[1]].input[0]] = inits[made_by[node.input[1]].input[0]]
        elif node.op_type == "Mul" and node.input[1] in inits and node.input[0] in made_by:
            out[node.input[1]] = inits[node.input[1]]
    return out


def test_scales_round_to_the_nearest_normal_fp16_and_others_stay() -> None:
    s = np.array([0.1, 1e-3, 1e-6, 7e4, 2.0 ** -14, 0.3], dtype=np.float32)
    grid = on_half_grid(s, keep=np.array([False] * 5 + [True]))
    assert grid[0] == float(np.float16(0.1)) != float(np.float32(0.1))
    assert grid[1] == float(np.float16(1e-3))
    assert grid[2] == float(np.float32(1e-6))  # a subnormal in fp16: unchanged
    assert grid[3] == float(np.float32(7e4))  # beyond fp16's 65504: unchanged
    assert grid[4] == HALF_MIN
    assert grid[5] == float(np.float32(0.3))  # kept as given
    assert stored_scales(grid[:2].astype(np.float32)).dtype == np.float16
    assert stored_scales(grid.astype(np.float32)).dtype == np.float32


def test_codes_are_rounded_against_the_fp16_scale_and_decode_exactly() -> None:
    w = weight((64, 96), 3)
    q = quantize_symmetric(w, 0, half_scales=True)
    assert q.scale.dtype == np.float16 and q.scale.shape == (64, 1)
    s = q.scale.astype(np.float32)
    assert np.array_equal(q.decoded, q.codes.astype(np.float32) * s)
    assert np.array_equal(q.codes, np.clip(np.rint(w.astype(np.float64) / s.astype(np.float64)), -127, 127))
    plain = quantize_symmetric(w, 0)
    assert plain.scale.dtype == np.float32 and not np.array_equal(plain.scale, s)
    # Still within half a step of the weight, as with float32 scales.
    assert np.all(np.abs(q.decoded - w) <= 0.5 * s * (1 + 1e-6))
    dec = float_decode(q, w.dtype, 17, "int8 axis 0")
    assert dec.label == "int8 axis 0, fp16 scales"
    assert [(n.op, n.inputs) for n in dec.nodes] == [("Cast", ("q",)), ("Cast", ("scale",)), ("Mul", ("@0", "@1"))]
    assert [(n.op, n.inputs) for n in float_decode(plain, w.dtype, 17, "x").nodes] == [
        ("Cast", ("q",)), ("Mul", ("@0", "scale"))]


def test_a_scale_fp16_cannot_hold_keeps_the_tensor_float32() -> None:
    base = weight((8, 64), 4)
    tiny, huge, constant, exact = base.copy(), base.copy(), base.copy(), base.copy()
    tiny[3] *= 1e-4  # its scale falls below fp16's normal range
    huge[5] *= 1e9  # its scale is beyond 65504
    constant[2] = 0.1  # a constant channel is stored exactly: 0.1 is no fp16 value
    exact[2] = 0.5  # ... 0.5 is
    for w in (tiny, huge, constant):
        q = quantize_symmetric(w, 0, half_scales=True)
        assert q.scale.dtype == np.float32
        assert np.array_equal(q.decoded, q.codes.astype(np.float32) * q.scale)
    assert np.all(quantize_symmetric(constant, 0, half_scales=True).decoded[2] == np.float32(0.1))
    q = quantize_symmetric(exact, 0, half_scales=True)
    assert q.scale.dtype == np.float16 and np.all(q.decoded[2] == 0.5)


def test_auto_stores_fp16_scales_and_int8_float32(tmp_path: Path) -> None:
    src = save(two_layers(), tmp_path / "m.onnx")
    calib = inputs(tmp_path)
    auto = shrink(src, tmp_path / "auto.onnx", ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib)))
    assert auto.verification is not None and auto.verification.passed
    assert "auto's plan kept" in auto.verification.fitting
    assert "; int8 scales in fp16 for 2 of 2 weights" in auto.tensors[0].note
    assert all(t.encoding.endswith(", fp16 scales") for t in auto.tensors)
    assert set(scale_tensors(onnx.load(tmp_path / "auto.onnx")).values()) == {TensorProto.FLOAT16}

    int8 = shrink(src, tmp_path / "int8.onnx", ShrinkOptions(method="int8", verify=VerifyOptions(inputs=calib)))
    assert not any("fp16" in t.encoding for t in int8.tensors)
    assert set(scale_tensors(onnx.load(tmp_path / "int8.onnx")).values()) == {TensorProto.FLOAT}

    shrink(src, tmp_path / "again.onnx", ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib)))
    assert (tmp_path / "again.onnx").read_bytes() == (tmp_path / "auto.onnx").read_bytes()


def test_onnxruntime_folds_the_cast_and_gets_code_times_fp16_scale(tmp_path: Path) -> None:
    """The plan as written (no guard): onnxruntime's optimized graph is the original's, its weights
    exactly code x float32(fp16 scale), and the outputs those of numpy with those weights."""
    m = two_layers()
    x = np.load(inputs(tmp_path))["x"]
    opts = ShrinkOptions(method="auto")
    analysis = analyse(m, opts, [{"x": b} for b in x[:8]])
    assert analysis is not None
    written = copy.deepcopy(m)
    write_chosen(written, opts, *choose(analysis, opts))
    stored = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    assert {stored[n].dtype for n in scale_tensors(written)} == {np.dtype(np.float16)}
    expected = {}
    for name in ("W1", "W2"):
        codes, scale = stored[f"{name}_q"], stored[f"{name}_scale"]
        expected[name] = codes.astype(np.float32) * scale.astype(np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(written.SerializeToString(), so, providers=["CPUExecutionProvider"])
        optimized = onnx.load(so.optimized_model_filepath)
    assert [n.op_type for n in optimized.graph.node] == ["MatMul", "Relu", "MatMul"]
    folded = {n.input[1]: numpy_helper.to_array(next(t for t in optimized.graph.initializer if t.name == n.input[1]))
              for n in optimized.graph.node if n.op_type == "MatMul"}
    assert sorted(map(np.ndarray.tobytes, folded.values())) == sorted(map(np.ndarray.tobytes, expected.values()))

    got = run(written, {"x": x[0]})[0]
    want = np.maximum(x[0] @ expected["W1"], 0) @ expected["W2"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_cli_says_it_in_words(tmp_path: Path) -> None:
    import json
    import os

    from hardening import cli

    src = save(two_layers(), tmp_path / "m.onnx")
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache")}
    got = cli("shrink", str(src), "-o", str(tmp_path / "out"), "--method", "auto", "--inputs", str(inputs(tmp_path)),
              "--json", str(tmp_path / "report.json"), env=env)
    assert got.returncode == 0, got.stderr
    tensors = json.loads((tmp_path / "report.json").read_text())[0]["tensors"]
    assert [t["encoding"] for t in tensors] == ["int8 axis 1 gptq, fp16 scales", "int8 axis 1, fp16 scales"]
    assert "; int8 scales in fp16 for 2 of 2 weights]" in tensors[0]["note"]
