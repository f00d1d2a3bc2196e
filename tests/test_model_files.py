"""The bad-input matrix, row by row, through the API, the CLI and the build hook.

Every row must end in one line naming the file, the cause and what to do; a failure for the API
(a ShrinkrayError), a non-zero exit without a traceback for the CLI, a failed build for the hook;
and nothing partial in the output directory. Rows that are not failures (an already-quantized
input, nothing above the threshold) must say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import (
    CONSOLE_SCRIPT,
    MODEL,
    MODELS_DIR,
    blocks_reads,
    build,
    cli,
    dac_dropped,
    files_under,
    one_error,
    tree_digest,
    write_project,
)
from onnx import helper

from hatch_shrinkray import AlreadyQuantizedError, ShrinkOptions, ShrinkrayError, shrink

from onnx_builders import init, mlp, model, vi, weight

# ---------------------------------------------------------------------------------------------
# The rows. Each maker writes its bad input into a directory and returns the model path.


def _good_bytes() -> bytes:
    return mlp().SerializeToString()


def make_missing(d: Path) -> Path:
    return d / "a.onnx"


def make_directory(d: Path) -> Path:
    (d / "a.onnx").mkdir()
    return d / "a.onnx"


def make_empty(d: Path) -> Path:
    (d / "a.onnx").write_bytes(b"")
    return d / "a.onnx"


def make_truncated(d: Path) -> Path:
    data = _good_bytes()
    (d / "a.onnx").write_bytes(data[: len(data) // 2])
    return d / "a.onnx"


def make_corrupted(d: Path) -> Path:
    data = bytearray(_good_bytes())
    for i in range(0, 280, 7):  # the graph's header and first tensor's framing
        data[i] ^= 0xFF
    (d / "a.onnx").write_bytes(bytes(data))
    return d / "a.onnx"


def make_not_onnx(d: Path) -> Path:
    """What a failed download often leaves behind."""
    (d / "a.onnx").write_text("<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n")
    return d / "a.onnx"


def make_checker_rejects(d: Path) -> Path:
    """Parses fine, but a node reads a tensor nothing produces."""
    m = mlp()
    m.graph.node[1].input[0] = "nowhere"
    (d / "a.onnx").write_bytes(m.SerializeToString())
    return d / "a.onnx"


def make_custom_op(d: Path) -> Path:
    """Valid ONNX (custom domains are allowed) that onnxruntime's CPU provider cannot run."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["h"]),
         helper.make_node("FancyOp", ["h"], ["y"], domain="com.example")],
        "g", [vi("x", ["b", 256])], [vi("y", ["b", 256])], [init("W1", weight((256, 256), 1))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                          ir_version=9)
    onnx.checker.check_model(m, full_check=True)
    (d / "a.onnx").write_bytes(m.SerializeToString())
    return d / "a.onnx"


def _external(d: Path, location: str) -> Path:
    """An MLP whose weights live in ``a.onnx.data``, then re-pointed at ``location``."""
    onnx.save(mlp(), str(d / "a.onnx"), save_as_external_data=True, location="a.onnx.data", size_threshold=1024)
    m = onnx.load(str(d / "a.onnx"), load_external_data=False)
    for t in m.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    (d / "a.onnx").write_bytes(m.SerializeToString())
    return d / "a.onnx"


def make_missing_external(d: Path) -> Path:
    path = _external(d, "a.onnx.data")
    (d / "a.onnx.data").unlink()
    return path


def _external_moved(d: Path, location: str, data: Path) -> Path:
    """A model in ``d/sub`` whose data file, written beside it, is moved to ``data``; its ``location``
    says ``location``."""
    sub = d / "sub"
    sub.mkdir()
    path = _external(sub, location)
    os.replace(sub / "a.onnx.data", data)
    return path


def make_external_dotdot(d: Path) -> Path:
    """The data file exists (one level up), but the model may not reach outside its directory."""
    return _external_moved(d, "../a.onnx.data", d / "a.onnx.data")


def make_external_absolute(d: Path) -> Path:
    data = (d / "elsewhere.data").resolve()
    return _external_moved(d, str(data), data)


