"""Verification inputs that are broken, or that would check nothing, are refused with one line naming
the file and the array (API and CLI); generated inputs are plausible and always say what they are."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import cli
from onnx import helper

from hatch_shrinkray import ShrinkOptions, ShrinkrayError, VerifyOptions, shrink
from hatch_shrinkray.evidence import MIN_UNITS

from onnx_builders import init, mlp, model, save, vi, weight


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def huge_header() -> bytes:
    """A ``.npy`` whose header declares 10^10 float32 values (40 GB) followed by a few bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (100000, 100000)})
    return buf.getvalue() + b"\0" * 64


CASES: dict[str, tuple[str, str]] = {
    # case: (what the file holds, expected message fragment)
    "zero-samples": ("x: 0 samples", "holds 0 samples: there is nothing to verify on"),
    "string-array": ("x: strings", "array 'x' has dtype <U5, which no model input takes"),
    "pickle": ("x: Python objects", "array 'x' holds Python objects (a pickle); refused"),
    "corrupt-header": ("x.npy: garbage", "array 'x' is corrupt"),
    "not-a-zip": ("garbage", "cannot read sample inputs"),
    "oversized": ("x.npy declares 40 GB", "array 'x' would take 40000.0 MB when loaded, over the 1000 MB limit"),
    "all-nan": ("x: NaN everywhere", "array 'x' (sample 0) is entirely NaN/inf: outputs computed from it check"),
    "float-for-int": ("ids: floats for an int64 input", "array 'ids' is float32 but the input takes int64"),
    "wrong-name": ("y instead of x", "missing arrays for inputs x; arrays y match no model input"),
    "truncated-recording": ("a recording whose metadata is cut", "not a readable recording"),
}


def sample_file(case: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{case}.npz"
    x = np.random.default_rng(0).standard_normal((4, 2, 256)).astype(np.float32)
    if case == "zero-samples":
        np.savez(path, x=np.zeros((0, 2, 256), np.float32))
    elif case == "string-array":
        np.savez(path, x=np.array(["hello", "world"]))
    elif case == "pickle":
        np.savez(path, x=np.array([{"a": 1}, None], dtype=object))
    elif case == "corrupt-header":
        write_zip(path, {"x.npy": b"\x93NUMPY\x01\x00garbage"})
    elif case == "not-a-zip":
        path.write_bytes(b"this is not a zip file at all")
    elif case == "oversized":
        write_zip(path, {"x.npy": huge_header()})
    elif case == "all-nan":
        np.savez(path, x=np.full((4, 2, 256), np.nan, np.float32))
    elif case == "float-for-int":
        np.savez(path, ids=np.ones((2, 8), np.float32))
    elif case == "wrong-name":
        np.savez(path, y=x)
    elif case == "truncated-recording":
        meta = json.dumps({"format": "hatch-shrinkray-recording", "version": 1})
        write_zip(path, {"__meta__.npy": npy_bytes(np.array(meta)), "s0000_0.npy": npy_bytes(x[0])})
    return path


def model_for(case: str, tmp_path: Path) -> Path:
    if case == "float-for-int":
        emb = weight((512, 64), 1)
        m = model([helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("ReduceMean", ["e"], ["y"],
                                                                                       axes=[1], keepdims=0)],
                  [vi("ids", ["b", 8], onnx.TensorProto.INT64)], [vi("y", ["b", 64])], [init("E", emb)])
        return save(m, tmp_path / "emb.onnx")
    return save(mlp(), tmp_path / "m.onnx")


@pytest.mark.parametrize("case", list(CASES))
def test_api(case: str, tmp_path: Path) -> None:
    src, inputs = model_for(case, tmp_path), sample_file(case, tmp_path)
    with pytest.raises(ShrinkrayError) as info:
        shrink(src, tmp_path / "out.onnx", ShrinkOptions(verify=VerifyOptions(inputs=inputs)))
    assert CASES[case][1] in str(info.value)
    assert str(inputs) in str(info.value)
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.process
def test_cli(case: str, tmp_path: Path) -> None:
    src, inputs = model_for(case, tmp_path), sample_file(case, tmp_path)
    proc = cli("shrink", str(src), "-o", str(tmp_path / "o"), "--inputs", str(inputs))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"error: {inputs}: ") and CASES[case][1] in first, proc.stderr


@pytest.mark.process
def test_outputs_that_check_nothing_are_refused(tmp_path: Path) -> None:
    """All-zero inputs into a model without biases: every output is 0 in both models, so any
    tolerance would pass. That is refused, naming the output."""
    src = save(mlp(), tmp_path / "m.onnx")
    zeros = tmp_path / "zeros.npz"
    np.savez(zeros, x=np.zeros((4, 2, 256), np.float32))
    proc = cli("shrink", str(src), "-o", str(tmp_path / "o"), "--inputs", str(zeros), "--max-rel-l2", "1e-12",
               "--min-cosine", "1")
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert "the original's outputs check nothing (y is constant (0) everywhere)" in first, proc.stderr
    assert not (tmp_path / "o" / "m.onnx").exists()


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


@pytest.mark.process
def test_generated_inputs_are_plausible_and_say_so(tmp_path: Path) -> None:
    """A text-line recogniser's input [N, 3, 48, W]: W was 1 pixel; now no smaller than 48."""
    conv = weight((32, 3, 3, 3), 1)
    m = model([helper.make_node("Conv", ["x", "K"], ["y"], pads=[1, 1, 1, 1])],
              [vi("x", ["n", 3, 48, "w"])], [vi("y", ["n", 32, 48, "w"])], [init("K", conv)])
    src = save(m, tmp_path / "rec.onnx")
    result = shrink(src, None, ShrinkOptions(min_elements=64))
    v = result.verification
    assert v is not None and not v.real and v.samples == 8
    assert "x 1x3x48x48" in v.input_source
    assert "on 8 generated samples" in v.summary()
    proc = cli("shrink", str(src), "-o", str(tmp_path / "o"), "--min-elements", "64")
    assert proc.returncode == 0, proc.stderr
    assert "note: generated inputs are a smoke check, not evidence; record real inputs with" in proc.stdout


@pytest.mark.process
def test_auto_without_real_inputs_is_one_line(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "o"), "--method", "auto")
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: method auto fits its choices to real inputs, and there are none: set `inputs`")
    assert "hatch-shrinkray record" in first and "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "m.onnx").exists()


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
