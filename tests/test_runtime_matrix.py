"""The compatibility matrix: every encoding of a real model, loaded and run in the runtimes its
users have (onnxruntime 1.16.3, a middle release and the newest; onnxruntime-node and
onnxruntime-web under Node; OpenVINO), compared with the original *in the same runtime*.

Each cell checks the refusal rules of ``methods/runtimes.py`` against reality: what they allow
must load, compute within verification's tolerances and (for the float-computing encodings) run
no decode per inference (the kernels onnxruntime's profiler reports equal the original's); what
they refuse must really fail there. OpenVINO keeps weight decompression
(Convert/Multiply) as layers of the compiled model by design, so there the extra layers are
recorded, not failed. The docs' table ("Where the shrunk models run") is generated from
``runtime_matrix.json``, which must equal these results (``SHRINKRAY_WRITE_MATRIX=1`` rewrites it;
otherwise a stale file fails).

Tier ``compat`` (``python -m pytest -m compat``; CI runs it after the default suite): the runtimes
are installed once into the test cache (~1.5 GB), which takes minutes on a fresh machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from packaging.version import Version

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.encodings import packing
from hatch_shrinkray.encodings._decode import float_decode
from hatch_shrinkray.methods.runtimes import Targets, refusal
from hatch_shrinkray.numerics.quant import quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.rewrite import encode_weights

import runtimes
from realmodels import magika

pytestmark = pytest.mark.compat

REPO = Path(__file__).resolve().parents[1]
MATRIX = Path(__file__).resolve().parent / "runtime_matrix.json"
"""The measured matrix as the docs show it (docs/hooks.py renders it; tests/test_docs.py checks its axes)."""
SAME = 1.25, 1e-3
"""A float-computing encoding computes "the same" in a runtime when its deviation from the original
there is at most 1.25x (+1e-3 relative L2) what the build's onnxruntime, where verification runs,
measured; those computing in int8 (int4, dynamic, fast: kernels legitimately differ) when they stay
within verification's default tolerances."""
MAX_REL_L2, MIN_COSINE = 0.1, 0.995

METHODS: dict[str, dict[str, Any]] = {
    "int8": {"method": "int8"}, "fp16": {"method": "fp16"}, "float-levels": {"method": "float-levels"},
    "int4": {"method": "int4"}, "dynamic": {"method": "dynamic"},
    "int8, decode fast": {"method": "int8", "decode": "fast"},
}
PACKED = {f"encodings: int{b} (packed)": b for b in packing.BITS}
"""The decode chains the `encodings` key (and plans) write besides int8/fp16/MatMulNBits, each on every weight."""
RUNTIMES = ("onnxruntime 1.16.3", "onnxruntime 1.23.2", "onnxruntime newest", "onnxruntime-node",
            "onnxruntime-web", "openvino")
FLOAT_COMPUTE = ("int8", "fp16", "float-levels", *PACKED, "encodings: int16")
PER_INFERENCE = {"DequantizeLinear": "DequantizeLinear per inference", "MatMulNBits": "MatMulNBits",
                 "ConvInteger": "int8 compute", "MatMulInteger": "int8 compute",
                 "DynamicQuantizeLinear": "int8 compute"}


class _Packed:
    def __init__(self, bits: int) -> None:
        self.bits = bits

    def encode(self, w: np.ndarray, ctx: EncodeContext) -> Decode:
        q = quantize_symmetric(w, ctx.axis, self.bits)
        if self.bits == 16:
            return float_decode(q, w.dtype, ctx.opset, "int16")
        return packing.packed_decode(q.codes, q.scale, self.bits, opset=ctx.opset, decoded=q.decoded,
                                     label=f"int{self.bits}")


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("matrix")
    src = magika()
    files = {"original": src}
    for name, kw in METHODS.items():
        files[name] = out / f"{name.replace(', ', '-')}.onnx"
        shrink(src, files[name], ShrinkOptions(**kw, verify=None))
    for name, bits in [*PACKED.items(), ("encodings: int16", 16)]:
        m = onnx.load(str(src))
        encode_weights(m, _Packed(bits), ShrinkOptions())
        files[name] = out / f"packed-int{bits}.onnx"
        onnx.save(m, str(files[name]))
    return files


