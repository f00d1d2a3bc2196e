"""Benchmark driver: shrink every corpus model with every variant, measure, write RESULTS.md + plot.

    python benchmarks/run.py            # full run -> benchmarks/RESULTS.md, benchmarks/results.png
    python benchmarks/run.py --quick    # 2 headline models, fewer samples -> benchmarks/out/RESULTS-quick.md

Expensive results are cached under benchmarks/.cache/ (rendered data, audio, shrunk models keyed by the
input's sha256 and our engine's source hash, compressed sizes keyed by the file's sha256, per-variant
measurements keyed by the shrunk file's sha256). ``--force`` re-measures everything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import (
    CACHE_DIR,
    COMPRESSORS,
    FAST_COMPRESSORS,
    OUT_DIR,
    SizeCache,
    TaskOutput,
    agreement,
    interleaved_latency,
    interleaved_session_creation,
    json_default,
    make_session,
    output_diff,
    sha256_file,
    try_session,
)
from benchmarks.task_specs import QUICK_MODELS, TASKS, Task, TaskSpec
from benchmarks.variants import BY_NAME, ENGINE_REV, SHRUNK_DIR, VARIANTS, ShrinkRun, Variant, shrink_variant

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_CACHE = CACHE_DIR / "results"
RESULT_SCHEMA = 4  # bump to invalidate cached per-variant measurements




@dataclass
class Row:
    model: str
    variant: str
    label: str
    kind: str
    status: str  # "ok" | "shrink failed" | "does not load" | "pending" | "run failed"
    detail: str = ""
    sizes: dict[str, int | None] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    agreement: float | None = None
    cosine: float | None = None
    rel_l2: float | None = None
    latency_ratio: float | None = None
    latency_ms: float | None = None
    latency_wall_ratio: float | None = None
    session_ratio: float | None = None
    session_s: float | None = None
    shrink_s: float | None = None
    shrink_rss_mb: float | None = None
    shrink_cmd: list[str] = field(default_factory=list)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _pending_reason(run: ShrinkRun) -> str | None:
    err = run.error or ""
    if run.variant.startswith("ours") and ("ImportError" in err or "ModuleNotFoundError" in err):
        return "engine not importable yet"
    if run.variant.startswith("ours") and ("unknown method" in err.lower() or "not implemented" in err.lower()):
        return "method not implemented yet"
    return None


def _measure_speed(row: Row, src: Path, path: Path, task: Task, args: argparse.Namespace) -> None:
    feed = task.latency_feed()
    a1, b1 = make_session(src, threads=1), make_session(path, threads=1)
    lat = interleaved_latency(a1, b1, feed, budget_s=args.latency_budget)
    row.latency_ratio, row.latency_ms, row.latency_wall_ratio = lat.ratio, lat.variant_ms, lat.wall_ratio
    del a1, b1
    sr, _, sb = interleaved_session_creation(src, path, reps=3 if args.quick else 5)
    row.session_ratio, row.session_s = sr, sb


def measure(
    model: str, variant: Variant, src: Path, *, task: Task, orig_out: TaskOutput, spec: TaskSpec,
    args: argparse.Namespace, sizes: SizeCache,
) -> Row:
    row = Row(model, variant.name, variant.label, variant.kind, "ok")
    if '"task-recording"' in variant.options:
        # auto needs real inputs: a recording of the task's pipeline on its calibration data, disjoint from the
        # test data (``record_task``; an .npz of such data for models without a recorded workload)
        from benchmarks.curve_calib import calibration

        variant = dataclasses.replace(variant, options=variant.options.replace(
            '"task-recording"', json.dumps({"inputs": str(calibration(model, src)[0])})))
    run = shrink_variant(variant, model, src, force=args.force_shrink)
    row.shrink_cmd = run.command
    if variant.kind != "original":
        row.shrink_s, row.shrink_rss_mb = run.seconds, run.peak_rss_mb
    if not run.ok or run.path is None:
        reason = _pending_reason(run)
        row.status = "pending" if reason else "shrink failed"
        last = (run.error or "").strip().splitlines()
        row.detail = reason or (last[-1][:200] if last else f"exit {run.returncode}")
        return row
    path = Path(run.path)
    row.sizes = sizes.sizes(path, algos=args.algos, compute=True)
    if args.skip_brotli:
        row.sizes["brotli11"] = sizes.get(sha256_file(path), "brotli11")
    sig = f"{RESULT_SCHEMA}|{spec.signature(args.quick)}|{sha256_file(src)}|{sha256_file(path)}"
    cache_file = RESULTS_CACHE / model / f"{variant.name}.json"
    if not args.force and cache_file.exists():
        cached = json.loads(cache_file.read_text())
        if cached.get("sig") == sig:
            for k in ("status", "detail", "metrics", "agreement", "cosine", "rel_l2", "latency_ratio",
                      "latency_ms", "latency_wall_ratio", "session_ratio", "session_s"):
                setattr(row, k, cached.get(k))
            if getattr(args, "relatency", False) and row.status == "ok":
                _measure_speed(row, src, path, task, args)
                cache_file.write_text(json.dumps({"sig": sig, **asdict(row)}, default=json_default))
            return row
    sess, err = try_session(path, threads=args.threads)
    if sess is None:
        row.status, row.detail = "does not load", err or ""
    else:
        try:
            out = task.run(sess, path)
        except Exception as exc:
            row.status, row.detail = "run failed", " ".join(str(exc).split())[:200]
        else:
            row.metrics = out.metrics
            custom = getattr(task, "agreement", None)
            row.agreement = custom(orig_out, out) if custom else agreement(orig_out.decisions, out.decisions)
            d = output_diff(orig_out.raw, out.raw)
            row.cosine, row.rel_l2 = d.cosine, d.rel_l2
            _measure_speed(row, src, path, task, args)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps({"sig": sig, **asdict(row)}, default=json_default))
    return row


def run_model(model: str, variants: list[Variant], args: argparse.Namespace, sizes: SizeCache) -> list[Row]:
    spec = TASKS[model]
    src = corpus.model_path(model)
    _log(f"{model}: building task {spec.name}")
    task = spec.build(src, args.quick)
    orig_sess = make_session(src, threads=args.threads)
    orig_out = task.run(orig_sess, src)
    del orig_sess
    rows: list[Row] = []
    for v in variants:
        t0 = time.perf_counter()
        row = measure(model, v, src, task=task, orig_out=orig_out, spec=spec, args=args, sizes=sizes)
        _log(f"{model} {v.name}: {row.status} {row.detail[:80]} {spec.primary}="
             f"{row.metrics.get(spec.primary, float('nan')):.4f} agree={row.agreement} "
             f"lat={row.latency_ratio} ({time.perf_counter() - t0:.1f}s)")
        rows.append(row)
    return rows


def _refresh_sizes(all_rows: dict[str, dict[str, Any]], sizes: SizeCache) -> None:
    """Fill sizes that were pending (e.g. brotli from a background ``sizes.py``) from the cache."""
    sizes.data = {}
    sizes._reload_merge()
    for r in all_rows.values():
        if r["status"] in ("shrink failed", "pending") or all(r["sizes"].get(a) is not None for a in COMPRESSORS):
            continue
        path = (corpus.MODEL_DIR / f"{r['model']}.onnx" if r["variant"] == "original"
                else SHRUNK_DIR / r["model"] / f"{r['variant']}.onnx")
        if not path.exists() or path.stat().st_size != r["sizes"].get("raw"):
            continue
        sha = sha256_file(path)
        for algo in COMPRESSORS:
            if r["sizes"].get(algo) is None:
                r["sizes"][algo] = sizes.get(sha, algo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="headline models only, fewer samples")
    ap.add_argument("--models", nargs="*", help="subset of corpus keys")
    ap.add_argument("--variants", nargs="*", help="subset of variant names")
    ap.add_argument("--force", action="store_true", help="re-measure (ignore cached measurements)")
    ap.add_argument("--force-shrink", action="store_true", help="re-shrink (ignore cached shrunk models)")
    ap.add_argument("--skip-brotli", action="store_true",
                    help="brotli-11 from the cache only (it runs at ~0.02-0.2 MB/s here); brotli-9 is still computed")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads for task evaluation")
    ap.add_argument("--latency-budget", type=float, default=4.0, help="seconds of interleaved runs per variant")
    ap.add_argument("--relatency", action="store_true",
                    help="re-measure latency and session-creation ratios of cached rows (e.g. on a quiet machine)")
    ap.add_argument("--report-only", action="store_true", help="rewrite RESULTS.md/plot from results.json")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args(argv)
    args.algos = FAST_COMPRESSORS if args.skip_brotli else COMPRESSORS
    if args.quick:
        args.latency_budget = min(args.latency_budget, 2.0)
    models = args.models or (QUICK_MODELS if args.quick else list(TASKS))
    variants = [BY_NAME[v] for v in args.variants] if args.variants else VARIANTS
    if variants[0].name != "original":
        variants = [BY_NAME["original"], *variants]
    sizes = SizeCache()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    results_path = OUT_DIR / ("results-quick.json" if args.quick else "results.json")
    all_rows: dict[str, dict[str, Any]] = {}
    if results_path.exists():
        all_rows = json.loads(results_path.read_text())
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    meta_path = OUT_DIR / ("run-meta-quick.json" if args.quick else "run-meta.json")
    if not args.report_only:
        env = "" if ENGINE_REV == "HEAD" else f"HSR_BENCH_ENGINE={ENGINE_REV} "
        argv_s = " ".join(argv if argv is not None else sys.argv[1:])
        history = json.loads(meta_path.read_text()).get("runs", []) if meta_path.exists() else []
        history.append({"command": f"{env}python benchmarks/run.py {argv_s}".strip(), "started": started})
        meta_path.write_text(json.dumps({"runs": history[-6:]}))
    for m in [] if args.report_only else models:
        for r in run_model(m, variants, args, sizes):
            all_rows[f"{r.model}/{r.variant}"] = asdict(r)
        results_path.write_text(json.dumps(all_rows, indent=1, default=json_default))
    _refresh_sizes(all_rows, sizes)
    results_path.write_text(json.dumps(all_rows, indent=1, default=json_default))
    if not args.no_report:
        from benchmarks.report import write_report

        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        write_report(all_rows, args, started, argv if argv is not None else sys.argv[1:], run_meta=meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