def make_external_symlink(d: Path) -> Path:
    """``location`` is a plain name, but the file there is a symlink to a file outside the directory."""
    path = _external_moved(d, "a.onnx.data", d / "outside.data")
    (path.parent / "a.onnx.data").symlink_to((d / "outside.data").resolve())
    return path


def quantized_model() -> onnx.ModelProto:
    return model(
        [helper.make_node("DequantizeLinear", ["Wq", "s", "z"], ["W"]), helper.make_node("MatMul", ["x", "W"], ["y"])],
        [vi("x", [1, 256])], [vi("y", [1, 256])],
        [init("Wq", (weight((256, 256)) * 2000).clip(-127, 127).astype(np.int8)),
         init("s", np.array(0.0005, dtype=np.float32)), init("z", np.array(0, dtype=np.int8))])


def make_already_quantized(d: Path) -> Path:
    (d / "a.onnx").write_bytes(quantized_model().SerializeToString())
    return d / "a.onnx"


def make_nothing_to_shrink(d: Path) -> Path:
    """Every weight is below min-elements (16 x 16)."""
    (d / "a.onnx").write_bytes(mlp(16, 16).SerializeToString())
    return d / "a.onnx"


def make_name_not_utf8(d: Path) -> Path:
    """A weight name that is not UTF-8 (protobuf strings must be): ``W1`` becomes ``W\\xff``."""
    (d / "a.onnx").write_bytes(_good_bytes().replace(b"W1", b"W\xff"))
    return d / "a.onnx"


def make_external_location_too_long(d: Path) -> Path:
    """A 5000-character location: longer than any file name the OS accepts."""
    return _external(d, "a" * 5000)


def make_external_data_too_short(d: Path) -> Path:
    """The data file was cut off (an interrupted copy): it ends inside the first tensor."""
    path = _external(d, "a.onnx.data")
    data = (d / "a.onnx.data").read_bytes()
    (d / "a.onnx.data").write_bytes(data[:1000])
    return path


def make_sparse_initializer_external(d: Path) -> Path:
    """A sparse initializer whose values live in a data file: onnx never loads those, so the
    output would silently lose them."""
    m = _mlp_plus_sparse(nested=False)
    values = m.graph.sparse_initializer[0].values
    (d / "a.onnx.data").write_bytes(values.SerializeToString())
    values.ClearField("float_data")
    values.data_location = onnx.TensorProto.EXTERNAL
    values.external_data.add(key="location", value="a.onnx.data")
    (d / "a.onnx").write_bytes(m.SerializeToString())
    return d / "a.onnx"


def make_unreadable(d: Path) -> Path:
    (d / "a.onnx").write_bytes(_good_bytes())
    (d / "a.onnx").chmod(0)
    return d / "a.onnx"


@dataclass(frozen=True)
class Row:
    make: Callable[[Path], Path]
    cause: str
    """A fragment of the message that states the cause."""


FAILING: dict[str, Row] = {
    "missing": Row(make_missing, "no such file"),
    "directory": Row(make_directory, "is a directory"),
    "empty": Row(make_empty, "is empty (0 bytes)"),
    "truncated": Row(make_truncated, "is not a valid ONNX model"),
    "corrupted": Row(make_corrupted, "is not a valid ONNX model"),
    "not-onnx": Row(make_not_onnx, "is not a valid ONNX model"),
    "checker-rejects": Row(make_checker_rejects, "onnx.checker rejects the model"),
    "custom-op": Row(make_custom_op, "onnxruntime cannot load it"),
    "missing-external-data": Row(make_missing_external, "external data file 'a.onnx.data' is missing"),
    "external-dotdot": Row(make_external_dotdot, "escapes the model's directory; refused"),
    "external-absolute": Row(make_external_absolute, "is an absolute path; refused"),
    "external-symlink": Row(make_external_symlink, "escapes the model's directory; refused"),
    "already-quantized": Row(make_already_quantized, "already quantized"),
    "unreadable": Row(make_unreadable, "cannot read: Permission denied"),
    "name-not-utf8": Row(make_name_not_utf8, "is not UTF-8 text"),
    "external-location-too-long": Row(make_external_location_too_long, "File name too long"),
    "external-data-too-short": Row(make_external_data_too_short,
                                   "external data file 'a.onnx.data' is too short for tensor 'W1'"),
    "sparse-initializer-external": Row(make_sparse_initializer_external,
                                       "sparse initializer 'B' keeps its data in an external file"),
}
MAX_MESSAGE = 400
"""No message may echo a hostile input at length (a 5000-character location, a 100 kB name)."""