@pytest.fixture(scope="module")
def feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"bytes": rng.integers(0, 257, (2, 2048)).astype(np.int32)} for _ in range(2)]


def _runner(runtime: str) -> Callable[[Path, list[dict[str, np.ndarray]]], dict[str, Any]]:
    try:
        if runtime.startswith("onnxruntime-"):
            backend = runtime.removeprefix("onnxruntime-")
            runtimes.node_modules()
            return lambda m, f: runtimes.node_run(backend, m, f)
        if runtime == "openvino":
            python: Path | str = runtimes.openvino_python()
            return lambda m, f: runtimes.python_run(python, "openvino", m, f)
        version = runtime.split()[1]
        python = sys.executable if version == "newest" else runtimes.python_runtime(version)
        return lambda m, f: runtimes.python_run(python, "ort", m, f)
    except runtimes.Unavailable as exc:
        pytest.skip(f"{runtime} cannot be installed here: {exc}")


@pytest.fixture(scope="module")
def reference(variants: dict[str, Path], feeds: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Each encoding's relative L2 from the original in the build's own onnxruntime."""
    run = _runner("onnxruntime newest")
    original = run(variants["original"], feeds)["outputs"]
    return {name: runtimes.deviation(run(path, feeds)["outputs"], original)[0] for name, path in variants.items()}


def _targets(runtime: str) -> Targets:
    if runtime == "onnxruntime-web":
        return Targets(None, web=True)
    if runtime == "openvino":
        return Targets(None, openvino=True)
    if runtime == "onnxruntime-node":
        return Targets(tuple(int(p) for p in runtimes.NPM_VERSION.split(".")))
    version = ort.__version__ if runtime.endswith("newest") else runtime.split()[1]
    return Targets(tuple(int(p) for p in version.split(".")))


def _extra(kernels: dict[str, float], original: dict[str, float]) -> dict[str, float]:
    """Kernels the shrunk model runs per inference beyond the original's (OpenVINO: layers of the
    compiled model, where weight decompression stays a layer by design and runs fused)."""
    return {k: v - original.get(k, 0.0) for k, v in kernels.items() if v - original.get(k, 0.0) > 1e-9}


CELLS: dict[tuple[str, str], str] = {}


@pytest.mark.network
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_encoding_in_runtime(runtime: str, variants: dict[str, Path], feeds: list[dict[str, np.ndarray]],
                                   reference: dict[str, float]) -> None:
    run = _runner(runtime)
    original = run(variants["original"], feeds)
    if "error" in original:
        for name in variants:
            CELLS[(name, runtime)] = "original does not load"
        pytest.skip(f"{runtime} does not read the original: {original['error']}")
    model = onnx.load(str(variants["original"]), load_external_data=False)
    targets = _targets(runtime)
    problems = []
    for name, path in variants.items():
        if name == "original":
            continue
        if name in METHODS:
            refused = refusal(model, METHODS[name]["method"], METHODS[name].get("decode", "float"), targets)
        else:
            # packed codes shift bytes with BitShift, which OpenVINO computes wrongly on uint8
            refused = None if name == "encodings: int16" or not targets.openvino else "packed codes are refused here"
        got = run(path, feeds)
        if "error" in got:
            CELLS[(name, runtime)] = f"✗ {_short(got['error'])}"
            if not refused:
                problems.append(f"{name}: does not load although not refused: {got['error']}")
            continue
        extra = _extra(got["kernels"], original["kernels"])
        rel, cos = runtimes.deviation(got["outputs"], original["outputs"])
        same = rel <= max(reference[name] * SAME[0], reference[name] + SAME[1]) if name in FLOAT_COMPUTE else (
            rel <= MAX_REL_L2 and cos >= MIN_COSINE)
        CELLS[(name, runtime)] = _label(extra) if same else f"✗ wrong outputs (rel-L2 {rel:.2g})"
        if not same and not refused:
            problems.append(f"{name}: deviates from the original here (rel-L2 {rel:.3g}, cosine {cos:.6f}; "
                            f"{reference[name]:.3g} in the build's onnxruntime)")
        if refused and same and ("DequantizeLinear" in extra) == (name == "int8, decode fast"):
            pass  # refused for what it costs here, and it does cost it
        elif refused and same:
            problems.append(f"{name}: refused ({refused}) but loads, computes the same and fuses here")
        if not refused and name == "int8, decode fast" and "DequantizeLinear" in extra:
            problems.append(f"{name}: not refused, but its DequantizeLinear runs per inference here")
        if name in FLOAT_COMPUTE and same and extra and runtime != "openvino":
            problems.append(f"{name}: decodes per inference here: {extra}")
    assert not problems, f"{runtime}:\n" + "\n".join(problems)


def _short(error: str) -> str:
    m = re.search(r"implementation for (\w+)", error)
    return f"no {m.group(1)}" if m else "does not load"


def _label(extra: dict[str, float]) -> str:
    """What runs per inference beyond the original's kernels, in words."""
    known = sorted({PER_INFERENCE[k] for k in extra if k in PER_INFERENCE})
    other = sorted(set(extra) - set(PER_INFERENCE) - {"Const"})
    if known:
        return "✓ " + ", ".join(known)
    return "✓" if not other else f"✓ decoded per inference ({', '.join(other[:3])})"


