"""Each method end to end on small models: size, verification, and what it emits."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hardening import MODEL, MODELS_DIR, _out, build, cli, write_project
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, ShrinkrayError, VerificationError, VerifyOptions, shrink
from hatch_shrinkray.encodings.int8 import unfused_dequantize
from hatch_shrinkray.methods.runtimes import DQ_MATMUL_FUSED
from hatch_shrinkray.option_table import option_errors

from onnx_builders import init, mlp, model, run, save, vi, weight

X = {"x": np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)}


def ops(m: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in m.graph.node}


@pytest.mark.parametrize(("method", "max_ratio", "emitted"), [
    ("int8", 0.27, {"Cast", "Mul"}),
    ("fp16", 0.51, {"Cast"}),
    ("float-levels", 1.01, set()),
    ("dedup", 1.01, set()),
    ("dynamic", 0.5, {"MatMulInteger"}),
    ("int4", 0.2, {"MatMulNBits"}),
])
def test_every_method_shrinks_and_verifies(tmp_path: Path, method: str, max_ratio: float, emitted: set[str]) -> None:
    src = save(mlp(512, 512), tmp_path / "m.onnx")
    before = src.read_bytes()
    out = tmp_path / "out" / "m.onnx"
    # 4-bit on Gaussian weights: ~0.11 rel L2, and a label of the 8 generated samples may flip
    loose = VerifyOptions(max_rel_l2=0.2, min_cosine=0.98, min_agreement=0.8)
    result = shrink(src, out, ShrinkOptions(method=method, verify=loose if method == "int4" else VerifyOptions()))
    assert src.read_bytes() == before
    assert result.verification is not None and result.verification.passed
    assert out.stat().st_size == result.shrunk_size <= max_ratio * result.original_size
    assert emitted <= ops(onnx.load(str(out)))
    onnx.checker.check_model(str(out), full_check=True)


def test_float_levels_snaps_each_channel_to_n_levels(tmp_path: Path) -> None:
    src = save(mlp(512, 512), tmp_path / "m.onnx")
    shrink(src, tmp_path / "o.onnx", ShrinkOptions(method="float-levels", levels=16, verify=None))
    w = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "o.onnx")).graph.initializer}["W1"]
    assert w.dtype == np.float32
    assert max(len(np.unique(w[:, j])) for j in range(w.shape[1])) <= 16


def test_fast_decode_emits_dequantize_linear_only_for_matmul_at_opset_13(tmp_path: Path) -> None:
    """Only where the build's onnxruntime fuses it (MatMulNBits); elsewhere, e.g. a MatMul followed
    by Relu, it would run on every inference, so that weight is decoded in float."""
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", 512])], [vi("y", ["batch", 512])],
              [init("W", weight((512, 512), 2))])
    out = tmp_path / "o.onnx"
    shrink(save(m, tmp_path / "m.onnx"), out, ShrinkOptions(decode="fast"))
    fused = tuple(int(p) for p in ort.__version__.split(".")[:3]) >= DQ_MATMUL_FUSED
    assert ("DequantizeLinear" in ops(onnx.load(str(out)))) == fused
    result = shrink(save(mlp(512, 512), tmp_path / "mlp.onnx"), out, ShrinkOptions(decode="fast"))
    assert not unfused_dequantize(onnx.load(str(out)))
    assert "not fused by onnxruntime" in result.encoded[0].note
    old = mlp(512, 512)
    old.opset_import[0].version = 12
    shrink(save(old, tmp_path / "old.onnx"), out, ShrinkOptions(decode="fast"))
    got = onnx.load(str(out))
    assert "DequantizeLinear" not in ops(got)
    assert got.opset_import[0].version == 12  # never raised silently


def test_int4_does_not_mutate_the_callers_model() -> None:
    m = mlp(512, 512)
    snapshot = m.SerializeToString()
    shrink(m, None, ShrinkOptions(method="int4", verify=None))
    assert m.SerializeToString() == snapshot


def test_verification_failure_writes_nothing(tmp_path: Path) -> None:
    src = save(mlp(512, 512), tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    strict = VerifyOptions(max_rel_l2=1e-9, judges=(("y", "values"),))  # labels held: only values are gated
    with pytest.raises(VerificationError) as err:
        shrink(src, out, ShrinkOptions(verify=strict, strict=True))
    assert "rel L2" in err.value.table and "FAIL" in err.value.table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_sample_inputs_from_npz_are_used(tmp_path: Path) -> None:
    src = save(mlp(512, 512), tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones((5, 512), dtype=np.float32))
    result = shrink(src, None, ShrinkOptions(verify=VerifyOptions(inputs=tmp_path / "in.npz")))
    assert result.verification is not None and result.verification.input_source.endswith("in.npz")
    np.savez(tmp_path / "bad.npz", y=np.ones((5, 512), dtype=np.float32))
    with pytest.raises(ShrinkrayError, match="missing arrays for inputs x"):
        shrink(src, None, ShrinkOptions(verify=VerifyOptions(inputs=tmp_path / "bad.npz")))


def test_verification_off_is_explicit() -> None:
    assert shrink(mlp(), None, ShrinkOptions(verify=None)).verification is None


def test_option_errors_are_all_reported() -> None:
    bad = ShrinkOptions(method="int3", levels=1, min_elements=0, block_size=48,
                        verify=VerifyOptions(max_rel_l2=-1, min_agreement=2))
    errors = option_errors(bad, {"levels": "--levels"})
    assert len(errors) == 6
    assert any(e.startswith("--levels must be an integer from 2 to 65536") for e in errors)
    with pytest.raises(ShrinkrayError, match="invalid options"):
        shrink(mlp(), None, bad)


def test_already_quantized_input_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "o.onnx"
    shrink(save(mlp(512, 512), tmp_path / "m.onnx"), out)
    with pytest.raises(ShrinkrayError, match="already quantized"):
        shrink(out, None)


def test_no_tensor_above_threshold_is_a_reported_noop(tmp_path: Path) -> None:
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 16])], [vi("y", ["b", 16])],
              [init("W", weight((16, 16)))])
    result = shrink(m, tmp_path / "o.onnx")
    assert not result.encoded
    np.testing.assert_array_equal(run(m, {"x": np.ones((1, 16), np.float32)})[0],
                                  run(tmp_path / "o.onnx", {"x": np.ones((1, 16), np.float32)})[0])


def test_verify_accepts_model_protos_and_paths(tmp_path: Path) -> None:
    from hatch_shrinkray import verify

    m = mlp(512, 512)
    out = tmp_path / "o.onnx"
    shrink(m, out)
    assert verify(m, out).passed
    assert verify(save(m, tmp_path / "m.onnx"), onnx.load(str(out))).passed
    assert not verify(m, out, VerifyOptions(max_rel_l2=1e-9, judges=(("y", "values"),))).passed
    assert not verify(m, out, VerifyOptions(max_rel_l2=1e-9)).passed  # a limit the user set gates every output
    assert verify(m, out, VerifyOptions()).outputs[0].waived == ()  # within the default anyway


# ---------------------------------------------------------------------------------------------
# The predecessor's confirmed defects (onnx-shrink-ray 0.0.11, by number): none may happen here.


@pytest.mark.parametrize("levels", [0, 1, 65537])
def test_7_bad_level_counts_are_refused(levels: int) -> None:
    with pytest.raises(ShrinkrayError, match="levels must be an integer from 2 to 65536"):
        shrink(mlp(), None, ShrinkOptions(method="float-levels", levels=levels))


@pytest.mark.parametrize("levels", [2, 3, 255])
def test_7_odd_and_tiny_level_counts_give_that_many_finite_levels(tmp_path: Path, levels: int) -> None:
    out = _out(tmp_path, mlp(512, 512), method="float-levels", levels=levels, verify=None)
    w = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}["W1"]
    assert np.isfinite(w).all()
    assert max(len(np.unique(w[:, j])) for j in range(w.shape[1])) <= levels


def test_10_api_accepts_str_and_path(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    assert shrink(str(src), str(tmp_path / "a.onnx")).verification is not None
    assert shrink(src, tmp_path / "b.onnx").verification is not None


def test_11_dynamic_on_fp16_and_nan_models_fails_cleanly_or_verifies(tmp_path: Path) -> None:
    h = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256], TensorProto.FLOAT16)],
              [vi("y", ["b", 256], TensorProto.FLOAT16)], [init("W", weight((256, 256), dtype=np.float16))])
    w = weight((256, 256))
    w[3, 3] = np.nan
    n = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256])], [vi("y", ["b", 256])],
              [init("W", w)])
    for m in (h, n):
        try:
            result = shrink(m, None, ShrinkOptions(method="dynamic"))
        except ShrinkrayError:
            continue  # a clear error is acceptable; an invalid model or a crash is not
        assert result.verification is not None and result.verification.passed


# ---------------------------------------------------------------------------------------------
# Never ship a result that is not smaller; say what stayed float and why.


def make_grows_under_dynamic(d: Path) -> Path:
    """An 8 x 8 MLP: onnxruntime's quantize_dynamic adds more graph than it saves (188%)."""
    (d / "a.onnx").write_bytes(mlp(8, 8).SerializeToString())
    return d / "a.onnx"


