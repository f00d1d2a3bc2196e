"""Method ``auto`` against ``int8`` on the task metrics: size vs. agreement with the original model.

    python -m benchmarks.auto_bench ppocrv6_rec ppocrv4_rec silero_vad [--budgets 0.99,0.995]

Calibration (the verification ``.npz`` that ``auto`` searches on) is built like a user would build
it, and disjoint from the task's test data: OCR = 24 rendered lines from another seed, padded to
one width; Silero = 96 chunks (input + recurrent state) snapshotted while streaming 4 speech clips
of another seed through the original model. The task then runs on its own test data (200 lines /
24 clips x 5 SNRs + the 8 kHz branch) and we report the share of answers identical to the
original model's (lines / 32 ms decisions), the task metric delta, and the raw size ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import CACHE_DIR, make_session
from benchmarks.corpus import MODEL_DIR

OUT = CACHE_DIR / "auto"


def ocr_calibration(model: Path, n: int = 16, seed: int = 777, width: int = 480) -> Path:
    """``n`` rendered lines (another seed than the test set) no wider than ``width`` at height 48,
    zero-padded to it (as rapidocr pads), so one ``.npz`` holds them all."""
    from benchmarks.tasks.ocr_rec import build_lines, preprocess

    path = OUT / f"calib_{model.stem}_{n}_{seed}_{width}.npz"
    if path.exists():
        return path
    xs = [x for x in (preprocess(img) for _, img in build_lines(model, 4 * n, seed)) if x.shape[-1] <= width][:n]
    batch = np.zeros((len(xs), 1, 3, 48, width), dtype=np.float32)
    for i, x in enumerate(xs):
        batch[i, :, :, :, : x.shape[-1]] = x
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=batch)
    return path


def vad_calibration(model: Path, clips: int = 4, seed: int = 99, every: int = 5) -> Path:
    from benchmarks.tasks.vad import FRAME, build_clips, mix

    path = OUT / f"calib_vad_{clips}_{seed}_{every}.npz"
    if path.exists():
        return path
    sess = make_session(model, threads=2)
    inputs: list[np.ndarray] = []
    states: list[np.ndarray] = []
    for ci, c in enumerate(build_clips(clips, seed)):
        audio = mix(c["clean"], c["labels"], 10.0, "white" if ci % 2 else "brown", seed + ci)
        state = np.zeros((2, 1, 128), dtype=np.float32)
        ctx = np.zeros((1, 64), dtype=np.float32)
        for i in range(len(audio) // FRAME):
            x = np.concatenate([ctx, audio[None, i * FRAME:(i + 1) * FRAME]], axis=1)
            if i % every == 0:
                inputs.append(x.copy())
                states.append(state.copy())
            _, state = sess.run(None, {"input": x, "state": state, "sr": np.array(16000, dtype=np.int64)})
            ctx = x[:, -64:]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, input=np.stack(inputs), state=np.stack(states),
             sr=np.full(len(inputs), 16000, dtype=np.int64))
    return path


def task_for(key: str, model: Path) -> Any:
    if key.endswith("_rec"):
        from benchmarks.tasks.ocr_rec import OcrRecTask

        return OcrRecTask(model)
    from benchmarks.tasks.vad import VadTask

    return VadTask()


def shrink_variant(src: Path, dst: Path, method: str, calib: Path, budget: float | None) -> dict[str, Any]:
    from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink

    opts: dict[str, Any] = {"method": method, "verify": VerifyOptions(inputs=calib)}
    if budget is not None:
        opts["budget_agreement"] = budget
    t0 = time.perf_counter()
    res = shrink(src, dst, ShrinkOptions(**opts))
    kinds: dict[str, int] = {}
    for t in res.tensors:
        k = t.encoding.split(" ")[0]
        kinds[k] = kinds.get(k, 0) + 1
    return {"seconds": time.perf_counter() - t0, "ratio": res.ratio, "encodings": kinds,
            "first_note": res.tensors[0].note if res.tensors else ""}


def evaluate(task: Any, path: Path, ref: Any) -> dict[str, float]:
    out = task.run(make_session(path, threads=2))
    same = float(np.mean([a == b for a, b in zip(ref.decisions, out.decisions, strict=True)]))
    metrics = {"identical": same}
    for k, v in out.metrics.items():
        metrics[k] = v
        metrics[f"d_{k}"] = v - ref.metrics[k]
    return metrics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--budgets", default="0.99,0.995,0.999")
    ap.add_argument("--int8", action="store_true", help="also the int8 baseline")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    budgets = [float(b) for b in args.budgets.split(",") if b]
    OUT.mkdir(parents=True, exist_ok=True)
    for key in args.models:
        src = MODEL_DIR / f"{key}.onnx"
        calib = vad_calibration(src) if key == "silero_vad" else ocr_calibration(src)
        task = task_for(key, src)
        ref = task.run(make_session(src, threads=2))
        rows: list[dict[str, Any]] = []
        variants: list[tuple[str, str, float | None]] = [("auto", "auto", b) for b in budgets]
        if args.int8:
            variants.insert(0, ("int8", "int8", None))
        for label, method, budget in variants:
            dst = OUT / f"{key}_{label}_{budget}.onnx"
            info = shrink_variant(src, dst, method, calib, budget)
            info.update(evaluate(task, dst, ref))
            info.update({"model": key, "variant": label, "budget_agreement": budget,
                         "raw_ratio": dst.stat().st_size / src.stat().st_size})
            rows.append(info)
            print(json.dumps({k: (round(v, 5) if isinstance(v, float) and math.isfinite(v) else v)
                              for k, v in info.items() if k != "first_note"}), flush=True)
            print("   ", info["first_note"][-200:], flush=True)
        (OUT / f"{key}.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
