"""Method ``auto`` against ``int8`` on the task metrics: size vs. agreement with the original model.

    python -m benchmarks.auto_bench ppocrv6_rec ppocrv4_rec silero_vad [--budgets 0.99,0.995]

Calibration (the ``.npz`` given as ``inputs``; ``auto`` fits on three quarters of it, as ``shrink``
does) is built like a user would build it, and disjoint from the task's test data: OCR = 24
rendered lines from another seed, padded to one width; Silero = 96 chunks (input + recurrent
state) snapshotted while streaming 4 speech clips of another seed through the original model.
The task then runs on its own test data (200 lines / 24 clips x 5 SNRs + the 8 kHz branch) and we
report the share of answers identical to the original model's (lines / 32 ms decisions), the task
metric delta, and the raw size ratio.
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

    path = OUT / f"calib_{model.stem}_{n}_{seed}_{width}_mixed.npz"
    if path.exists():
        return path
    lines = build_lines(model, 4 * n, seed)  # first half clean, second half degraded
    xs = [preprocess(img) for _, img in lines]
    clean = [x for x in xs[: 2 * n] if x.shape[-1] <= width][: n // 2]
    degraded = [x for x in xs[2 * n:] if x.shape[-1] <= width][: n - n // 2]
    xs = clean + degraded
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


def variants(src: Path, dst_dir: Path, calib: Path, budgets: list[float], *, param: str,
             min_elements: int) -> list[dict[str, Any]]:
    """int8 (the default method), uniform int8 with output-aware rounding, and ``auto`` per budget
    (one analysis shared by the budgets; ``budget_cosine`` off so rel-L2 alone is swept)."""
    import copy
    from dataclasses import replace

    import onnx

    from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
    from hatch_shrinkray.bench import Auto, Dedup

    out: list[dict[str, Any]] = []
    loose = {"budget_rel_l2": 0.1} if param == "budget_agreement" else {"budget_agreement": 0.0}
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib), budget_cosine=-1.0,
                         min_elements=min_elements, **loose)
    dst = dst_dir / f"{src.stem}_int8_{min_elements}.onnx"
    t0 = time.perf_counter()
    shrink(src, dst, ShrinkOptions(method="int8", verify=None, min_elements=min_elements))
    out.append({"variant": "int8", "path": dst, "seconds": time.perf_counter() - t0, "encodings": {}})
    from benchmarks.curve_calib import feeds

    model = onnx.load(str(src))
    Dedup().apply(model, opts)
    auto = Auto()
    t0 = time.perf_counter()
    analysis = auto.analyse(model, opts, feeds(calib, src)[0])
    assert analysis is not None
    analyse_s = time.perf_counter() - t0
    m = copy.deepcopy(model)
    recs = auto.write_choice(m, analysis, opts, "int8")
    dst = dst_dir / f"{src.stem}_int8gptq_{min_elements}_{calib.stem}.onnx"
    onnx.save(m, str(dst))
    out.append({"variant": "int8-gptq", "path": dst, "seconds": analyse_s, "encodings": _kinds(recs)})
    for b in budgets:
        m = copy.deepcopy(model)
        t0 = time.perf_counter()
        recs = auto.finish(m, analysis, replace(opts, **{param: b}))
        dst = dst_dir / f"{src.stem}_auto_{param}_{b}_{min_elements}_{calib.stem}.onnx"
        onnx.save(m, str(dst))
        out.append({"variant": f"auto {param}={b}", "path": dst, "seconds": analyse_s + time.perf_counter() - t0,
                    "encodings": _kinds(recs), "note": recs[0].note[-160:] if recs else ""})
    return out


def _kinds(recs: list[Any]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for t in recs:
        k = t.encoding.split(" ")[0]
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


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
    ap.add_argument("--min-elements", type=int, default=16384)
    ap.add_argument("--calib-lines", type=int, default=16, help="OCR calibration lines (half clean, half degraded)")
    ap.add_argument("--param", default="budget_agreement", choices=["budget_agreement", "budget_rel_l2"])
    ap.add_argument("--budgets", default="0.99,0.995,0.998,0.999", help="values of --param to sweep (the other "
                    "budget is loose: rel-L2 at verification's limit 0.1 / agreement off; cosine off)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    budgets = [float(b) for b in args.budgets.split(",") if b]
    OUT.mkdir(parents=True, exist_ok=True)
    for key in args.models:
        src = MODEL_DIR / f"{key}.onnx"
        calib = vad_calibration(src) if key == "silero_vad" else ocr_calibration(src, n=args.calib_lines)
        task = task_for(key, src)
        ref = task.run(make_session(src, threads=2))
        rows: list[dict[str, Any]] = []
        for info in variants(src, OUT, calib, budgets, param=args.param, min_elements=args.min_elements):
            path = info.pop("path")
            info.update(evaluate(task, path, ref))
            info.update({"model": key, "min_elements": args.min_elements,
                         "raw_ratio": path.stat().st_size / src.stat().st_size})
            rows.append(info)
            print(json.dumps({k: (round(v, 5) if isinstance(v, float) and math.isfinite(v) else v)
                              for k, v in info.items()}), flush=True)
        name = f"{key}_{args.param}_{args.min_elements}_{args.calib_lines}.json"
        (OUT / name).write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
