"""``auto``'s small tensors in fp16: the float32 tensors below ``min-elements`` that feed float
computation, stored as fp16 and cast back at load, in ``auto``'s plan only and only where the guard
keeps the plan with them."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.fitting import small as small_rung
from hatch_shrinkray.fitting.small import small_tensors, write_small

from onnx_builders import dtypes, init, model, run, save, vi, weight

K = 64
HIDDEN = 256


def biased_mlp() -> onnx.ModelProto:
    """x -> MatMul W1 -> Add b1 -> Mul g1 -> Relu -> MatMul W2 -> Add b2 -> Div big -> Add eps -> Mul half -> y.

    W1 and W2 reach ``min-elements`` (16384 values); b1 and g1 are small float operands fp16 stores
    to its precision; ``big`` holds 70000 (beyond fp16's 65504), ``eps`` 1e-7 (fp16 keeps it only as a
    subnormal, 19% off), ``b2`` (64 values) and the scalar ``half`` are too small to pay for a Cast."""
    r = np.random.default_rng(3)
    big = np.ones(K, np.float32)
    big[::8] = 70000.0
    return model(
        [helper.make_node("MatMul", ["x", "W1"], ["h1"]), helper.make_node("Add", ["h1", "b1"], ["h2"]),
         helper.make_node("Mul", ["h2", "g1"], ["h3"]), helper.make_node("Relu", ["h3"], ["h4"]),
         helper.make_node("MatMul", ["h4", "W2"], ["h5"]), helper.make_node("Add", ["h5", "b2"], ["h6"]),
         helper.make_node("Div", ["h6", "big"], ["h7"]), helper.make_node("Add", ["h7", "eps"], ["h8"]),
         helper.make_node("Mul", ["h8", "half"], ["y"])],
        [vi("x", ["batch", K])], [vi("y", ["batch", K])],
        [init("W1", weight((K, HIDDEN), 1)), init("b1", (r.standard_normal(HIDDEN) * 0.1).astype(np.float32)),
         init("g1", (1 + r.standard_normal(HIDDEN) * 0.1).astype(np.float32)), init("W2", weight((HIDDEN, K), 2)),
         init("b2", (r.standard_normal(K) * 0.1).astype(np.float32)), init("big", big),
         init("eps", np.full(K, 1e-7, np.float32)), init("half", np.array(0.5, np.float32))])


def calib(tmp_path: Path, n: int = 32, batch: int = 16, seed: int = 5) -> Path:
    x = np.random.default_rng(seed).standard_normal((n, batch, K)).astype(np.float32)
    path = tmp_path / "calib.npz"
    np.savez(path, x=x)
    return path


def test_small_float_operands_go_fp16_and_those_fp16_cannot_hold_stay_float32() -> None:
    m = biased_mlp()
    small = small_tensors(m, ShrinkOptions(method="auto"))
    assert sorted(name for _, name in small.decodes) == ["b1", "g1"]
    assert small.sizes["disk"] == (4 * 2 * HIDDEN, 2 * 2 * HIDDEN)
    assert small.words() == "small tensors in fp16: 2 tensors below min-elements, 2.05 KB -> 1.02 KB"
    x = np.random.default_rng(1).standard_normal((8, K)).astype(np.float32)
    expected = run(m, {"x": x})[0]
    work = copy.deepcopy(m)
    records = write_small(work, ShrinkOptions(method="auto"), small)
    assert sorted(r.name for r in records) == ["b1", "g1"] and {r.encoding for r in records} == {"fp16"}
    kinds = dtypes(work)
    assert kinds["b1_fp16"] == kinds["g1_fp16"] == TensorProto.FLOAT16
    assert {kinds[n] for n in ("big", "eps", "b2", "half", "W1")} == {TensorProto.FLOAT}
    assert [n.op_type for n in work.graph.node[:3]] == ["Cast", "Cast", "MatMul"]
    got = run(work, {"x": x})[0]
    assert np.linalg.norm(got - expected) <= 1e-3 * np.linalg.norm(expected)
    again = copy.deepcopy(m)
    write_small(again, ShrinkOptions(method="auto"), small_tensors(m, ShrinkOptions(method="auto")))
    assert again.SerializeToString() == work.SerializeToString()


def test_tensors_read_outside_float_computation_excluded_or_graph_outputs_stay_float32() -> None:
    n = 128
    scales = np.ones(n, np.float32)  # read by an op outside FLOAT_OPERANDS (as a Resize scale would be)
    m = model(
        [helper.make_node("Add", ["x", "b"], ["y"]), helper.make_node("Mul", ["x", "c"], ["z"]),
         helper.make_node("Identity", ["s"], ["scales_out"])],
        [vi("x", ["batch", n])], [vi("y", ["batch", n]), vi("z", ["batch", n]), vi("scales_out", [n])],
        [init("b", np.full(n, 0.25, np.float32)), init("c", np.full(n, 2.0, np.float32)), init("s", scales)])
    m.graph.output.append(vi("c", [n]))  # a graph output keeps its values exactly
    names = {n for _, n in small_tensors(m, ShrinkOptions(method="auto")).decodes}
    assert names == {"b"}
    assert small_tensors(m, ShrinkOptions(method="auto", exclude_tensors=("b",))).decodes == {}


def test_auto_ships_them_in_its_plan_and_int8_never(tmp_path: Path) -> None:
    src = save(biased_mlp(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path, seed=6)))
    result = shrink(src, tmp_path / "auto.onnx", opts)
    assert result.verification is not None and result.verification.passed
    assert "auto's plan kept" in result.verification.fitting
    assert "; small tensors in fp16: 2 tensors below min-elements, 2.05 KB -> 1.02 KB" in result.verification.fitting
    enc = {t.name: t.encoding for t in result.tensors}
    assert enc["b1"] == enc["g1"] == "fp16" and not {"big", "eps", "b2", "half"} & set(enc)
    assert "small tensors in fp16: 2 tensors below min-elements" in result.tensors[0].note
    assert [(k.reason, k.count) for k in result.kept_float] == [("below min-elements", 4)]  # big, eps, b2, half
    written = onnx.load(tmp_path / "auto.onnx")
    assert dtypes(written)["b1_fp16"] == TensorProto.FLOAT16 and dtypes(written)["big"] == TensorProto.FLOAT

    int8_opts = ShrinkOptions(method="int8", verify=VerifyOptions(inputs=tmp_path / "calib.npz"))
    int8 = shrink(src, tmp_path / "int8.onnx", int8_opts)
    assert not any(t.encoding == "fp16" for t in int8.tensors)
    assert TensorProto.FLOAT16 not in dtypes(onnx.load(tmp_path / "int8.onnx")).values()
    assert [(k.reason, k.count) for k in int8.kept_float] == [("below min-elements", 6)]


def flip_prone() -> onnx.ModelProto:
    """Scores ``x @ W + b`` where ``b``'s classes sit 0.3 apart at 1000, where fp16's step is 0.5 (each
    value still within fp16's precision): rounding them moves which class wins on many inputs."""
    classes = 128
    b = (1000.0 + 0.3 * np.arange(classes) % 1.2).astype(np.float32)
    return model([helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
                 [vi("x", ["batch", HIDDEN])], [vi("y", ["batch", classes])],
                 [init("W", weight((HIDDEN, classes), 4)), init("b", b)])


def test_where_the_plan_with_them_loses_what_ships_is_the_plan_without_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = save(flip_prone(), tmp_path / "m.onnx")
    x = np.random.default_rng(5).standard_normal((32, 16, HIDDEN)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", x=x)
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=tmp_path / "calib.npz"))
    assert small_tensors(flip_prone(), opts).decodes  # the rung applies ...
    fitting = shrink(src, tmp_path / "with.onnx", opts).verification.fitting  # type: ignore[union-attr]
    assert "; with small tensors in fp16, not kept: " in fitting, fitting
    monkeypatch.setattr("hatch_shrinkray.methods.auto.small_tensors", lambda m, o, w=None: small_rung.Small({}, {}))
    shrink(src, tmp_path / "without.onnx", opts)
    # ... and loses the guard: what ships is what ships without the rung, byte for byte.
    assert (tmp_path / "with.onnx").read_bytes() == (tmp_path / "without.onnx").read_bytes()
    assert TensorProto.FLOAT16 not in dtypes(onnx.load(tmp_path / "with.onnx")).values()


def test_auto_with_small_tensors_is_deterministic(tmp_path: Path) -> None:
    src = save(biased_mlp(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)))
    shrink(src, tmp_path / "a.onnx", opts)
    shrink(src, tmp_path / "b.onnx", opts)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
