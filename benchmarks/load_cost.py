"""Load cost of every method in every runtime: session creation (CPU time) and peak memory while
loading, beside size, for the 4 models of issue 14.

    python -m benchmarks.load_cost shrink [--models ...] [--methods ...]   # -> benchmarks/.cache/load/
    python -m benchmarks.load_cost measure [--reps 5] [--runtimes ...]     # -> benchmarks/LOAD.md
    python -m benchmarks.load_cost latency                                 # -> benchmarks/LOAD-LATENCY.md

Shrinking verifies every model on real inputs (the calibration ``.npz`` of ``curve_calib``; MiniLM-L3
gets the same sentences without ``token_type_ids``), and ``auto`` searches on them. Measuring runs
one fresh process per (runtime, model, method, repetition), repetitions interleaved round-robin so
that the shared machine's drift hits every variant alike; figures are medians. Python runtimes
use ``benchmarks/load_probe.py`` in their own venvs (``tests/runtimes.py`` creates and caches them),
onnxruntime-node and onnxruntime-web (wasm under Node) use ``tests/runtimes/run_model.cjs``, which
first creates a session on a tiny model so that the wasm start-up is not counted as the model's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import CACHE_DIR

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests"))

import runtimes  # noqa: E402  (tests/runtimes.py: cached runtime venvs and npm packages)

OUT = CACHE_DIR / "load"
MODELS = ["minilm_l3", "ppocrv6_rec", "magika", "silero_vad"]
METHODS = ["int8", "fp16", "float-levels", "int4", "auto", "dynamic", "fast"]
"""``fast`` = int8 with ``decode = "fast"`` (DequantizeLinear before MatMul)."""
RUNTIMES = ["1.16.3", "1.18.0", "newest", "web", "node"]


def calibration(key: str) -> Path:
    from benchmarks.curve_calib import OUT as CALIB
    from benchmarks.curve_calib import calibration as calib

    if key != "minilm_l3":
        return calib(key, corpus.model_path(key))[0]
    path = CALIB / "minilm_l3.npz"
    if not path.exists():
        with np.load(calib("minilm", corpus.model_path("minilm_l3"))[0]) as z:
            np.savez(path, input_ids=z["input_ids"], attention_mask=z["attention_mask"])
    return path


def shrink_all(models: list[str], methods: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for key in models:
        src = corpus.model_path(key)
        inputs = calibration(key)
        for method in methods:
            dst = OUT / f"{key}.{method}.onnx"
            if dst.exists():
                continue
            extra: dict[str, Any] = {"verify": {"inputs": str(inputs)}}
            if key == "minilm_l3":
                # Its extra outputs are hidden states, not class scores: argmax agreement means nothing.
                extra["verify"]["min_top1"] = 0.0
                extra["budget_agreement"] = 0.0
            if method == "fast":
                extra["decode"] = "fast"
            cmd = [sys.executable, "-m", "benchmarks.shrink_one", "ours", "int8" if method == "fast" else method,
                   str(src), str(dst), json.dumps(extra)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=BENCH.parent)
            status = "ok" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1][:200]
            print(f"{key} {method}: {status} ({time.perf_counter() - t0:.0f} s)", flush=True)


def _probe(runtime: str, model: Path) -> dict[str, Any]:
    if runtime in ("node", "web"):
        return runtimes.node_load(runtime, model)
    py = sys.executable if runtime == "newest" else str(runtimes.python_runtime(runtime))
    proc = subprocess.run([py, str(BENCH / "load_probe.py"), str(model)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def measure(models: list[str], methods: list[str], rts: list[str], reps: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {}
    files = {(k, m): (corpus.model_path(k) if m == "original" else OUT / f"{k}.{m}.onnx")
             for k in models for m in ["original", *methods]}
    for rep in range(reps):
        for (key, method), path in files.items():
            if not path.exists():
                continue
            for rt in rts:
                got = _probe(rt, path)
                rows.setdefault(f"{rt}|{key}|{method}", []).append(got)
        print(f"repetition {rep + 1}/{reps} done", flush=True)
    out: dict[str, Any] = {}
    for name, got in rows.items():
        ok = [g for g in got if "error" not in g]
        if not ok:
            out[name] = {"error": got[0]["error"]}
            continue
        cpu = "cpu" if "cpu" in ok[0] else "load_cpu"
        out[name] = {"cpu": statistics.median(g[cpu] for g in ok),
                     "peak_mib": statistics.median(g["peak_kb"] for g in ok) / 1024,
                     "version": ok[0].get("ort") or ok[0].get("version")}
    out["_sizes"] = {f"{k}|{m}": p.stat().st_size for (k, m), p in files.items() if p.exists()}
    return out


def report(data: dict[str, Any], command: str) -> str:
    sizes = data["_sizes"]
    rts = sorted({k.split("|")[0] for k in data if not k.startswith("_")}, key=RUNTIMES.index)
    lines = ["# Load cost: session creation and peak memory while loading, per runtime and method", "",
             f"Command: `{command}`", "",
             "Ratios to the original model in the same runtime (CPU seconds of session creation / peak RSS "
             "of the loading process, medians of interleaved fresh processes); `int8 x` = the method's "
             "ratio to int8 in the same runtime (the bar for older runtimes: <= 1.3). `-` = does not load "
             "(first line of the error below the table).", ""]
    errors: dict[str, str] = {}
    for key in MODELS:
        if f"{key}|original" not in sizes:
            continue
        versions = {rt: data.get(f"{rt}|{key}|original", {}).get("version", "?") for rt in rts}
        head = " | ".join(f"{rt} ({versions[rt]}) load / mem / int8 x" for rt in rts)
        lines += [f"## {key}", "", f"| method | size | {head} |", "|---" * (2 + len(rts)) + "|"]
        for method in ["original", *METHODS]:
            if f"{key}|{method}" not in sizes:
                continue
            cells = []
            for rt in rts:
                row = data.get(f"{rt}|{key}|{method}", {})
                base = data.get(f"{rt}|{key}|original", {})
                i8 = data.get(f"{rt}|{key}|int8", {})
                if "error" in row or "cpu" not in row or "cpu" not in base:
                    cells.append("-")
                    errors.setdefault(f"{key} {method} in {rt}", str(row.get("error", "not measured")))
                    continue
                cell = f"x{row['cpu'] / base['cpu']:.2f} / x{row['peak_mib'] / base['peak_mib']:.2f}"
                if method == "original":
                    cell = f"{row['cpu']:.3f} s / {row['peak_mib']:.0f} MiB"
                elif "cpu" in i8:
                    cell += f" / x{row['cpu'] / i8['cpu']:.2f}, x{row['peak_mib'] / i8['peak_mib']:.2f}"
                cells.append(cell)
            ratio = sizes[f"{key}|{method}"] / sizes[f"{key}|original"]
            lines.append(f"| {method} | {ratio:.1%} | " + " | ".join(cells) + " |")
        lines.append("")
    if errors:
        lines += ["## Errors", ""] + [f"* {k}: {v}" for k, v in errors.items()] + [""]
    return "\n".join(lines)


def latency(models: list[str], methods: list[str], budget: float, command: str) -> str:
    """Per-inference CPU time of each method / the original (interleaved, one process), at the default
    optimization level and at ORT_DISABLE_ALL, where nothing is folded and every decode runs per call."""
    from benchmarks.common import interleaved_latency, make_session

    lines = ["# Per-inference cost: default level vs ORT_DISABLE_ALL", "",
             f"Command: `{command}`", "",
             "Median per-inference CPU time of each shrunk model / the original, runs interleaved in one "
             "process (onnxruntime " + __import__("onnxruntime").__version__ + ", 1 thread, first calibration "
             "sample as the input).", "", "| model | level | " + " | ".join(methods) + " |",
             "|---" * (2 + len(methods)) + "|"]
    for key in models:
        with np.load(calibration(key)) as z:
            feed = {k: z[k][0] for k in z.files}
        for level in ("all", "disable"):
            base = make_session(corpus.model_path(key), level=level)
            cells = []
            for method in methods:
                path = OUT / f"{key}.{method}.onnx"
                if not path.exists():
                    cells.append("-")
                    continue
                res = interleaved_latency(base, make_session(path, level=level), feed, budget_s=budget)
                cells.append(f"x{res.ratio:.2f}")
            lines.append(f"| {key} | {'ORT_DISABLE_ALL' if level == 'disable' else 'default'} | "
                         + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["shrink", "measure", "latency"])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--methods", nargs="*", default=METHODS)
    ap.add_argument("--runtimes", nargs="*", default=RUNTIMES)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    if args.phase == "shrink":
        shrink_all(args.models, args.methods)
        return 0
    if args.phase == "latency":
        command = "python -m benchmarks.load_cost " + " ".join(argv if argv is not None else sys.argv[1:])
        (BENCH / "LOAD-LATENCY.md").write_text(latency(args.models, args.methods, 2.0, command))
        return 0
    data = measure(args.models, args.methods, args.runtimes, args.reps)
    saved = OUT / "measured.json"  # earlier runs' models stay (one model at a time as they are shrunk)
    if saved.exists():
        old = json.loads(saved.read_text())
        data = {**old, **data, "_sizes": {**old.get("_sizes", {}), **data["_sizes"]}}
    saved.write_text(json.dumps(data, indent=1))
    command = "python -m benchmarks.load_cost measure " + " ".join((argv if argv is not None else sys.argv[1:])[1:])
    (BENCH / "LOAD.md").write_text(report(data, command.strip()))
    print(f"wrote {BENCH / 'LOAD.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
