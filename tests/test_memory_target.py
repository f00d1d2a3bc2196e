"""Target ``memory``: what each method keeps packed in a running process, how it is judged against
round-to-nearest int8 (and falls back when it loses), what the declared runtimes let it emit, and
the memory figures the build reports, which must be measured in fresh processes, not estimated (what
runs in this process is in tests/unit/test_memory_target.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hardening import MODEL, build, cli, write_project
from onnx import helper

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.codec import encode
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME
from hatch_shrinkray.verification.memory import PROBE

from onnx_builders import embedder, init, model, op_types, save, vi, weight

ROOM = 160


@pytest.mark.process
def test_int8_keeps_the_weights_packed_and_measures_both_models(tmp_path: Path) -> None:
    src, inputs = embedder(tmp_path)
    out = tmp_path / "out.onnx"
    r = shrink(src, out, ShrinkOptions(target="memory", verify=VerifyOptions(inputs=inputs)))
    encodings = {t.name: t.encoding for t in r.tensors}
    assert encodings["W1"] == encodings["W2"] == "MatMulNBits 8-bit, block 32, int8 activations"
    assert encodings["E"].startswith("int8 axis 0")  # int8 codes gathered row by row: packed already
    assert {"MatMulNBits", "Gather"} <= op_types(out) and "DequantizeLinear" not in op_types(out)
    v = r.verification
    assert v is not None and v.passed and "weights packed in memory kept" in v.fitting
    mem = v.memory
    assert mem is not None and mem.float_bytes == 0 and mem.runs == 100 and mem.input == "the first recorded input"
    assert mem.session_ratio < 0.5 and mem.shrunk.steady_kb < mem.original.steady_kb
    assert "memory" in encode(v.record()) and "memory measured in fresh processes" in v.summary()


@pytest.mark.process
def test_packed_weights_that_lose_to_int8_fall_back_to_float_in_memory(tmp_path: Path) -> None:
    """One input channel 1000x the others: the kernel's int8 activations (per block of 32 inputs) lose
    the small ones, which float compute with int8 weights keeps: the packed MatMul loses to int8."""
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["b", 256])], [vi("y", ["b", 256])],
              [init("W", weight((256, 256), 1))])
    src = save(m, tmp_path / "outlier.onnx")
    x = np.random.default_rng(0).standard_normal((20, 1, 256)).astype(np.float32)
    x[:, :, 0] = 1000
    np.savez(tmp_path / "x.npz", x=x)
    out = tmp_path / "out.onnx"
    r = shrink(src, out, ShrinkOptions(target="memory", min_elements=1000,
                                       verify=VerifyOptions(inputs=tmp_path / "x.npz")))
    assert "MatMulNBits" not in op_types(out)
    (w,) = r.tensors
    assert w.encoding.startswith("int8") and "weights packed in memory not kept" in w.note
    assert w.note.endswith("float in memory")
    assert r.verification is not None and r.verification.memory is not None
    assert r.verification.memory.float_bytes == r.verification.memory.weight_bytes
    assert "weights float" in r.verification.memory.brief()


MEASURE = """
import ctypes, json, sys, numpy as np, onnxruntime as ort
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS:")).split()[1])
so = ort.SessionOptions(); so.intra_op_num_threads = 1
warm = ort.InferenceSession(sys.argv[2], so, providers=["CPUExecutionProvider"])
warm.run(None, {"x": np.zeros(1, np.float32)})
ctypes.CDLL("libc.so.6").malloc_trim(0); before = rss()
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
ctypes.CDLL("libc.so.6").malloc_trim(0); print(rss() - before)
"""


@pytest.mark.process
def test_the_memory_figure_is_measured_in_a_fresh_process_not_estimated(tmp_path: Path) -> None:
    """fp16 halves the file, but its MatMul weights fold back to float32 at load (only the table, whose
    rows are decoded as they are gathered, stays fp16): an estimate from the file or the stored bytes
    says 0.5x, a running process holds 2 MB + 2 MB of the original's 6 MB. The build's figure is the
    process's, and agrees with a session this test creates in a process of its own."""
    src, inputs = embedder(tmp_path)
    report = tmp_path / "report.json"
    done = cli("shrink", str(src), "-o", str(tmp_path / "fp16"), "--method", "fp16", "--target", "memory",
               "--inputs", str(inputs), "--json", str(report))
    assert done.returncode == 0, done.stderr
    mem = json.loads(report.read_text())[0]["verification"]["memory"]
    shrunk = tmp_path / "fp16" / src.name
    assert shrunk.stat().st_size < 0.6 * src.stat().st_size
    assert 0.6 < mem["session_ratio"] < 0.85 and mem["input"] == "the first recorded input"  # fp16 fits nothing
    assert mem["float_bytes"] == 2 * 256 * 1024 * 4 and mem["weight_bytes"] == (2 * 256 * 1024 + 4000 * 256) * 4
    first = tmp_path / "first.onnx"
    save(model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [1])], [vi("y", [1])]), first)
    own = [int(subprocess.run([sys.executable, "-c", MEASURE, str(p), str(first)], capture_output=True, text=True,
                              check=True).stdout) for p in (src, shrunk)]
    for kb, key in zip(own, ("original", "shrunk"), strict=True):
        assert abs(mem[key]["session_kb"] - kb) < max(0.25 * kb, 2000), (key, mem[key], kb)
    assert "malloc_trim" in PROBE and "/proc/self/status" in PROBE