GROWS = ShrinkOptions(method="dynamic", min_elements=1)


def test_api_keeps_the_original_when_the_result_is_not_smaller(tmp_path: Path) -> None:
    path = make_grows_under_dynamic(tmp_path)
    out = tmp_path / "out" / "a.onnx"
    result = shrink(path, out, GROWS)
    assert result.kept_original is not None and "would not make it smaller" in result.kept_original
    assert result.encoded == ()
    assert result.shrunk_size == result.original_size
    assert onnx.load(str(out)) == onnx.load(str(path))
    from hatch_shrinkray.report import shrink_report

    first = shrink_report(result).splitlines()[0]
    assert first.startswith(f"{path}: original written (") and "dynamic would not make it smaller" in first, \
        first


def test_cli_keeps_the_original_when_the_result_is_not_smaller(tmp_path: Path) -> None:
    path = make_grows_under_dynamic(tmp_path)
    proc = cli("shrink", str(path), "-o", str(tmp_path / "out"), "--method", "dynamic", "--min-elements", "1")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[0]
    assert ": original written (" in line and ": dynamic would not make it smaller (" in line, line
    assert onnx.load(str(tmp_path / "out" / "a.onnx")) == onnx.load(str(path))


def test_hook_keeps_the_original_when_the_result_is_not_smaller(tmp_path: Path, isolated: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", 'method = "dynamic"\nmin-elements = 1\n')
    path = make_grows_under_dynamic(root / MODELS_DIR)
    for out in ("dist", "again"):  # the second build is served from the cache and says the same
        with zipfile.ZipFile(build(root, out=tmp_path / out)) as zf:
            assert zf.read("toymodel/models/a.onnx") == path.read_bytes()
        err = capsys.readouterr().err
        assert f"shrinkray: {MODEL}: shipped its original (" in err, err
        assert "): dynamic would not make it smaller (" in err, err
        assert "no model shrunk, 1 shipped its original" in err
