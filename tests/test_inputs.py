"""Verification inputs that are broken, or that would check nothing, are refused with one line naming
the file and the array; generated inputs are plausible and always say what they are: through the
console script and in builds in a fresh process (the API's cases are in tests/unit/test_inputs.py)."""

from __future__ import annotations

import os
import subprocess
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from broken_inputs import CASES, model_for, sample_file
from hardening import CONSOLE_SCRIPT, MODEL, cli, files_under, hook_build_error, one_error, write_project
from onnx import helper

from hatch_shrinkray import ShrinkOptions, shrink

from onnx_builders import char_embedding, init, mlp, model, save, vi, weight


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
    assert "note: a smoke check; record real inputs: `hatch-shrinkray record -o " in proc.stdout


@pytest.mark.process
def test_auto_without_real_inputs_is_one_line(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "o"), "--method", "auto")
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: method auto fits its choices to real inputs, and there are none: record real "
                            "inputs: `hatch-shrinkray record -o "), first
    assert first.endswith(", then pass it as `--inputs`"), first
    assert "hatch-shrinkray record" in first and "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "m.onnx").exists()


# ---------------------------------------------------------------------------------------------
# `inputs`: only regular files, or directories of regular files; special files are one line,
# with the cache on and off, and never a hang.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def special_files(tmp_path: Path) -> dict[str, Path]:
    import socket

    fifo, sock, recording = tmp_path / "fifo.npz", tmp_path / "sock.npz", tmp_path / "recording"
    os.mkfifo(fifo)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.close()
    recording.mkdir()
    os.mkfifo(recording / "m-0123456789abcdef.npz")
    return {"/dev/zero": Path("/dev/zero"), "fifo": fifo, "socket": sock, "directory with a fifo": recording}


SPECIAL = {"/dev/zero": "names a file that is a character device, not a regular file",
           "fifo": "names a file that is a FIFO, not a regular file",
           "socket": "names a file that is a socket, not a regular file",
           "directory with a fifo": "holds m-0123456789abcdef.npz, which is a FIFO, not a regular file"}


@pytest.mark.process
@pytest.mark.parametrize("kind", list(SPECIAL))
def test_special_inputs_are_one_line_for_shrink_and_compare(tmp_path: Path, kind: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    inputs = special_files(tmp_path)[kind]
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--inputs", str(inputs), timeout=60))
    assert line == f"error: --inputs {SPECIAL[kind]}; " + (
        f"a recording directory holds regular .npz files: {inputs}" if kind.startswith("directory")
        else f"point it at a .npz file or a recording directory: {inputs}"), line
    line = one_error(cli("compare", str(src), str(src), "--inputs", str(inputs), timeout=60))
    assert SPECIAL[kind] in line


@pytest.mark.process
@pytest.mark.parametrize("cache", ["true", "false"])
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory with a fifo"])
def test_special_inputs_fail_the_build_in_one_line(tmp_path: Path, kind: str, cache: str) -> None:
    root = tmp_path / "toymodel"
    write_project(root, f'inputs = "{special_files(tmp_path)[kind]}"\ncache = {cache}\n')
    save(mlp(), root / MODEL)
    err = hook_build_error(root, tmp_path)
    assert f"Field `tool.hatch.build.hooks.shrinkray.inputs` {SPECIAL[kind]}" in err, err


# ---------------------------------------------------------------------------------------------
# Tracebacks that are now one line: sample files, generated inputs, plans, check's report files.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def npy(header: bytes) -> bytes:
    padded = header + b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded


@pytest.mark.process
@pytest.mark.parametrize(("header", "why"), [
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 256), ", "EOF in multi-line statement"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 256), 'x': '''", "EOF in multi-line string"),
])
def test_a_malformed_npy_header_is_one_line(tmp_path: Path, header: bytes, why: str) -> None:

    src = save(mlp(), tmp_path / "m.onnx")
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as zf:
        zf.writestr("x.npy", npy(header))
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--inputs", str(tmp_path / "bad.npz")))
    assert line == (f"error: {tmp_path / 'bad.npz'}: array 'x' is corrupt: its .npy header cannot be parsed ({why}) "
                    "(write it with numpy.savez(path, input_name=array, ...) or record it with `hatch-shrinkray "
                    "record`)"), line
    assert files_under(tmp_path / "out") == []


@pytest.mark.process
def test_a_wrong_shape_calibration_sample_is_one_line(tmp_path: Path) -> None:
    import hashlib

    import numpy as np

    from hatch_shrinkray.recording.format import Recording
    from hatch_shrinkray.recording.storage import write_recording

    src = save(mlp(), tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((2, 256)).astype(np.float32)} for _ in range(8)]
    samples[0] = {"x": rng.standard_normal((2, 128)).astype(np.float32)}  # sample 0 calibrates (every 4th is held out)
    (tmp_path / "rec").mkdir()
    recording = write_recording(tmp_path / "rec", Recording(hashlib.sha256(src.read_bytes()).hexdigest(), "m.onnx",
                                                            ("x",), tuple(samples), 8, tuple(range(8))))
    for method in ("int8", "auto"):
        line = one_error(cli("shrink", str(src), "-o", str(tmp_path / method), "--method", method,
                             "--inputs", str(tmp_path / "rec")))
        assert line.startswith(f"error: {os.path.relpath(recording)}: array 'x' (sample 0) has shape (2, 128) but "
                               "the input takes (batch, 256)") or line.startswith(
            f"error: {recording}: array 'x' (sample 0) has shape (2, 128)"), line