@pytest.mark.process
@pytest.mark.extended
def test_the_line_says_what_memory_holds_within_its_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The build's line at the default verbosity (160 characters), the figures and the manifest at ``-v``."""
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    root = write_project(tmp_path / "toymodel", 'inputs = "inputs.npz"\ntarget = "memory"\n'
                                                'runtimes = ["onnxruntime>=1.22"]\n')
    src, inputs = embedder(tmp_path)
    (root / MODEL).write_bytes(src.read_bytes())
    (root / "inputs.npz").write_bytes(inputs.read_bytes())
    sdist = build(root, "sdist")
    err = capsys.readouterr().err.splitlines()
    line = next(ln for ln in err if ln.startswith(f"shrinkray: {MODEL}: "))
    assert len(line) <= ROOM and "; memory 0." in line and "float" not in line, line  # every weight packed
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(MANIFEST_NAME))
        (entry,) = json.load(tar.extractfile(member)).values()  # type: ignore[arg-type]
    mem = entry["verification"]["memory"]
    assert mem["session_ratio"] < 0.5 and mem["original"]["session_kb"] > 5000 and mem["float_bytes"] == 0
    old = cli("shrink", str(src), "-o", str(tmp_path / "old"), "--target", "memory", "--inputs", str(inputs),
              "--runtimes", "onnxruntime>=1.16.3")
    assert old.returncode == 0, old.stderr
    line = old.stdout.strip().splitlines()[0]
    assert len(line) <= ROOM + 2 * len(str(tmp_path)) and "memory 0." in line and ", 34% float" in line, line
    note = "note: not packed in memory: MatMulNBits 8-bit needs onnxruntime>=1.22.0 (onnxruntime>=1.16.3 targeted)"
    assert note in old.stdout.splitlines(), old.stdout


@pytest.mark.extended
@pytest.mark.process
def test_auto_counts_memory_then_the_wheel(tmp_path: Path) -> None:
    """Its search minimises bytes in memory: the MatMul weights end packed. A Conv weight is float32 once
    loaded whatever its encoding, so there the wheel decides: it is not kept float32 for nothing."""
    src, inputs = embedder(tmp_path, rows=512, width=128)
    r = shrink(src, tmp_path / "auto.onnx", ShrinkOptions(method="auto", target="memory", min_elements=1000,
                                                          verify=VerifyOptions(inputs=inputs)))
    encodings = {t.name: t.encoding for t in r.tensors}
    assert all(encodings[w].startswith("MatMulNBits") for w in ("W1", "W2")), encodings
    conv = model([helper.make_node("Conv", ["x", "K"], ["y"], pads=[1, 1, 1, 1])], [vi("x", ["b", 32, 12, 12])],
                 [vi("y", ["b", 64, 12, 12])], [init("K", weight((64, 32, 3, 3), 5))])
    x = np.random.default_rng(0).standard_normal((24, 1, 32, 12, 12)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    r = shrink(save(conv, tmp_path / "conv.onnx"), tmp_path / "conv-out.onnx",
               ShrinkOptions(method="auto", target="memory", min_elements=1000,
                             verify=VerifyOptions(inputs=tmp_path / "x.npz")))
    (k,) = r.tensors
    assert k.encoding != "kept" and r.kept_original is None and r.shrunk_size < r.original_size / 2, k
    assert r.verification is not None and r.verification.memory is not None
    assert r.verification.memory.brief().endswith("weights float")
