"""One session creation in this fresh process: CPU seconds, wall seconds and peak RSS (VmHWM).

    python benchmarks/load_probe.py MODEL.onnx [--level all|basic|disable] [--optimized OUT.onnx]
                                    [--profile PREFIX]

Prints one JSON line. Standard library + onnxruntime only, so it runs in every runtime venv
(onnxruntime 1.16.3 and up, numpy 1.x). One process per measurement: the peak memory of a
process is a high-water mark, and onnxruntime caches allocations between sessions.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def _vm(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str]) -> int:
    import onnxruntime as ort

    path = argv[0]
    level = "all"
    optimized = profile = None
    rest = argv[1:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--level":
            level = value
        elif flag == "--optimized":
            optimized = value
        elif flag == "--profile":
            profile = value
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    if optimized:
        so.optimized_model_filepath = optimized
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = profile
    base_rss = _vm("VmRSS")
    cpu0, wall0 = _cpu(), time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    out = {"ort": ort.__version__, "cpu": round(cpu, 4), "wall": round(wall, 4),
           "peak_kb": _vm("VmHWM"), "base_kb": base_rss, "rss_kb": _vm("VmRSS")}
    if profile:
        out["profile"] = sess.end_profiling()
    print(json.dumps(out), flush=True)
    os._exit(0)  # no teardown in the figures


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
