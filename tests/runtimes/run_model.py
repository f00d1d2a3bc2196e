"""Run a model in this interpreter's onnxruntime or OpenVINO, for the compatibility matrix.

    python run_model.py ort|openvino MODEL FEEDS.npz OUT.npz [all|disable]

FEEDS.npz holds ``{sample}/{input}`` arrays; OUT.npz gets ``{sample}/{k}`` for the k-th output and
``meta`` (JSON): the runtime's version, onnxruntime's profile of the runs (text) or OpenVINO's
compiled layers (type -> count), or the first line of the error when the model does not load or
run. Standard library + numpy + the runtime only: it runs in every cached runtime venv
(onnxruntime 1.16.3 has numpy 1.x).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from typing import Any

import numpy as np


def _samples(feeds: Any) -> list[dict[str, np.ndarray]]:
    out: dict[int, dict[str, np.ndarray]] = {}
    for key in feeds.files:
        sample, name = key.split("/", 1)
        out.setdefault(int(sample), {})[name] = feeds[key]
    return [out[i] for i in sorted(out)]


def _ort(model: str, samples: list[dict[str, np.ndarray]],
         level: str = "all") -> tuple[str, list[list[np.ndarray]], Any]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if level == "disable":  # no optimizer rewrite at all
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="shrinkray-profile-") as tmp:  # removed with the profile
        so.profile_file_prefix = os.path.join(tmp, "p")
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        outs = [[np.asarray(o) for o in sess.run(None, s)] for s in samples]
        with open(sess.end_profiling()) as f:
            return ort.__version__, outs, f.read()  # the caller counts the kernels (tests/runtimes.py)


def _openvino(model: str, samples: list[dict[str, np.ndarray]]) -> tuple[str, list[list[np.ndarray]], Any]:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    outs = []
    for s in samples:
        result = compiled(s)
        outs.append([np.asarray(result[o]) for o in compiled.outputs])
    ops = compiled.get_runtime_model().get_ordered_ops()
    return ov.__version__, outs, dict(Counter(op.get_rt_info()["layerType"].astype(str) for op in ops))


def main(argv: list[str]) -> int:
    kind, model, feeds_path, out_path = argv[:4]
    level = argv[4] if len(argv) > 4 else "all"
    with np.load(feeds_path) as feeds:
        samples = _samples(feeds)
    arrays: dict[str, np.ndarray] = {}
    try:
        version, outs, kernels = _ort(model, samples, level) if kind == "ort" else _openvino(model, samples)
        meta: dict[str, Any] = {"version": version, "kernels" if kind == "openvino" else "profile": kernels}
        for i, sample_outs in enumerate(outs):
            for k, arr in enumerate(sample_outs):
                arrays[f"{i}/{k}"] = arr
    except Exception as exc:  # the point is to record what each runtime says
        meta = {"error": " ".join(str(exc).split())[:300] or type(exc).__name__}
    np.savez(out_path, meta=np.array(json.dumps(meta)), **arrays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