def encodings() -> list[str]:
    """The matrix's rows, in order."""
    return [*METHODS, *PACKED, "encodings: int16"]


def render() -> dict[str, Any]:
    return {"runtimes": list(RUNTIMES),
            "cells": {name: {rt: CELLS.get((name, rt), "?") for rt in RUNTIMES} for name in encodings()}}


def test_documented_matrix_is_the_measured_one() -> None:
    if any((n, rt) not in CELLS for n in [*METHODS, *PACKED] for rt in RUNTIMES):
        pytest.skip("the matrix did not run in every runtime in this session")
    measured = render()
    if os.environ.get("SHRINKRAY_WRITE_MATRIX"):
        MATRIX.write_text(json.dumps(measured, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert json.loads(MATRIX.read_text(encoding="utf-8")) == measured, (
        "tests/runtime_matrix.json (the docs' runtime table) is stale; rerun with "
        "SHRINKRAY_WRITE_MATRIX=1 python -m pytest -m compat")


@pytest.mark.network
def test_the_engine_works_with_its_own_onnxruntime_floor(tmp_path: Path) -> None:
    """Every method shrinks and verifies a real model with the lowest onnxruntime pyproject.toml
    allows (1.21 lacks onnxruntime.quantization.matmul_nbits_quantizer: int4 and auto fail there),
    except ``dynamic`` on Conv before 1.24.1, refused in one line (the build could not verify it)."""
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    floor = re.search(r'"onnxruntime>=([0-9.]+)"', pyproject)
    assert floor, "pyproject.toml must declare an onnxruntime floor"
    try:
        python = runtimes.python_runtime(floor.group(1), engine=REPO)
    except runtimes.Unavailable as exc:
        pytest.skip(f"onnxruntime {floor.group(1)} cannot be installed here: {exc}")
    np.savez(tmp_path / "x.npz", bytes=np.random.default_rng(0).integers(0, 257, (4, 2, 2048)).astype(np.int32))
    failures = []
    for method in (*METHODS.values(), {"method": "auto"}):
        budget = ["--budget-agreement", "0.9"] if method["method"] == "auto" else []  # auto's alone: refused elsewhere
        args = ["--method", method["method"], "--decode", method.get("decode", "float"), "--inputs",
                str(tmp_path / "x.npz"), *budget, "--force"]
        proc = subprocess.run([str(python), "-m", "hatch_shrinkray", "shrink", str(magika()), "-o",
                               str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=900, check=False)
        refused = method["method"] == "dynamic" and Version(floor.group(1)) < Version("1.24.1")
        if (proc.returncode != 0) != refused or (refused and "ConvInteger" not in proc.stderr):
            failures.append(f"{method}: {proc.stderr.strip()[-300:]}")
    version = subprocess.run([str(python), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert Version(version) == Version(floor.group(1))
    assert not failures, "\n".join(failures)
