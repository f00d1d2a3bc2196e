"""``auto``'s small weights: the Conv/MatMul/Gemm weights below ``min-elements`` enter ``auto``'s search
(float32 their floor, as method int8 keeps them) and ship with the plan's encoding through the small
rung, where the guard keeps the plan with them; method int8 never touches them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.fitting.small import small_weight
from hatch_shrinkray.methods import auto as auto_method
from hatch_shrinkray.methods.auto_weights import analyse
from hatch_shrinkray.onnxgraph.graph import find_sites

from onnx_builders import dtypes, init, model, save, vi, weight

IN, HIDDEN, CLASSES = 64, 96, 384


def small_then_large() -> onnx.ModelProto:
    """x -> Conv K (96x64x1x1: 6144 values, below min-elements) + bias -> Relu -> Conv W (384x96x1x1,
    above it) -> y: a pointwise convolution's stack, as in a mobile network's blocks. K's values sit on
    int8's grid (each channel's codes -127..127 times a step fp16 holds), so int8 stores it exactly;
    W is four times K's size or more, so that K's decode fits in the default load budget beside W's."""
    codes = np.random.default_rng(4).integers(-127, 128, (HIDDEN, IN, 1, 1))
    codes[:, 0] = 127
    kernel = (codes * 2.0**-8).astype(np.float32)  # a step fp16 holds exactly, as the scales are stored
    return model(
        [helper.make_node("Conv", ["x", "K", "kb"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Conv", ["r", "W"], ["y"])],
        [vi("x", ["batch", IN, 1, 1])], [vi("y", ["batch", CLASSES, 1, 1])],
        [init("K", kernel), init("kb", weight((HIDDEN,), 2)),
         init("W", weight((CLASSES, HIDDEN, 1, 1), 3))])


def calib(tmp_path: Path) -> Path:
    x = np.random.default_rng(7).standard_normal((32, 64, IN, 1, 1)).astype(np.float32)
    path = tmp_path / "calib.npz"
    np.savez(path, x=x)
    return path


def test_only_small_weights_of_layers_qualify() -> None:
    m = small_then_large()
    opts = ShrinkOptions(method="auto")
    assert {s.name for s in find_sites(m) if small_weight(s, opts)} == {"K"}  # not its bias, nor W (large)
    assert not any(small_weight(s, replace(opts, exclude_tensors=("K",))) for s in find_sites(m))
    depthwise = model([helper.make_node("Conv", ["x", "D"], ["y"], group=IN)], [vi("x", ["batch", IN, 4, 4])],
                      [vi("y", ["batch", IN, 2, 2])], [init("D", weight((IN, 1, 3, 3), 5))])
    assert not any(small_weight(s, opts) for s in find_sites(depthwise))  # 576 values: it stays with fp16


def test_only_guarded_auto_takes_them_into_its_analysis() -> None:
    feeds = [{"x": x} for x in np.random.default_rng(2).standard_normal((8, 16, IN, 1, 1)).astype(np.float32)]
    plain = analyse(small_then_large(), ShrinkOptions(method="auto"), feeds)
    both = analyse(small_then_large(), ShrinkOptions(method="auto"), feeds, small_weights=True)
    assert plain is not None and both is not None
    assert [w.site.name for w in plain.weights] == ["W"]  # a budget sweep's analysis, as before
    kernel = next(w for w in both.weights if w.site.name == "K")
    assert kernel.small and kernel.plain is None and kernel.candidates[-1].kind == "fp32"  # float32: its floor


def test_auto_encodes_a_small_conv_weight_and_int8_keeps_it_float32(tmp_path: Path) -> None:
    src = save(small_then_large(), tmp_path / "m.onnx")
    rec = calib(tmp_path)
    result = shrink(src, tmp_path / "auto.onnx", ShrinkOptions(method="auto", verify=VerifyOptions(inputs=rec)))
    assert result.verification is not None and result.verification.passed
    fitting = result.verification.fitting
    assert "auto's plan kept" in fitting, fitting
    assert "; small weights in the plan: 1 tensor below min-elements, 24.58 KB -> " in fitting, fitting
    kernel = next(t for t in result.tensors if t.name == "K")
    assert kernel.encoding.startswith("int8") and "small weights in the plan, auto" in kernel.note
    assert kernel.stored_bytes < kernel.original_bytes
    shipped = onnx.load(tmp_path / "auto.onnx")
    assert "K" not in dtypes(shipped)  # stored as codes, decoded under its name
    # Its scales are the fp16 values the codes were rounded against, stored as float32: no Cast to fold
    # at load for a few dozen bytes; the large weight's keep fp16 and their Cast.
    assert dtypes(shipped)["K_scale"] == TensorProto.FLOAT and dtypes(shipped)["W_scale"] == TensorProto.FLOAT16
    scale = onnx.numpy_helper.to_array(next(t for t in shipped.graph.initializer if t.name == "K_scale"))
    assert np.array_equal(scale.astype(np.float16).astype(np.float32), scale)
    assert [n.op_type for n in shipped.graph.node if "K_scale" in n.input] == ["Mul"]

    int8 = shrink(src, tmp_path / "int8.onnx", ShrinkOptions(method="int8", verify=VerifyOptions(inputs=rec)))
    assert "K" not in {t.name for t in int8.tensors}
    assert dtypes(onnx.load(tmp_path / "int8.onnx"))["K"] == TensorProto.FLOAT


def outlier_kernel_then_large() -> onnx.ModelProto:
    """``small_then_large`` with K off int8's grid: one large weight per output channel (input channel
    0) beside small ones, so int8's step per channel (large / 127) leaves the small ones a few levels."""
    kernel = (np.random.default_rng(4).standard_normal((HIDDEN, IN, 1, 1)) * 0.05).astype(np.float32)
    kernel[:, 0] = 4.0
    return model(
        [helper.make_node("Conv", ["x", "K", "kb"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Conv", ["r", "W"], ["y"])],
        [vi("x", ["batch", IN, 1, 1])], [vi("y", ["batch", CLASSES, 1, 1])],
        [init("K", kernel), init("kb", weight((HIDDEN,), 2)), init("W", weight((CLASSES, HIDDEN, 1, 1), 3))])


def channel_zero_calib(tmp_path: Path, name: str, *, held_out_too: bool) -> Path:
    """32 samples; auto fits on the even ones (its held-out half is the odd ones: ``Sequencing.folds``),
    where input channel 0 carries the signal and the others are 100 times quieter, so K's small weights
    look free to round. ``held_out_too``: the odd ones alike; else every channel speaks there."""
    x = np.random.default_rng(7).standard_normal((32, 64, IN, 1, 1)).astype(np.float32)
    x[0::2, :, 1:] *= 0.01
    if held_out_too:
        x[1::2, :, 1:] *= 0.01
    path = tmp_path / f"{name}.npz"
    np.savez(path, x=x)
    return path


def test_where_the_plan_with_them_loses_the_small_weights_go_fp16(tmp_path: Path) -> None:
    """The plan rounds K on the fitting half, where its small weights meet quiet inputs; on a held-out
    half where they carry the signal the plan with K in it loses to round-to-nearest int8 (K float32
    there), and the same plan with K in fp16 ships instead: its other weights as that plan chose them."""
    src = save(outlier_kernel_then_large(), tmp_path / "m.onnx")
    lost = shrink(src, tmp_path / "auto.onnx", ShrinkOptions(method="auto", verify=VerifyOptions(
        inputs=channel_zero_calib(tmp_path, "lost", held_out_too=False))))
    fitting = lost.verification.fitting  # type: ignore[union-attr]
    assert fitting.startswith("auto's plan kept: on 16 held-out units"), fitting
    assert "; with small weights in the plan, not kept: " in fitting, fitting
    assert "; small tensors in fp16: 1 tensor below min-elements, 24.58 KB -> 12.29 KB" in fitting, fitting
    assert next(t for t in lost.tensors if t.name == "K").encoding == "fp16"
    assert dtypes(onnx.load(tmp_path / "auto.onnx"))["K_fp16"] == TensorProto.FLOAT16
    # The same fitting half with a held-out half like it: the plan with K in it is kept ...
    kept = shrink(src, tmp_path / "kept.onnx", ShrinkOptions(method="auto", verify=VerifyOptions(
        inputs=channel_zero_calib(tmp_path, "kept", held_out_too=True))))
    assert "small weights in the plan: 1 tensor below min-elements" in kept.verification.fitting  # type: ignore[union-attr]
    assert next(t for t in kept.tensors if t.name == "K").encoding.startswith("int8")
    # ... and its other weights are those that shipped beside K in fp16 (no second search).
    large = [(t.name, t.encoding, t.stored_bytes) for t in lost.tensors if t.name == "W"]
    assert large == [(t.name, t.encoding, t.stored_bytes) for t in kept.tensors if t.name == "W"]
    assert auto_method.SMALL_FLOAT in next(t for t in lost.tensors if t.name == "W").note


def test_auto_with_small_weights_is_deterministic(tmp_path: Path) -> None:
    src = save(small_then_large(), tmp_path / "m.onnx")
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib(tmp_path)))
    shrink(src, tmp_path / "a.onnx", opts)
    shrink(src, tmp_path / "b.onnx", opts)
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_without_the_small_weights_the_plan_is_never_larger_than_round_to_nearest_int8() -> None:
    feeds = [{"x": x} for x in np.random.default_rng(2).standard_normal((8, 16, IN, 1, 1)).astype(np.float32)]
    analysis = analyse(small_then_large(), ShrinkOptions(method="auto"), feeds, small_weights=True)
    assert analysis is not None
    w = next(w for w in analysis.weights if w.site.name == "W")
    by_kind = {c.kind: c for c in w.candidates}
    rtn = w.rtn
    assert rtn is not None
    # Paid for by what the small weights saved: 16 bits for W is more than its int8; int8 ships for it.
    chosen, words = auto_method._without_small({("", "W"): (w, by_kind["int16"])}, "plan", "wheel")
    assert chosen[("", "W")][1] is rtn and "no smaller than round-to-nearest int8" in words
    # Smaller than int8 (fewer levels in int8's container compress better): the plan's choice stays.
    chosen, words = auto_method._without_small({("", "W"): (w, by_kind["int8-15levels"])}, "plan", "wheel")
    assert chosen[("", "W")][1] is by_kind["int8-15levels"] and words == f"plan; {auto_method.SMALL_FLOAT}"
