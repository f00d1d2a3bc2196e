"""Target ``memory`` where users run it: each packed encoding (8-bit and 4-bit ``MatMulNBits``, 4-bit
``GatherBlockQuantized``) in onnxruntime 1.16.3, the releases around each kernel's first one, the
newest, onnxruntime-node and onnxruntime-web, at ``ORT_ENABLE_ALL`` and ``ORT_DISABLE_ALL``.

What ``methods.runtimes.packed_kernels`` lets a runtime have must load and answer there as in the
build's onnxruntime, at both levels; what it withholds must really fail there (a model that loads
and then fails on its first inference, as 8-bit codes with float activations do in 1.16.3 and
1.22.1, counts as failing). Tier ``compat`` (the runtimes are installed once into the test cache).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.methods.runtimes import packed_kernels

import runtimes
from onnx_builders import init, model, save, vi, weight

pytestmark = pytest.mark.compat

BASE = {"target": "memory", "min_elements": 1000, "verify": None}
VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "MatMulNBits 8-bit": ({"exclude_ops": ("Gather",)}, "eight"),
    "MatMulNBits 4-bit": ({"method": "int4", "exclude_ops": ("Gather",)}, "four"),
    "GatherBlockQuantized 4-bit": ({"method": "int4", "exclude_ops": ("MatMul", "Gemm")}, "gather"),
}
"""Each packed kernel alone in a model (the options that emit it), and its key in ``packed_kernels``."""
RUNTIMES = ("onnxruntime 1.16.3", "onnxruntime 1.21.1", "onnxruntime 1.22.0", "onnxruntime 1.22.1",
            "onnxruntime 1.23.0", "onnxruntime newest", "onnxruntime-node", "onnxruntime-web", "openvino")
"""The oldest release tested, the last release without and the first with each kernel, the newest,
onnxruntime's node and web (wasm) packages, and OpenVINO (one level: it has no optimization levels)."""
LEVELS = ("all", "disable")
SAME = 1.25, 2e-3
"""Answers alike: the deviation from the original in that runtime at most 1.25x (+2e-3 relative L2) the
build's onnxruntime's (the kernels' int8 activations round a little differently from release to release)."""


def _model() -> Any:
    return model([helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("MatMul", ["e", "W1"], ["h"]),
                  helper.make_node("Reshape", ["h", "shape"], ["h2"]),
                  helper.make_node("Gemm", ["h2", "W2", "b2"], ["y"], transB=1)],
                 [vi("ids", [2, 5], TensorProto.INT64)], [vi("y", [10, 48])],
                 [init("E", weight((500, 64), 3)), init("W1", weight((64, 200), 1)), init("W2", weight((48, 200), 2)),
                  init("b2", weight((48,), 4)), init("shape", np.array([10, 200], np.int64))])


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("memory-runtimes")
    files = {"original": save(_model(), out / "original.onnx")}
    for name, (options, _) in VARIANTS.items():
        files[name] = out / f"{name.replace(' ', '-')}.onnx"
        r = shrink(files["original"], files[name], ShrinkOptions(**{**BASE, **options}))
        assert any(t.encoding.startswith(name) for t in r.tensors), [t.encoding for t in r.tensors]
    return files


@pytest.fixture(scope="module")
def feeds() -> list[dict[str, np.ndarray]]:
    return [{"ids": np.random.default_rng(i).integers(0, 500, (2, 5)).astype(np.int64)} for i in range(2)]


Run = Callable[[Path, list[dict[str, np.ndarray]], str], dict[str, Any]]


def _runner(runtime: str) -> Run:
    try:
        if runtime == "openvino":
            python: Path | str = runtimes.openvino_python()
            return lambda m, f, level: runtimes.python_run(python, "openvino", m, f)
        if runtime.startswith("onnxruntime-"):
            backend = runtime.removeprefix("onnxruntime-")
            runtimes.node_modules()
            return lambda m, f, level: runtimes.node_run(backend, m, f, "disabled" if level == "disable" else "all",
                                                         profile=False)
        version = runtime.split()[1]
        python = sys.executable if version == "newest" else runtimes.python_runtime(version)
        return lambda m, f, level: runtimes.python_run(python, "ort", m, f, level)
    except runtimes.Unavailable as exc:
        pytest.skip(f"{runtime} cannot be installed here: {exc}")


def _entries(runtime: str) -> tuple[str, ...]:
    if runtime in ("onnxruntime-web", "openvino"):
        return ("web" if runtime.endswith("web") else "openvino",)
    version = runtimes.NPM_VERSION if runtime == "onnxruntime-node" else (
        ort.__version__ if runtime.endswith("newest") else runtime.split()[1])
    return (f"onnxruntime>={version}",)


def _rel(got: list[list[np.ndarray]], ref: list[list[np.ndarray]]) -> float:
    a = np.concatenate([o.ravel() for s in got for o in s]).astype(np.float64)
    b = np.concatenate([o.ravel() for s in ref for o in s]).astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def reference(variants: dict[str, Path], feeds: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Each variant's relative L2 from the original in the build's onnxruntime."""
    run = _runner("onnxruntime newest")
    original = run(variants["original"], feeds, "all")["outputs"]
    return {name: _rel(run(variants[name], feeds, "all")["outputs"], original) for name in VARIANTS}


@pytest.mark.network
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_each_packed_kernel_runs_where_runtimes_allow_it_and_fails_where_not(
        runtime: str, variants: dict[str, Path], feeds: list[dict[str, np.ndarray]],
        reference: dict[str, float]) -> None:
    run = _runner(runtime)
    allowed = packed_kernels(_entries(runtime))
    problems = []
    for name, (_, key) in VARIANTS.items():
        got = {level: run(variants[name], feeds, level) for level in LEVELS}
        if allowed[key] is not None:
            if all("error" not in g for g in got.values()):
                problems.append(f"{name}: withheld ({allowed[key]}) but loads and runs here")
            continue
        for level, g in got.items():
            if "error" in g:
                problems.append(f"{name} at {level}: fails here though allowed: {g['error']}")
                continue
            original = run(variants["original"], feeds, level)["outputs"]
            rel = _rel(g["outputs"], original)
            if rel > max(reference[name] * SAME[0], reference[name] + SAME[1]):
                problems.append(f"{name} at {level}: rel-L2 {rel:.3g} from the original here, "
                                f"{reference[name]:.3g} in the build's onnxruntime")
        if all("outputs" in g for g in got.values()) and _rel(got["disable"]["outputs"], got["all"]["outputs"]) > 1e-5:
            problems.append(f"{name}: answers differ between the optimization levels here")
    assert not problems, f"{runtime}:\n" + "\n".join(problems)
