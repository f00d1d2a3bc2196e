"""Models over 2 GB: a synthetic 2.5 GiB model stored as .onnx + external data shrinks and
verifies within 2.5x its size in peak RSS.

The model is written tensor by tensor straight into its data file (never whole in memory), and
each shrink runs in a fresh subprocess that reports its own ``ru_maxrss``, so the figure is the
engine's alone (imports included), not the test process's.

Slow (minutes, ~3 GB of disk per model): selected only by ``-m slow``, e.g.
``.venv/bin/pytest -m slow tests/test_big_model.py -s`` (the figures are printed).
Running this file as a script prints the figures as a Markdown table row:
``.venv/bin/python tests/test_big_model.py /some/scratch/dir``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from hatch_shrinkray.shipping.manifest import file_sha256

pytestmark = pytest.mark.slow

WIDTH = 8192
LAYERS = 10  # 10 x 8192 x 8192 float32 = 2.5 GiB (2.68 GB)
RSS_FACTOR = 2.5

CHILD = r"""
import json, resource, sys, time
from hatch_shrinkray import ShrinkOptions, ShrinkrayError, shrink
src, dst, method = sys.argv[1:4]
start = time.perf_counter()
figures = {}
try:
    result = shrink(src, dst, ShrinkOptions(method=method))
except ShrinkrayError as exc:
    figures["error"] = str(exc)
else:
    figures.update(
        original_size=result.original_size, shrunk_size=result.shrunk_size,
        passed=result.verification is not None and result.verification.passed,
        summary=result.verification.summary() if result.verification else None,
        external_data=list(result.external_data), encoded=len(result.encoded))
