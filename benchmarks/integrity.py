"""What hashing what is shrunk and shipped costs (issue 11): the engine now reads the model once,
hashes those bytes, hashes external data before reading it and re-hashes every file read before it
writes; a wheel built from an sdist copies each manifest match while hashing it and checks its
protobuf framing.

    python -m benchmarks.integrity [--base REV] [--repeats N]   # -> prints a Markdown table

Each run is a fresh interpreter that imports hatch_shrinkray from a ``git archive`` snapshot (base
and HEAD), the two interleaved run by run; CPU time (user + system, from ``wait4``) and wall time
are medians; peak RSS is the child's own ``VmHWM``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from benchmarks.corpus import model_path
from benchmarks.variants import engine_dir

SHRINK = """
import sys
from hatch_shrinkray import shrink
shrink(sys.argv[1], sys.argv[2])
"""
WHEEL = """
import sys
from hatchling.builders.wheel import WheelBuilder
next(WheelBuilder(sys.argv[1]).build(directory=sys.argv[2], versions=["standard"]))
"""
PEAK = """
import atexit
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("PEAK_KB", line.split()[1], file=sys.stderr)
atexit.register(_peak)
"""


def mlp(path: Path, n: int = 2048, layers: int = 6) -> None:
    """Six 2048 x 2048 float layers: a 100 MB model, the size where hashing would show."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", f"W{i}"], [f"h{i}"]))
        inits.append(numpy_helper.from_array((rng.standard_normal((n, n)) * 0.02).astype(np.float32), f"W{i}"))
    nodes.append(helper.make_node("Identity", [f"h{layers - 1}"], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, n])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, n])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(path))


def sdist_project(model: Path, work: Path, engine: Path) -> Path:
    """A project shipping ``model``, built into an sdist (shrunk model + manifest) and unpacked."""
    root = work / "project"
    (root / "src/toymodel/models").mkdir(parents=True)
    (root / "src/toymodel/__init__.py").write_text("")
    shutil.copyfile(model, root / "src/toymodel/models/a.onnx")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "toymodel"\nversion = "0.1.0"\n[tool.hatch.build.targets.wheel]\n'
        'packages = ["src/toymodel"]\n[tool.hatch.build.hooks.shrinkray]\nmodels = ["src/**/*.onnx"]\n')
    code = ("import sys\nfrom hatchling.builders.sdist import SdistBuilder\n"
            "print(next(SdistBuilder(sys.argv[1]).build(directory=sys.argv[2], versions=['standard'])))")
    sdist = run_child(engine, code, [str(root), str(work / "sdist")], work)[3].strip()
    with tarfile.open(sdist) as tar:
        tar.extractall(work / "unpacked", filter="data")
    return work / "unpacked" / "toymodel-0.1.0"


def run_child(engine: Path, code: str, args: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """CPU seconds, wall seconds, peak RSS (kB) and stdout of ``code`` in a fresh interpreter that
    imports hatch_shrinkray from ``engine``, with a cold cache of its own."""
    env = {**os.environ, "PYTHONPATH": str(engine), "HATCH_SHRINKRAY_CACHE_DIR": tempfile.mkdtemp(dir=cwd)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "import sys\n" + PEAK + code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({engine}):\n{proc.stderr}")
    peak = int(next(ln.split()[1] for ln in proc.stderr.splitlines() if ln.startswith("PEAK_KB")))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, peak, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    engines: dict[str, Path] = {}
    for label, rev in (("base", args.base), ("HEAD", "HEAD")):
        snapshot = engine_dir(rev)
        assert snapshot is not None
        engines[label] = snapshot
    ocr = model_path("ppocrv6_rec")
    rows = []
    with tempfile.TemporaryDirectory(prefix="hsr-integrity-") as tmp:
        work = Path(tmp)
        big = work / "mlp100.onnx"
        mlp(big)
        cases = {"shrink int8, 100 MB MLP": (SHRINK, lambda out: [str(big), str(out / "o.onnx")]),
                 "shrink int8, PP-OCRv6 rec": (SHRINK, lambda out: [str(ocr), str(out / "o.onnx")])}
        (work / "sdist-build").mkdir()
        unpacked = sdist_project(big, work / "sdist-build", engines["HEAD"])
        cases["wheel from sdist (pass-through, 25 MB model)"] = (WHEEL, lambda out: [str(unpacked), str(out)])
        for name, (code, argv) in cases.items():
            got: dict[str, list[tuple[float, float, int]]] = {k: [] for k in engines}
            for _ in range(args.repeats):
                for label, engine in engines.items():
                    out = Path(tempfile.mkdtemp(dir=work))
                    cpu, wall, peak, _ = run_child(engine, code, argv(out), work)
                    got[label].append((cpu, wall, peak))
                    shutil.rmtree(out)
            med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in got.items()}
            rows.append((name, med))
            print(json.dumps({name: med}), file=sys.stderr, flush=True)
    print("| case | CPU s base -> HEAD | ratio | wall s base -> HEAD | peak RSS MB base -> HEAD |")
    print("|---|---|---|---|---|")
    for name, med in rows:
        b, h = med["base"], med["HEAD"]
        print(f"| {name} | {b[0]:.2f} -> {h[0]:.2f} | {h[0] / b[0]:.3f} | {b[1]:.2f} -> {h[1]:.2f} | "
              f"{b[2] / 1024:.0f} -> {h[2] / 1024:.0f} |")


if __name__ == "__main__":
    main()
