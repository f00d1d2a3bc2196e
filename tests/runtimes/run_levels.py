"""Run models at every graph optimization level in this interpreter's onnxruntime, for
tests/test_levels.py.

    python run_levels.py FEEDS.npz OUT.npz MODEL...

FEEDS.npz holds ``{sample}/{input}`` arrays; OUT.npz gets ``{model}/{level}/{sample}/{k}`` for the
k-th output of each model (its index in the arguments) at each level, and ``meta`` (JSON): the
onnxruntime version and, per model and level, the first line of the error when it does not load or
run. Standard library + numpy + onnxruntime only: it runs in every cached runtime venv.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_ALL")


def main(argv: list[str]) -> int:
    import onnxruntime as ort

    feeds_path, out_path, *models = argv
    with np.load(feeds_path) as feeds:
        samples: dict[int, dict[str, np.ndarray]] = {}
        for key in feeds.files:
            sample, name = key.split("/", 1)
            samples.setdefault(int(sample), {})[name] = feeds[key]
    arrays: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    for m, model in enumerate(models):
        for level in LEVELS:
            so = ort.SessionOptions()
            so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            so.log_severity_level = 4
            try:
                sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                for i in sorted(samples):
                    for k, out in enumerate(sess.run(None, samples[i])):
                        arrays[f"{m}/{level}/{i}/{k}"] = np.asarray(out)
            except Exception as exc:  # the point is to record what each runtime says
                errors[f"{m}/{level}"] = " ".join(str(exc).split())[:300] or type(exc).__name__
    meta: dict[str, Any] = {"version": ort.__version__, "errors": errors}
    np.savez(out_path, meta=np.array(json.dumps(meta)), **arrays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