@pytest.mark.process
@pytest.mark.parametrize(("flags", "names"), [
    (["--samples", "100000000000"], "lower `--samples`"),
    (["--default-dim", "100000000"], "lower `--samples` or `--default-dim`"),
    (["--dims", "batch=100000000"], "lower `--samples` or `--dims batch=N`"),
])
def test_generated_inputs_too_large_to_allocate_are_one_line(tmp_path: Path, flags: list[str], names: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    start = time.monotonic()
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), *flags, timeout=120))
    assert time.monotonic() - start < 60
    assert line.startswith(f"error: {src}: generated inputs would take "), line
    assert f"over the 1 GB they may take; {names} (or verify on real inputs" in line, line


@pytest.mark.process
def test_generated_inputs_too_large_name_the_toml_key_that_set_them(tmp_path: Path) -> None:
    override = ('[[tool.hatch.build.hooks.shrinkray.overrides]]\nmodels = ["src/toymodel/models/a.onnx"]\n'
                "dims = { batch = 100000000 }\n")
    root = write_project(tmp_path / "toymodel", f"samples = 4\n\n{override}")
    save(mlp(), root / MODEL)
    err = hook_build_error(root, tmp_path)
    line = next(ln for ln in err.splitlines() if "generated inputs would take" in ln)
    assert line.startswith(f"shrinkray: {MODEL}: generated inputs would take 409.6 GB (4 samples of x 100000000x256)")
    assert ("lower `tool.hatch.build.hooks.shrinkray.samples` or "
            "`tool.hatch.build.hooks.shrinkray.overrides[0].dims.batch`") in line, line


@pytest.mark.process
def test_an_int_range_no_input_value_fits_is_one_line(tmp_path: Path) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
                               helper.make_node("MatMul", ["f", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, ["b", 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 256])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "u8.onnx"))
    line = one_error(cli("shrink", str(tmp_path / "u8.onnx"), "-o", str(tmp_path / "out"), "--int-range", "300", "400"))
    assert line == (f"error: {tmp_path / 'u8.onnx'}: `--int-range` [300, 400) holds no value of input 'x', which is "
                    "uint8 (give a range the input's type can hold)"), line


# ---------------------------------------------------------------------------------------------
# Values that mean nothing are refused in one line naming the flag or key.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def reshaping_model() -> object:
    """x[batch, seq] -> Reshape [-1, 224] -> MatMul: runs only when seq is a multiple of 224, so
    the default seq (32) fails and a retry is needed."""
    import numpy as np
    from onnx import helper, numpy_helper

    from onnx_builders import init, model, vi, weight

    return model([helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["y"])],
                 [vi("x", ["batch", "seq"])], [vi("y", [None, 256])],
                 [numpy_helper.from_array(np.array([-1, 224], np.int64), "shape"), init("W", weight((224, 256), 1))])


@pytest.mark.process
def test_a_symbolic_batch_axis_keeps_1_on_a_retry_and_the_line_names_the_sizes(tmp_path: Path) -> None:
    src = save(reshaping_model(), tmp_path / "m.onnx")  # type: ignore[arg-type]
    proc = subprocess.run([str(CONSOLE_SCRIPT), "-v", "shrink", str(src), "-o", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert ": passes a smoke check on 8 generated samples" in proc.stdout, proc.stdout
    assert "on 8 generated samples (batch=1, seq=224)" in proc.stdout, proc.stdout  # -v: the sizes used
    assert "generated (seed 0; x 1x224)" in proc.stdout, proc.stdout
    compared = subprocess.run([str(CONSOLE_SCRIPT), "compare", str(src), str(tmp_path / "out" / "m.onnx"),
                               "--default-dim", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              check=False)
    assert compared.returncode == 0, compared.stderr
    assert "on 8 generated samples (batch=2, seq=224)" in compared.stdout, compared.stdout


# ---------------------------------------------------------------------------------------------
# Every file a rewrite leaves out gets a line: the original's external data, in the hook and in
# `hatch-shrinkray wheel`.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.process
def test_a_symbolic_name_gets_one_size_in_every_input(tmp_path: Path) -> None:
    """``batch`` leads ``a`` and is the second axis of ``b``: both get 1 (before, ``b`` got 32, the
    Concat failed, and the retry gave the batch 224)."""
    from onnx import helper

    from onnx_builders import init, model, vi, weight

    m = model([helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]),
               helper.make_node("Concat", ["a", "bt"], ["c"], axis=1), helper.make_node("MatMul", ["c", "W"], ["y"])],
              [vi("a", ["batch", 16]), vi("b", [16, "batch"])], [vi("y", ["batch", 512])],
              [init("W", weight((32, 512), 1))])
    src = save(m, tmp_path / "m.onnx")
    proc = subprocess.run([str(CONSOLE_SCRIPT), "-v", "shrink", str(src), "-o", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "on 8 generated samples (batch=1)" in proc.stdout, proc.stdout
    assert "generated (seed 0; a 1x16; b 16x1)" in proc.stdout, proc.stdout


@pytest.mark.process
def test_an_index_past_a_table_is_said_with_the_range_that_fixes_it(tmp_path: Path) -> None:
    """Where the graph does not tell (ids offset by arithmetic), onnxruntime's refusal is named in one
    line with the int-range that keeps inside the table, in the words of the interface."""
    source = char_embedding(tmp_path / "add.onnx", through="Add")
    result = shrink(source, tmp_path / "out.onnx")
    assert result.unverified and result.kept_original is not None
    assert "past a table of 49 rows; `int-range = [0, 49]` keeps inside it" in result.kept_original, \
        result.kept_original
    proc = cli("shrink", str(source), "-o", str(tmp_path / "cli"))
    assert proc.returncode == 0 and "`--int-range 0 49` keeps inside it" in proc.stdout, proc.stdout + proc.stderr
    again = cli("shrink", str(source), "-o", str(tmp_path / "fixed"), "--int-range", "0", "48")
    assert again.returncode == 0 and "original kept" not in again.stdout, again.stdout