figures["seconds"] = time.perf_counter() - start
figures["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(figures))
"""


def make_big_model(directory: Path, layers: int = LAYERS, width: int = WIDTH, name: str = "big.onnx") -> Path:
    """x[b, width] -> (MatMul W_i -> Relu) x layers, weights in ``<name>.data`` beside the model.

    He-scaled Gaussian weights keep activations O(1) through the chain, so verification compares
    meaningful numbers. Peak memory while writing is one weight.
    """
    directory.mkdir(parents=True, exist_ok=True)
    location = name + ".data"
    rng = np.random.default_rng(2026)
    inits: list[TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    offset = 0
    with open(directory / location, "wb") as fh:
        for i in range(layers):
            w = rng.standard_normal((width, width), dtype=np.float32)
            w *= np.float32(np.sqrt(2.0 / width))
            w.tofile(fh)
            t = TensorProto(name=f"W{i}", data_type=TensorProto.FLOAT, dims=[width, width])
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(w.nbytes))):
                t.external_data.add(key=key, value=value)
            t.data_location = TensorProto.EXTERNAL
            offset += w.nbytes
            inits.append(t)
            last = i == layers - 1
            src = "x" if i == 0 else f"r{i - 1}"
            nodes.append(helper.make_node("MatMul", [src, f"W{i}"], ["y" if last else f"h{i}"]))
            if not last:
                nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"]))
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    path = directory / name
    path.write_bytes(model.SerializeToString())
    return path


def shrink_in_child(src: Path, dst: Path, method: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(dst), method], capture_output=True,
                          text=True, check=False, timeout=1800)
    if proc.returncode != 0:  # not a ShrinkrayError: a crash
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        return {"error": f"CRASH: {last}", "seconds": float("nan"), "peak_rss": float("nan"),
                "traceback": proc.stderr[-3000:]}
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def model_size(path: Path) -> int:
    return path.stat().st_size + sum(p.stat().st_size for p in path.parent.glob(path.name + ".*"))




@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_big_model(tmp_path_factory.mktemp("big"))


@pytest.fixture(autouse=True)
def only_when_selected(request: pytest.FixtureRequest) -> None:
    """Outside the default run: CI's plain ``pytest`` has no ``-m``, so skip unless asked for."""
    expr = str(request.config.getoption("markexpr") or "")
    if "slow" not in expr or "not slow" in expr:
        pytest.skip("a 2.5 GiB model: run with -m slow")


def outcome(figures: dict[str, Any]) -> str:
    if "error" in figures:
        return f"FAILED: {figures['error']}"
    return (f"{figures['summary']}, output {figures['shrunk_size'] / 1e9:.3f} GB "
            f"{figures['external_data'] or 'single file'}")


def report(label: str, size: int, figures: dict[str, Any]) -> None:
    print(f"\n{label}: model {size / 2**30:.2f} GiB ({size / 1e9:.2f} GB), peak RSS "
          f"{figures['peak_rss'] / 2**30:.2f} GiB ({figures['peak_rss'] / size:.2f}x), "
          f"{figures['seconds']:.1f} s, {outcome(figures)}")


def test_int8_of_a_2_5_gib_model_verifies_within_2_5x_rss(big_model: Path, tmp_path: Path) -> None:
    size = model_size(big_model)
    assert size > 2**31 + 2**29
    out = tmp_path / "out" / "big.onnx"
    figures = shrink_in_child(big_model, out, "int8")
    report("int8", size, figures)
    assert "error" not in figures, figures["error"]
    assert figures["passed"] and figures["encoded"] == LAYERS
    assert figures["peak_rss"] <= RSS_FACTOR * size
    # under 2 GB: one self-contained file, no data file beside it
    assert figures["external_data"] == []
    assert sorted(p.name for p in out.parent.iterdir()) == ["big.onnx"]
    onnx.checker.check_model(str(out), full_check=True)


@pytest.fixture(scope="module")
def big_output(big_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """float-levels keeps float32 storage, so its output stays over 2 GB; shrunk twice, in two processes."""
    first = tmp_path_factory.mktemp("one") / "big.onnx"
    figures = shrink_in_child(big_model, first, "float-levels")
    report("float-levels", model_size(big_model), figures)
    second = tmp_path_factory.mktemp("two") / "big.onnx"
    shrink_in_child(big_model, second, "float-levels")
    return first, second, figures


def test_output_over_2_gb_gets_a_deterministic_data_file(big_output: tuple[Path, Path, dict[str, Any]]) -> None:
    """Model + ``<name>.data`` beside it, and the second process writes the same bytes."""
    first, second, figures = big_output
    assert "error" not in figures, figures["error"]
    assert figures["passed"]
    assert figures["external_data"] == ["big.onnx.data"]
    assert sorted(p.name for p in first.parent.iterdir()) == ["big.onnx", "big.onnx.data"]
    model = onnx.load(str(first), load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"big.onnx.data"}
    onnx.checker.check_model(str(first), full_check=True)
    assert file_sha256(first) == file_sha256(second)
    assert file_sha256(first.with_name("big.onnx.data")) == file_sha256(second.with_name("big.onnx.data"))


def test_output_over_2_gb_within_2_5x_rss(big_model: Path, big_output: tuple[Path, Path, dict[str, Any]]) -> None:
    figures = big_output[2]
    assert "error" not in figures, figures["error"]
    assert figures["peak_rss"] <= RSS_FACTOR * model_size(big_model)


def main() -> None:
    """Print the int8 figure as a Markdown row (for benchmarks/BIG_MODEL.md)."""
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="shrinkray-big-"))
    start = time.perf_counter()
    src = make_big_model(scratch / "in")
    made = time.perf_counter() - start
    size = model_size(src)
    for method in sys.argv[2:] or ["int8"]:
        figures = shrink_in_child(src, scratch / method / "big.onnx", method)
        print(f"| {method} | {size / 1e9:.2f} GB ({size / 2**30:.2f} GiB) | {figures['peak_rss'] / 1e9:.2f} GB "
              f"({figures['peak_rss'] / size:.2f}x) | {figures['seconds']:.1f} s | {outcome(figures)} | "
              f"model written in {made:.1f} s", flush=True)


if __name__ == "__main__":
    main()
