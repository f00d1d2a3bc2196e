"""Load cost of every method in every runtime: session creation (CPU time) and peak memory while
loading, beside size, for the 4 models of issue 14.

    python -m benchmarks.load_cost shrink [--models ...] [--methods ...]   # -> benchmarks/.cache/load/
    python -m benchmarks.load_cost measure [--reps 5] [--runtimes ...]     # -> benchmarks/LOAD.md
    python -m benchmarks.load_cost report                                  # LOAD.md again from the figures
    python -m benchmarks.load_cost latency                                 # -> benchmarks/LOAD-LATENCY.md
    python -m benchmarks.load_cost readme                                  # the README's table (stdout)

Shrinking verifies every model on real inputs (the calibration ``.npz`` of ``curve_calib``; MiniLM-L3
gets the same sentences without ``token_type_ids``), and ``auto`` searches on them. Measuring runs
one fresh process per (runtime, model, method, repetition), repetitions interleaved round-robin so
that the shared machine's drift hits every variant alike; figures are medians. Python runtimes
use ``benchmarks/load_probe.py`` in their own venvs (``tests/runtimes.py`` creates and caches them),
onnxruntime-node and onnxruntime-web (wasm under Node) use ``tests/runtimes/run_model.cjs``, which
first creates a session on a tiny model so that the wasm start-up is not counted as the model's.

Two more views of onnxruntime-web, where V8 compiles each wasm function on its first call, so the
first session that folds a decode also compiles the kernels folding runs (``Cast`` above all: a
one-time cost per page or process): ``web-warm`` first loads *another* corpus model shrunk with
int8 (a page that already loaded one shrunk model), and ``web-first`` measures session
creation plus the first inference on the model's first real input, cold (time to the first result,
where the original pays that compile too when its graph has a ``Cast``).
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
METHODS = ["int8", "fp16", "float-levels", "int4", "auto", "auto-web", "dynamic", "fast"]
"""``fast`` = int8 with ``decode = "fast"`` (DequantizeLinear before MatMul); ``auto-web`` = auto with
``runtimes = ["web"]`` (its load budget: 1.0x int8 instead of 1.25x)."""
RUNTIMES = ["1.16.3", "1.18.0", "newest", "web", "web-warm", "web-first", "node"]


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
                extra["verify"]["min_agreement"] = 0.0
                extra["budget_agreement"] = 0.0
            if method == "fast":
                extra["decode"] = "fast"
            if method == "auto-web":
                extra["runtimes"] = ["web"]
            base = {"fast": "int8", "auto-web": "auto"}.get(method, method)
            cmd = [sys.executable, "-m", "benchmarks.shrink_one", "ours", base, str(src), str(dst), json.dumps(extra)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=BENCH.parent)
            status = "ok" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1][:200]
            print(f"{key} {method}: {status} ({time.perf_counter() - t0:.0f} s)", flush=True)


def warm_page(key: str) -> Path:
    """For ``web-warm``: another corpus model shrunk with int8, loaded first in the same page."""
    other = MODELS[(MODELS.index(key) + 1) % len(MODELS)]
    return OUT / f"{other}.int8.onnx"


_FEEDS: dict[str, dict[str, np.ndarray]] = {}


def first_feed(key: str) -> dict[str, np.ndarray]:
    """The model's first real input (the verification's), for ``web-first``."""
    if key not in _FEEDS:
        from benchmarks.curve_calib import feeds

        _FEEDS[key] = feeds(calibration(key), corpus.model_path(key))[0][0]
    return _FEEDS[key]


def _probe(runtime: str, model: Path, key: str) -> dict[str, Any]:
    if runtime in ("node", "web"):
        return runtimes.node_load(runtime, model)
    if runtime == "web-warm":
        return runtimes.node_run("web", model, None, warmup=warm_page(key))
    if runtime == "web-first":
        got = runtimes.node_run("web", model, [first_feed(key)], warmup=runtimes.warmup_model(), profile=False)
        if "error" not in got:
            got["load_cpu"] += got["first_cpu"]
        return got
    py = sys.executable if runtime == "newest" else str(runtimes.python_runtime(runtime))
    proc = subprocess.run([py, str(BENCH / "load_probe.py"), str(model)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def medians(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell's repeated ``_probe`` results: medians of CPU and wall seconds and peak MiB, the
    runtime's version (the first error when none succeeded)."""
    ok = [g for g in probes if "error" not in g]
    if not ok:
        return {"error": probes[0]["error"]}
    cpu = "cpu" if "cpu" in ok[0] else "load_cpu"
    wall = "wall" if "wall" in ok[0] else "load_wall"
    return {"cpu": statistics.median(g[cpu] for g in ok),
            "wall": statistics.median(g[wall] + g.get("first_wall", 0.0) for g in ok),
            "peak_mib": statistics.median(g["peak_kb"] for g in ok) / 1024,
            "version": ok[0].get("ort") or ok[0].get("version")}


