"""Verification inputs that are broken, or that would check nothing, are refused with one line naming
the file and the array; generated inputs are plausible and always say what they are; real inputs fit
int8's rounding only when there are enough (in this process, through the API; the console script's and
the builds' cases are in tests/test_inputs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from broken_inputs import CASES, model_for, sample_file
from onnx import helper

from hatch_shrinkray import ShrinkOptions, ShrinkrayError, VerifyOptions, shrink
from hatch_shrinkray.evidence import MIN_UNITS

from onnx_builders import char_embedding, init, mlp, model, save, vi, weight


@pytest.mark.parametrize("case", list(CASES))
def test_api(case: str, tmp_path: Path) -> None:
    src, inputs = model_for(case, tmp_path), sample_file(case, tmp_path)
    with pytest.raises(ShrinkrayError) as info:
        shrink(src, tmp_path / "out.onnx", ShrinkOptions(verify=VerifyOptions(inputs=inputs)))
    assert CASES[case][1] in str(info.value)
    assert str(inputs) in str(info.value)
    assert not (tmp_path / "out.onnx").exists()


def test_a_constant_output_beside_a_live_one_is_reported_not_checked(tmp_path: Path) -> None:
    w = weight((256, 64), 1)
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Mul", ["y", "zero"], ["z"])],
              [vi("x", ["b", 256])], [vi("y", ["b", 64]), vi("z", ["b", 64])],
              [init("W", w), init("zero", np.zeros((1,), np.float32))])
    src = save(m, tmp_path / "two.onnx")
    result = shrink(src, None, ShrinkOptions())
    assert result.verification is not None and result.verification.passed
    by_name = {o.name: o for o in result.verification.outputs}
    assert by_name["z"].unchecked.startswith("constant") and not by_name["y"].unchecked
    assert "not checked: the original is constant" in result.verification.table()


@pytest.mark.parametrize("samples", [1, MIN_UNITS - 1])
def test_too_few_units_fit_nothing_and_say_so(samples: int, tmp_path: Path) -> None:
    """Below evidence.MIN_UNITS independent samples neither auto nor int8 fits anything: both ship
    int8 as round-to-nearest writes it, verified on every sample, and the line says why."""
    src = save(mlp(), tmp_path / "m.onnx")
    few = tmp_path / "few.npz"
    np.savez(few, x=np.random.default_rng(0).standard_normal((samples, 16, 256)).astype(np.float32))
    plain = shrink(src, None, ShrinkOptions(verify=None))
    for method in ("auto", "int8"):
        options = ShrinkOptions(method=method, verify=VerifyOptions(inputs=few))
        result = shrink(src, tmp_path / f"{method}.onnx", options)
        v = result.verification
        assert v is not None and v.calibration == 0 and v.samples == samples and v.weak
        assert f"{samples} independent samples, fewer than the {MIN_UNITS}" in v.fitting
        assert "weak evidence" in v.summary()
        assert all("gptq" not in t.encoding for t in result.tensors)
        assert (tmp_path / f"{method}.onnx").stat().st_size == plain.shrunk_size


def test_enough_units_fit_and_say_how_it_went(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    many = tmp_path / "many.npz"
    np.savez(many, x=np.random.default_rng(0).standard_normal((MIN_UNITS, 64, 256)).astype(np.float32))
    result = shrink(src, None, ShrinkOptions(verify=VerifyOptions(inputs=many)))
    v = result.verification
    assert v is not None and not v.weak and v.samples == MIN_UNITS
    assert v.fitting.startswith("output-aware rounding ") and "2 cross-fitted folds" in v.fitting

def test_int8_with_real_inputs_keeps_the_bytes_and_reduces_the_error(tmp_path: Path) -> None:
    """Output-aware rounding: the same stored bytes as round-to-nearest, less output error on held-out data."""
    src = save(mlp(256, 256), tmp_path / "m.onnx")
    rng = np.random.default_rng(3)
    mix = rng.standard_normal((256, 256)) * np.exp(rng.normal(0, 1, 256))  # correlated, uneven features
    x = (rng.standard_normal((16, 64, 256)) @ mix).astype(np.float32)
    samples = tmp_path / "real.npz"
    np.savez(samples, x=x)
    rtn_dir, aware_dir = tmp_path / "rtn", tmp_path / "aware"
    rtn_dir.mkdir()
    aware_dir.mkdir()
    rtn = shrink(src, rtn_dir / "m.onnx", ShrinkOptions(verify=None))
    aware = shrink(src, aware_dir / "m.onnx", ShrinkOptions(verify=VerifyOptions(inputs=samples)))
    assert rtn.shrunk_size == aware.shrunk_size
    assert all("output-aware rounding" in t.note for t in aware.encoded)
    from hatch_shrinkray.verification.runner import verify

    held_out = tmp_path / "held.npz"
    np.savez(held_out, x=(rng.standard_normal((8, 64, 256)) @ mix).astype(np.float32))
    err_rtn = verify(src, rtn_dir / "m.onnx", VerifyOptions(inputs=held_out)).worst_rel_l2
    err_aware = verify(src, aware_dir / "m.onnx", VerifyOptions(inputs=held_out)).worst_rel_l2
    assert err_aware < 0.8 * err_rtn, (err_aware, err_rtn)


def test_an_input_that_indexes_a_table_gets_generated_rows_inside_it(tmp_path: Path) -> None:
    """A 49-row embedding fed generated ids up to 64 did not run at all (the original was kept):
    the ids an input feeds a Gather with, through casts and reshapes, stay inside the table."""
    from hatch_shrinkray.onnxgraph.indices import table_rows
    from hatch_shrinkray.verification.inputs import InputSpec, generate

    source = char_embedding(tmp_path / "emb.onnx")
    assert table_rows(onnx.load(source)) == {"ids": 49}
    assert table_rows(onnx.load(char_embedding(tmp_path / "add.onnx", through="Add"))) == {}  # arithmetic: not rows
    feeds = generate([InputSpec("ids", "tensor(int32)", (1, 32), rows=49)], VerifyOptions(samples=50))
    assert max(int(f["ids"].max()) for f in feeds) == 48 and min(int(f["ids"].min()) for f in feeds) == 0
    result = shrink(source, tmp_path / "out.onnx")
    assert not result.unverified and result.verification is not None and result.verification.passed
    narrow = generate([InputSpec("ids", "tensor(int32)", (1, 32), rows=49)], VerifyOptions(int_low=3, int_high=9))
    assert {int(v) for f in narrow for v in f["ids"].reshape(-1)} <= set(range(3, 9))  # a narrower range stays
