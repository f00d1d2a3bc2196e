"""Target runtimes through the console script (the rest: tests/unit/test_runtimes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hardening import cli

from hatch_shrinkray.methods.runtimes import CONV_INTEGER, DQ_MATMUL_FUSED, MATMUL_NBITS

from onnx_builders import conv_model, mlp, save


@pytest.mark.parametrize(("method", "decode", "floor", "words"), [
    ("dynamic", "float", "1.18", ["ConvInteger", f"onnxruntime>={'.'.join(map(str, CONV_INTEGER))}"]),
    ("int8", "fast", "1.24.4", ["DequantizeLinear would run on every inference",
                                f"onnxruntime>={'.'.join(map(str, DQ_MATMUL_FUSED))}"]),
    ("int4", "float", "1.16.1", ["MatMulNBits", ".".join(map(str, MATMUL_NBITS))]),
])
@pytest.mark.process
def test_cli_refuses_what_the_target_runtime_cannot_load(tmp_path: Path, method: str, decode: str, floor: str,
                                                          words: list[str]) -> None:
    src = save(conv_model() if method == "dynamic" else mlp(), tmp_path / "m.onnx")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "out"), "--method", method, "--decode", decode,
               "--runtimes", f"onnxruntime>={floor}")
    assert proc.returncode == 1
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and all(w in error[0] for w in words), proc.stderr
    assert str(src) in error[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "m.onnx").exists()
    ok = cli("shrink", str(src), "-o", str(tmp_path / "out"), "--method", method, "--decode", decode,
             "--runtimes", "onnxruntime>=1.25", "--runtimes", "openvino", "--no-verify")
    assert ok.returncode == 0, ok.stderr