def _readable_guard(row: str, tmp_path: Path) -> None:
    if row == "unreadable" and not blocks_reads(tmp_path):
        pytest.skip("chmod 000 does not block reads here (root with CAP_DAC_OVERRIDE that cannot be dropped)")


def _one_line(text: str) -> None:
    assert "\n" not in text.strip(), text


# ---------------------------------------------------------------------------------------------
# API


@pytest.mark.parametrize("row", FAILING)
def test_api(row: str, tmp_path: Path) -> None:
    _readable_guard(row, tmp_path)
    src_dir = tmp_path / "in"
    src_dir.mkdir()
    path = FAILING[row].make(src_dir)
    before = tree_digest(src_dir)
    out = tmp_path / "out"
    with dac_dropped(), pytest.raises(ShrinkrayError) as info:
        shrink(path, out / "a.onnx")
    message = str(info.value)
    _one_line(message)
    assert message.startswith(f"{path}: ")
    assert FAILING[row].cause in message
    assert len(message) < len(str(path)) + MAX_MESSAGE, message
    assert info.value.path == str(path)
    assert files_under(out) == []
    assert tree_digest(src_dir) == before
    if row == "already-quantized":
        assert isinstance(info.value, AlreadyQuantizedError)


@pytest.mark.parametrize("row", list(FAILING))
def test_api_message_says_what_to_do(row: str, tmp_path: Path) -> None:
    _readable_guard(row, tmp_path)
    path = FAILING[row].make(tmp_path)
    with dac_dropped(), pytest.raises(ShrinkrayError) as info:
        shrink(path, tmp_path / "out" / "a.onnx")
    assert info.value.hint, f"no hint in: {info.value}"
    assert str(info.value).endswith(f"({info.value.hint})")


def test_api_nothing_to_shrink_is_a_reported_no_op(tmp_path: Path) -> None:
    path = make_nothing_to_shrink(tmp_path)
    result = shrink(path, tmp_path / "out" / "a.onnx")
    assert result.encoded == ()
    assert result.verification is not None and result.verification.passed
    assert (tmp_path / "out" / "a.onnx").read_bytes() == path.read_bytes()
    from hatch_shrinkray.report import shrink_report

    assert "nothing to shrink: no float tensor reached min-elements (16384)" in shrink_report(result)


def test_api_output_under_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "a.onnx"
    path.write_bytes(_good_bytes())
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(ShrinkrayError) as info:
        shrink(path, tmp_path / "afile" / "out" / "a.onnx")
    dest = tmp_path / "afile" / "out" / "a.onnx"
    _one_line(str(info.value))
    assert str(info.value).startswith(f"{dest}: cannot write to {dest.parent}: Not a directory")
    assert info.value.hint


def test_api_output_in_a_read_only_directory(tmp_path: Path) -> None:
    path = tmp_path / "a.onnx"
    path.write_bytes(_good_bytes())
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    if not blocks_reads(tmp_path):
        pytest.skip("permission bits do not apply here (root with CAP_DAC_OVERRIDE that cannot be dropped)")
    try:
        with dac_dropped(), pytest.raises(ShrinkrayError) as info:
            shrink(path, out / "a.onnx", ShrinkOptions())
        message = str(info.value)
        _one_line(message)
        assert "Permission denied" in message and info.value.hint
        assert files_under(out) == []
        assert message.startswith(f"{out / 'a.onnx'}: ")
    finally:
        out.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# CLI: one error line naming the file, the cause and (in parentheses) what to do.