def measure(models: list[str], methods: list[str], rts: list[str], reps: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {}
    files = {(k, m): (corpus.model_path(k) if m == "original" else OUT / f"{k}.{m}.onnx")
             for k in models for m in ["original", *methods]}
    for rep in range(reps):
        for (key, method), path in files.items():
            if not path.exists():
                continue
            for rt in rts:
                got = _probe(rt, path, key)
                rows.setdefault(f"{rt}|{key}|{method}", []).append(got)
        print(f"repetition {rep + 1}/{reps} done", flush=True)
    out: dict[str, Any] = {name: medians(got) for name, got in rows.items()}
    for name, row in out.items():  # each ratio against the original (and int8) of the same run
        rt, key, method = name.split("|")
        for ref in ("original", "int8"):
            got = out.get(f"{rt}|{key}|{ref}", {})
            if method not in ("original", ref) and "cpu" in got:
                row[ref] = {k: got[k] for k in ("cpu", "wall", "peak_mib")}
    out["_sizes"] = {f"{k}|{m}": p.stat().st_size for (k, m), p in files.items() if p.exists()}
    return out


Row = dict[str, Any]


def _refs(data: dict[str, Any], rt: str, key: str, method: str) -> tuple[Row, Row, Row]:
    """The row and the original's and int8's figures it is compared with: those of its own run when
    it has them (runs on a shared machine drift), else the latest."""
    row = data.get(f"{rt}|{key}|{method}", {})
    base = row.get("original") or data.get(f"{rt}|{key}|original", {})
    i8 = row.get("int8") or data.get(f"{rt}|{key}|int8", {})
    return row, base, i8


def report(data: dict[str, Any], commands: list[str]) -> str:
    sizes = data["_sizes"]
    rts = sorted({k.split("|")[0] for k in data if not k.startswith("_")}, key=RUNTIMES.index)
    lines = ["# Load cost: session creation and peak memory while loading, per runtime and method", "",
             "Commands, in order (a later one replaces the figures it measures again; every ratio is "
             "against the original measured by the same command):", "", "```",
             "python -m benchmarks.load_cost shrink", *commands, "```", "",
             "Ratios to the original model in the same runtime (CPU seconds of session creation / peak RSS "
             "of the loading process, medians of interleaved fresh processes); `int8 x` = the method's "
             "ratio to int8 in the same runtime (the bar for older runtimes: <= 1.3). `-` = does not load "
             "(first line of the error below the table). `web-warm`: after another model shrunk with "
             "int8 was loaded in the same page; `web-first`: session creation + the first inference, cold (the time "
             "to the first result; memory: the peak after that inference).", ""]
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
                row, base, i8 = _refs(data, rt, key, method)
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
    webs = [rt for rt in rts if rt.startswith("web")]
    if webs:
        lines += ["## onnxruntime-web: wall time", "",
                  "Session creation (`web-first`: + first inference) in wall seconds, ratio to the original: V8 "
                  "compiles wasm on background threads, so CPU time exceeds wall time there.", "",
                  "| model | method | " + " | ".join(webs) + " |", "|---" * (2 + len(webs)) + "|"]
        for key in MODELS:
            for method in ["original", *METHODS]:
                cells = []
                for rt in webs:
                    row, base, _ = _refs(data, rt, key, method)
                    if "wall" not in row or "wall" not in base:
                        cells.append("-")
                    elif method == "original":
                        cells.append(f"{row['wall']:.3f} s")
                    else:
                        cells.append(f"x{row['wall'] / base['wall']:.2f}")
                if any(c != "-" for c in cells):
                    lines.append(f"| {key} | {method} | " + " | ".join(cells) + " |")
        lines.append("")
    if errors:
        lines += ["## Errors", ""] + [f"* {k}: {v}" for k, v in errors.items()] + [""]
    return "\n".join(lines)


def readme_table(data: dict[str, Any], methods: tuple[str, ...] = ("int8", "auto", "auto-web")) -> str:
    """The README's table: per model and method, load CPU / peak memory as multiples of the
    original's in each runtime (and of int8's for the other methods)."""
    rts = [rt for rt in RUNTIMES if any(f"{rt}|{key}|int8" in data for key in MODELS)]
    names = {"newest": "onnxruntime " + str(data.get(f"newest|{MODELS[0]}|original", {}).get("version", "newest"))}
    lines = ["| model | method | " + " | ".join(names.get(rt, rt) for rt in rts) + " |", "|---" * (2 + len(rts)) + "|"]
    for key in MODELS:
        for method in methods:
            cells = []
            for rt in rts:
                row, base, i8 = _refs(data, rt, key, method)
                if "cpu" not in row or "cpu" not in base:
                    cells.append("- (original does not load)" if "error" in base else "-")
                    continue
                cell = f"x{row['cpu'] / base['cpu']:.2f} / x{row['peak_mib'] / base['peak_mib']:.2f}"
                if method != "int8" and "cpu" in i8:
                    cell += f" (int8 x{row['cpu'] / i8['cpu']:.2f} / x{row['peak_mib'] / i8['peak_mib']:.2f})"
                cells.append(cell)
            lines.append(f"| {key} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
    ap.add_argument("phase", choices=["shrink", "measure", "report", "latency", "readme"])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--methods", nargs="*", default=METHODS)
    ap.add_argument("--runtimes", nargs="*", default=RUNTIMES)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    if args.phase == "shrink":
        shrink_all(args.models, args.methods)
        return 0
    if args.phase == "report":  # LOAD.md again from the saved measurements
        data = json.loads((OUT / "measured.json").read_text())
        (BENCH / "LOAD.md").write_text(report(data, data.get("_commands", [])))
        return 0
    if args.phase == "readme":  # the README's load table, from the saved measurements
        print(readme_table(json.loads((OUT / "measured.json").read_text())), end="")
        return 0
    if args.phase == "latency":
        command = "python -m benchmarks.load_cost " + " ".join(argv if argv is not None else sys.argv[1:])
        (BENCH / "LOAD-LATENCY.md").write_text(latency(args.models, args.methods, 2.0, command))
        return 0
    data = measure(args.models, args.methods, args.runtimes, args.reps)
    command = "python -m benchmarks.load_cost measure " + " ".join((argv if argv is not None else sys.argv[1:])[1:])
    saved = OUT / "measured.json"  # earlier runs' figures stay, with the commands that measured them
    if saved.exists():
        old = json.loads(saved.read_text())
        data = {**old, **data, "_sizes": {**old.get("_sizes", {}), **data["_sizes"]}}
    data["_commands"] = [*data.get("_commands", []), command.strip()]
    saved.write_text(json.dumps(data, indent=1))
    (BENCH / "LOAD.md").write_text(report(data, data["_commands"]))
    print(f"wrote {BENCH / 'LOAD.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