def _cli_error_line(stderr: str, path: Path, cause: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, stderr
    assert [ln for ln in lines if ln not in errors] == ["1 of 1 models failed"], stderr
    line = errors[0]
    assert line.startswith(f"error: {path}: "), line
    assert cause in line
    return line


@pytest.mark.parametrize("row", FAILING)
def test_cli(row: str, tmp_path: Path) -> None:
    _readable_guard(row, tmp_path)
    src_dir = tmp_path / "in"
    src_dir.mkdir()
    path = FAILING[row].make(src_dir)
    before = tree_digest(src_dir)
    out = tmp_path / "out"
    proc = cli("shrink", str(path), "-o", str(out), drop_dac=True)
    assert proc.returncode == 1
    line = _cli_error_line(proc.stderr, path, FAILING[row].cause)
    if row != "directory":  # see test_api_message_says_what_to_do
        assert line.endswith(")"), line
    assert len(line) < len(str(path)) + MAX_MESSAGE, line
    assert files_under(out) == []
    assert tree_digest(src_dir) == before


READ_ROWS = [r for r in FAILING if r not in ("checker-rejects", "custom-op", "already-quantized")]
"""Rows whose cause shows when the file is read, so `info` and `compare` must say it as `shrink` does."""


@pytest.mark.parametrize("command", ["info", "compare"])
@pytest.mark.parametrize("row", READ_ROWS)
def test_cli_info_and_compare(row: str, command: str, tmp_path: Path) -> None:
    _readable_guard(row, tmp_path)
    path = FAILING[row].make(tmp_path)
    proc = cli(command, str(path), *([str(path)] if command == "compare" else []), drop_dac=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {path}: ") and FAILING[row].cause in proc.stderr, proc.stderr


def test_cli_verbose_adds_the_traceback(tmp_path: Path) -> None:
    path = make_corrupted(tmp_path)
    proc = cli("-v", "shrink", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and f"error: {path}: is not a valid ONNX model" in proc.stderr


def test_cli_nothing_to_shrink_is_a_reported_no_op(tmp_path: Path) -> None:
    path = make_nothing_to_shrink(tmp_path)
    proc = cli("shrink", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "nothing to shrink: no float tensor reached min-elements (16384); the output equals the input" \
        in proc.stdout
    assert ": original written (1.82 KB): nothing to shrink: " in proc.stdout.splitlines()[0], proc.stdout


def test_cli_output_under_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "a.onnx"
    path.write_bytes(_good_bytes())
    (tmp_path / "afile").write_text("not a directory")
    out = tmp_path / "afile" / "sub"
    proc = cli("shrink", str(path), "-o", str(out))
    assert proc.returncode == 1
    line = _cli_error_line(proc.stderr, out / "a.onnx", f"cannot write to {out}: Not a directory")
    assert line.endswith(")")


def test_cli_output_in_a_read_only_directory(tmp_path: Path) -> None:
    path = tmp_path / "a.onnx"
    path.write_bytes(_good_bytes())
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    if not blocks_reads(tmp_path):
        pytest.skip("permission bits do not apply here (root with CAP_DAC_OVERRIDE that cannot be dropped)")
    try:
        proc = cli("shrink", str(path), "-o", str(out), drop_dac=True)
        assert proc.returncode == 1
        assert files_under(out) == []
        line = _cli_error_line(proc.stderr, out / "a.onnx", f"cannot write to {out}: Permission denied")
        assert ".shrinkray-tmp" not in line and line.endswith(")"), line
    finally:
        out.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# Hook: driven through hatchling's real WheelBuilder in this process; user errors abort the build
# (SystemExit 1) with "shrinkray: <message>" on stderr.


HOOK_CAUSES = {**{k: r.cause for k, r in FAILING.items()},
               # the models glob only matches files, so these two are configuration errors
               "missing": "matches no file", "directory": "matches no file"}
HOOK_FAILING = [r for r in FAILING if r != "already-quantized"]


@pytest.mark.parametrize("row", HOOK_FAILING)
def test_hook(row: str, tmp_path: Path, isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _readable_guard(row, tmp_path)
    root = write_project(tmp_path / "toymodel")
    path = FAILING[row].make(root / MODELS_DIR)
    before = tree_digest(root)
    dist = tmp_path / "dist"
    with dac_dropped(), pytest.raises(SystemExit) as info:
        build(root, out=dist)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert HOOK_CAUSES[row] in err
    if row not in ("missing", "directory"):
        line = next(ln for ln in err.splitlines() if HOOK_CAUSES[row] in ln)
        rel = path.relative_to(root).as_posix()
        assert line.startswith("shrinkray: ") and f"{rel}: " in line and line.endswith(")"), line
    assert files_under(dist) == []
    assert tree_digest(root) == before
    assert files_under(isolated) == []


def test_hook_already_quantized_ships_unchanged_with_a_warning(tmp_path: Path, isolated: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel")
    path = make_already_quantized(root / MODELS_DIR)
    wheel = build(root, out=tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("toymodel/models/a.onnx") == path.read_bytes()
    err = capsys.readouterr().err
    assert (f"shrinkray: {MODEL}: shipped its original (65.69 KB): already quantized: it contains DequantizeLinear "
            "nodes" in err.splitlines()), err


def test_hook_nothing_to_shrink_is_reported(tmp_path: Path, isolated: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel")
    path = make_nothing_to_shrink(root / MODELS_DIR)
    wheel = build(root, out=tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("toymodel/models/a.onnx") == path.read_bytes()
    err = capsys.readouterr().err
    assert "nothing to shrink" in err and "min-elements" in err
    assert "1 shrunk" not in err


def test_hook_unwritable_work_directory(tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel")
    (root / MODEL).write_bytes(_good_bytes())
    (tmp_path / "afile").write_text("not a directory")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "afile" / "tmp"))
    with pytest.raises(SystemExit) as info:
        build(root, out=tmp_path / "dist")
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "shrinkray: " in err and "TMPDIR" in err
    assert files_under(tmp_path / "dist") == []


# ---------------------------------------------------------------------------------------------
# Message quality across rows


def test_checker_message_names_the_node(tmp_path: Path) -> None:
    path = make_checker_rejects(tmp_path)
    with pytest.raises(ShrinkrayError) as info:
        shrink(path, tmp_path / "out" / "a.onnx")
    assert "of node:  (" not in str(info.value), str(info.value)


def test_hook_names_every_model_by_its_project_relative_path(tmp_path: Path, isolated: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    absolute = {}
    for row in HOOK_FAILING:
        if row in ("missing", "directory", "unreadable"):
            continue
        root = write_project(tmp_path / row / "toymodel")
        path = FAILING[row].make(root / MODELS_DIR)
        with pytest.raises(SystemExit):
            build(root, out=tmp_path / row / "dist")
        err = capsys.readouterr().err
        line = next(ln for ln in err.splitlines() if HOOK_CAUSES[row] in ln)
        if not line.startswith(f"shrinkray: {path.relative_to(root).as_posix()}: "):
            absolute[row] = line
    assert not absolute, absolute


# ---------------------------------------------------------------------------------------------
# Hook, end to end: `python -m hatchling build` as a user (or `hatch build`) runs it.


@pytest.mark.parametrize("row", ["corrupted", "external-dotdot"])
def test_hook_in_a_real_hatchling_build(row: str, tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel")
    FAILING[row].make(root / MODELS_DIR)
    before = tree_digest(root)
    dist = tmp_path / "dist"
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN", "HATCH_VERBOSE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dist)], cwd=root,
                          env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if FAILING[row].cause in ln]
    assert len(errors) == 1 and errors[0].startswith("shrinkray: ") and errors[0].endswith(")"), proc.stderr
    assert files_under(dist) == []
    assert tree_digest(root) == before


# ---------------------------------------------------------------------------------------------
# Hostile but valid models: each must shrink, verify and come out smaller, through all three doors.


def _mlp_plus_sparse(nested: bool) -> onnx.ModelProto:
    """mlp() whose logits get a sparse bias added: in the main graph, or inside an If branch."""
    m = mlp()
    m.graph.node[-1].output[0] = "logits"
    values = helper.make_tensor("B.values", onnx.TensorProto.FLOAT, [2], [1.0, 2.0])
    indices = helper.make_tensor("B.indices", onnx.TensorProto.INT64, [2], [0, 5])
    values.name = "B"
    sparse = helper.make_sparse_tensor(values, indices, [10])
    if not nested:
        m.graph.sparse_initializer.append(sparse)
        m.graph.node.append(helper.make_node("Add", ["logits", "B"], ["y"]))
        return m
    then = helper.make_graph([helper.make_node("Add", ["logits", "B"], ["t"])], "then", [],
                             [vi("t", ["batch", 10])], sparse_initializer=[sparse])
    other = helper.make_graph([helper.make_node("Identity", ["logits"], ["e"])], "else", [],
                              [vi("e", ["batch", 10])])
    m.graph.node.append(helper.make_node("If", ["use_bias"], ["y"], then_branch=then, else_branch=other))
    m.graph.input.append(vi("use_bias", [], onnx.TensorProto.BOOL))
    return m


def make_sparse_initializer(d: Path) -> Path:
    onnx.save(_mlp_plus_sparse(nested=False), str(d / "a.onnx"))
    return d / "a.onnx"


def make_sparse_initializer_in_subgraph(d: Path) -> Path:
    onnx.save(_mlp_plus_sparse(nested=True), str(d / "a.onnx"))
    return d / "a.onnx"


def make_long_weight_name(d: Path) -> Path:
    """A 100 kB weight name: every name derived from it used to repeat it (228% of the input)."""
    m = mlp()
    long = "W" * 100_000
    m.graph.initializer[0].name = long
    m.graph.node[0].input[1] = long
    onnx.save(m, str(d / "a.onnx"))
    return d / "a.onnx"


def _named_like_onnxruntime(names: list[str]) -> onnx.ModelProto:
    m = mlp()
    for node, name in zip(m.graph.node, names, strict=True):
        node.name = name
    return m


def make_node_named_like_a_quantizer_node(d: Path) -> Path:
    """The Relu is called what quantize_dynamic names the DynamicQuantizeLinear of input ``x``;
    onnxruntime's quantizer then mistakes it for its own node."""
    onnx.save(_named_like_onnxruntime(["fc1", "x_QuantizeLinear", "fc2"]), str(d / "a.onnx"))
    return d / "a.onnx"


def make_node_named_like_a_generated_node(d: Path) -> Path:
    """The Relu is called what quantize_dynamic names the scale product it adds for ``fc2``: the
    output had two nodes of that name, which onnxruntime refuses."""
    onnx.save(_named_like_onnxruntime(["fc1", "fc2_quant_scales_mul", "fc2"]), str(d / "a.onnx"))
    return d / "a.onnx"


def make_tensor_named_like_a_generated_tensor(d: Path) -> Path:
    """The hidden activation is called what quantize_dynamic names the quantized input ``x``: the
    output defined that tensor twice (not SSA)."""
    m = mlp()
    m.graph.node[0].output[0] = m.graph.node[1].input[0] = "x_quantized"
    onnx.save(m, str(d / "a.onnx"))
    return d / "a.onnx"


@dataclass(frozen=True)
class Valid:
    make: Callable[[Path], Path]
    method: str = "int8"


SUCCEEDING: dict[str, Valid] = {
    "sparse-initializer": Valid(make_sparse_initializer),
    "sparse-initializer-in-subgraph": Valid(make_sparse_initializer_in_subgraph),
    "long-weight-name": Valid(make_long_weight_name),
    "node-named-like-a-quantizer-node": Valid(make_node_named_like_a_quantizer_node, "dynamic"),
    "node-named-like-a-generated-node": Valid(make_node_named_like_a_generated_node, "dynamic"),
    "tensor-named-like-a-generated-tensor": Valid(make_tensor_named_like_a_generated_tensor, "dynamic"),
}


@pytest.mark.parametrize("row", SUCCEEDING)
def test_api_valid(row: str, tmp_path: Path) -> None:
    path = SUCCEEDING[row].make(tmp_path)
    result = shrink(path, tmp_path / "out" / "a.onnx", ShrinkOptions(method=SUCCEEDING[row].method))
    assert result.verification is not None and result.verification.passed
    assert result.encoded and result.shrunk_size < 0.7 * result.original_size, result.ratio
    assert (tmp_path / "out" / "a.onnx").stat().st_size == result.shrunk_size


@pytest.mark.parametrize("row", SUCCEEDING)
def test_cli_valid(row: str, tmp_path: Path) -> None:
    path = SUCCEEDING[row].make(tmp_path)
    proc = cli("shrink", str(path), "-o", str(tmp_path / "out"), "--method", SUCCEEDING[row].method)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith(f"{path}: shrunk, "), proc.stdout
    assert ": passes a smoke check on 8 generated samples" in proc.stdout, proc.stdout


@pytest.mark.parametrize("row", SUCCEEDING)
def test_hook_valid(row: str, tmp_path: Path, isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", f'method = "{SUCCEEDING[row].method}"\n')
    path = SUCCEEDING[row].make(root / MODELS_DIR)
    wheel = build(root, out=tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        assert len(zf.read("toymodel/models/a.onnx")) < 0.7 * path.stat().st_size
    err = capsys.readouterr().err
    assert "Traceback" not in err and "total 1 model: 1 shipped shrunk; " in err, err


# ---------------------------------------------------------------------------------------------
# Names that are not UTF-8, wherever they sit: one line naming the field, from every door.


def _not_utf8(model_proto: onnx.ModelProto, marker: str) -> bytes:
    data = model_proto.SerializeToString()
    assert data.count(marker.encode()) >= 1, marker
    return data.replace(marker.encode(), marker[:-1].encode() + b"\xff")


def _with_subgraph() -> onnx.ModelProto:
    """mlp() whose second weight is a Constant inside an If branch, with a value_info and metadata."""
    m = mlp()
    then = helper.make_graph([helper.make_node("Constant", [], ["Wsub"], name="constSUB",
                                               value=helper.make_tensor("valueTNSR", onnx.TensorProto.FLOAT,
                                                                        [256, 10], weight((256, 10), 3).ravel())),
                              helper.make_node("MatMul", ["r", "Wsub"], ["t"])],
                             "then", [], [vi("t", ["batch", 10])])
    other = helper.make_graph([helper.make_node("MatMul", ["r", "W2"], ["e"])], "else", [], [vi("e", ["batch", 10])])
    m.graph.node[-1].CopyFrom(helper.make_node("If", ["flag"], ["y"], name="branchNODE", then_branch=then,
                                               else_branch=other))
    m.graph.input.append(vi("flag", [], onnx.TensorProto.BOOL))
    m.graph.value_info.append(vi("rVALUE", ["batch", 256]))
    m.graph.doc_string = "docSTRING"
    helper.set_model_props(m, {"metaKEY": "value"})
    return m


def _with_spare_initializer() -> onnx.ModelProto:
    m = mlp()
    m.graph.initializer.append(init("spareINIT", weight((4, 4))))
    return m


NOT_UTF8 = {
    # marker in the serialized model -> the field path the message must name
    "weight-name": (mlp, "W1", "graph.node[0].input[1]"),
    "initializer-name": (_with_spare_initializer, "spareINIT", "graph.initializer[2].name"),
    "node-input": (mlp, "x", "graph.node[0].input[0]"),
    "constant-value-name-in-subgraph": (_with_subgraph, "valueTNSR", "graph.node[2].then_branch.node[0].value.name"),
    "node-name": (_with_subgraph, "branchNODE", "graph.node[2].name"),
    "node-name-in-subgraph": (_with_subgraph, "constSUB", "graph.node[2].then_branch.node[0].name"),
    "value-info": (_with_subgraph, "rVALUE", "graph.value_info[0].name"),
    "doc-string": (_with_subgraph, "docSTRING", "graph.doc_string"),
    "metadata": (_with_subgraph, "metaKEY", "metadata_props[0].key"),
}


@pytest.mark.parametrize("field", NOT_UTF8)
def test_api_names_not_utf8(field: str, tmp_path: Path) -> None:
    build_model, marker, where = NOT_UTF8[field]
    path = tmp_path / "a.onnx"
    path.write_bytes(_not_utf8(build_model(), marker))
    with pytest.raises(ShrinkrayError) as info:
        shrink(path, tmp_path / "out" / "a.onnx")
    message = str(info.value)
    _one_line(message)
    assert message.startswith(f"{path}: is not a valid ONNX model: ") and "is not UTF-8 text" in message, message
    assert f": {where} is not UTF-8 text (" in message, message
    assert files_under(tmp_path / "out") == []


# ---------------------------------------------------------------------------------------------
# The JSON report: atomic, and a full disk is one line, not a traceback and an empty file.


def test_cli_json_onto_dev_full_is_one_line(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is Linux-only")
    path = tmp_path / "a.onnx"
    path.write_bytes(_good_bytes())
    proc = cli("shrink", str(path), "-o", str(tmp_path / "out"), "--json", "/dev/full")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: /dev/full: cannot write the report: No space left on device (free some space or choose "
        "another --json path)"], proc.stderr
    assert (tmp_path / "out" / "a.onnx").is_file()  # the models themselves were written


def _can_mount_tmpfs(directory: Path) -> bool:
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs '{directory}'"], capture_output=True, check=False)
    return probe.returncode == 0


def test_cli_json_onto_a_full_filesystem_keeps_the_old_report(tmp_path: Path) -> None:
    """A real ENOSPC: a 64 kB tmpfs (in a private user + mount namespace) holding last run's report
    and filler that takes the rest; the new report (four models, ~9 kB) does not fit even in the
    space the old one frees."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("unshare") is None or not _can_mount_tmpfs(disk):
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    models = []
    (tmp_path / "in").mkdir()
    for name in "abcd":
        models.append(tmp_path / "in" / f"{name}.onnx")
        models[-1].write_bytes(_good_bytes())
    outs = " ".join(f"'{m}'" for m in models)
    script = (f"mount -t tmpfs -o size=64k tmpfs '{disk}' && "
              f"printf 'last run\\n' > '{disk}/report.json' && "
              f"(head -c 61440 /dev/zero > '{disk}/filler' || true) && "
              f"'{CONSOLE_SCRIPT}' shrink {outs} -o '{tmp_path}/out' --json '{disk}/report.json' "
              f"> '{tmp_path}/stdout' 2> '{tmp_path}/stderr'; echo $? > '{tmp_path}/rc'; "
              f"ls -A '{disk}' > '{tmp_path}/listing'; cp '{disk}/report.json' '{tmp_path}/report.json'")
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], check=True, timeout=300)
    stderr = (tmp_path / "stderr").read_text()
    assert "Traceback" not in stderr, stderr
    assert stderr.splitlines() == [f"error: {disk}/report.json: cannot write the report: No space left on device "
                                   "(free some space or choose another --json path)"], stderr
    assert (tmp_path / "rc").read_text().strip() == "1", stderr
    assert (tmp_path / "report.json").read_text() == "last run\n"
    assert (tmp_path / "listing").read_text().split() == ["filler", "report.json"]


@pytest.mark.parametrize("nested", [False, True], ids=["top-level", "in-subgraph"])
def test_compare_accepts_a_sparse_model_at_its_originals_check(tmp_path: Path, nested: bool) -> None:
    """A model with a sparse initializer fails onnx's full check (shape inference does not see
    sparse initializers), as its original does: ``compare`` holds the shrunk model to the check
    the original passes, as ``shrink`` does, and says which one ran."""
    src = (make_sparse_initializer_in_subgraph if nested else make_sparse_initializer)(tmp_path)
    assert cli("shrink", str(src), "-o", str(tmp_path / "out")).returncode == 0
    proc = cli("compare", str(src), str(tmp_path / "out" / "a.onnx"))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "ok" in proc.stdout, proc.stdout
    from hatch_shrinkray.verification.runner import verify

    result = verify(src, tmp_path / "out" / "a.onnx")
    assert result.passed and result.checker.startswith("basic (the original fails the full check"), result.checker
    broken = tmp_path / "broken.onnx"
    m = onnx.load(str(tmp_path / "out" / "a.onnx"))
    m.graph.node[0].input[0] = "nowhere"
    onnx.save(m, str(broken))
    bad = cli("compare", str(src), str(broken))
    assert bad.returncode == 1 and "onnx.checker rejects it" in bad.stderr and "Traceback" not in bad.stderr


# ---------------------------------------------------------------------------------------------
# Other tracebacks and hangs of the same kind.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_model_path_that_is_a_special_file_is_one_line(tmp_path: Path, special: str) -> None:
    path = Path(special) if special == "/dev/zero" else tmp_path / "m.onnx"
    if special == "fifo":
        os.mkfifo(path)
    kind = "a character device" if special == "/dev/zero" else "a FIFO"
    for args in (["info", str(path)], ["shrink", str(path), "-o", str(tmp_path / "out")],
                 ["compare", str(path), str(path)]):
        line = one_error(cli(*args, timeout=60))
        assert line == f"error: {path}: is {kind}, not an .onnx file (pass the model file itself)", line
