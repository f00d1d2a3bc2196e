"""RESULTS.md and the size-vs-quality plot, from the rows produced by ``benchmarks/run.py``."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.variants import PEER_VENV, VARIANTS

BENCH_DIR = Path(__file__).resolve().parent
MB = 1e6


def _fmt_mb(v: int | None) -> str:
    return "pending" if v is None else f"{v / MB:.2f}"


def _fmt(v: float | None, spec: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def _versions() -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version()}
    for pkg in ("onnx", "onnxruntime", "numpy", "pillow", "scipy", "scikit-learn", "brotli", "zstandard",
                "matplotlib", "tokenizers", "hatch-shrinkray"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "n/a"
    peer_py = PEER_VENV / "bin" / "python"
    if peer_py.exists():
        r = subprocess.run([str(peer_py), "-c", "import importlib.metadata as m;"
                            "print(m.version('onnx-shrink-ray'), m.version('onnx'), m.version('onnxruntime'),"
                            " m.version('onnx_graphsurgeon'))"], capture_output=True, text=True, check=False)
        parts = r.stdout.split()
        if len(parts) == 4:
            out["peer venv"] = (f"onnx-shrink-ray {parts[0]}, onnx {parts[1]}, onnxruntime {parts[2]}, "
                                f"onnx_graphsurgeon {parts[3]}")
    torch_dist = list((corpus.LOCAL_CACHE / "venv-torch").glob("lib/python3*/site-packages/torch-*.dist-info"))
    if torch_dist:
        out["torch (MiniLM export only)"] = torch_dist[0].name.split("-")[1].removesuffix(".dist")
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=BENCH_DIR, check=False).stdout.strip()
        out["git HEAD"] = rev
    except OSError:
        pass
    return out


def _engine_state(all_rows: dict[str, dict[str, Any]]) -> str:
    """Which source state(s) of hatch_shrinkray produced our rows (content hash of hatch_shrinkray/**/*.py)."""
    from benchmarks.variants import SHRUNK_DIR, engine_key

    keys: set[str] = set()
    for r in all_rows.values():
        meta = SHRUNK_DIR / r["model"] / f"{r['variant']}.json"
        if r["kind"] == "ours" and meta.exists():
            keys.add(json.loads(meta.read_text()).get("engine_key", "?"))
    last = subprocess.run(["git", "log", "-1", "--format=%h %cI", "--", "hatch_shrinkray"], capture_output=True,
                          text=True, cwd=BENCH_DIR.parent, check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "hatch_shrinkray"], capture_output=True,
                           text=True, cwd=BENCH_DIR.parent, check=False).stdout.strip()
    return (f"engine state(s) used for our rows: {', '.join(sorted(keys)) or 'none'} (`git:` = a `git archive` "
            f"snapshot of that commit's hatch_shrinkray/, see HSR_BENCH_ENGINE in benchmarks/README.md); current "
            f"{engine_key()}; last commit touching hatch_shrinkray/: {last or '?'}"
            f"{' (the work tree has uncommitted engine changes)' if dirty else ''}")


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{mem_kb / 1024 / 1024:.0f} GB RAM"
    except OSError:
        mem = "? RAM"
    return f"{cpu}, {os.cpu_count()} logical CPUs, {mem}, {platform.system()} {platform.release()}"


def _denormals(model: str) -> tuple[int, int]:
    """(float32 weights, of which denormal) in the original model, initializers and Constant nodes (subgraphs too)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    path = corpus.MODEL_DIR / f"{model}.onnx"
    if not path.exists():
        return 0, 0
    m = onnx.load(str(path))
    arrays = []

    def walk(g: onnx.GraphProto) -> None:
        arrays.extend(numpy_helper.to_array(t) for t in g.initializer)
        for n in g.node:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    arrays.append(numpy_helper.to_array(a.t))
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)

    walk(m.graph)
    tiny = np.finfo(np.float32).tiny
    tot = den = 0
    for a in arrays:
        if a.dtype == np.float32:
            tot += a.size
            den += int(((a != 0) & (np.abs(a) < tiny)).sum())
    return tot, den


def _metric_cols(rows: list[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        for k in r["metrics"]:
            if k not in cols:
                cols.append(k)
    return cols


def _primary(model: str, rows: list[dict[str, Any]] | None = None) -> tuple[str, bool]:
    from benchmarks.task_specs import TASKS

    spec = TASKS.get(model)
    if spec is not None:
        return spec.primary, spec.higher_is_better
    first = next((k for r in rows or [] for k in r["metrics"]), "metric")
    return first, True


def write_report(all_rows: dict[str, dict[str, Any]], args: argparse.Namespace, started: str,
                 argv: list[str], *, md_path: Path | None = None, png_path: Path | None = None,
                 run_meta: dict[str, Any] | None = None) -> Path:
    quick = bool(args.quick)
    if md_path is None:
        md_path = BENCH_DIR / "out" / "RESULTS-quick.md" if quick else BENCH_DIR / "RESULTS.md"
    if png_path is None:
        png_path = BENCH_DIR / "out" / "results-quick.png" if quick else BENCH_DIR / "results.png"
    by_model: dict[str, list[dict[str, Any]]] = {}
    order = {v.name: i for i, v in enumerate(VARIANTS)}
    for r in all_rows.values():
        by_model.setdefault(r["model"], []).append(r)
    for rs in by_model.values():
        rs.sort(key=lambda r: order.get(r["variant"], 99))
    cmd = "python benchmarks/run.py" + ("" if not argv else " " + " ".join(argv))
    lines: list[str] = [
        "# hatch-shrinkray benchmark results" + (" (quick subset)" if quick else ""),
        "",
        "Regenerate everything with `python benchmarks/run.py` from the repo root in the project venv "
        "(`--quick` for the 2-model subset; see benchmarks/README.md for the system packages).",
        ("Measuring runs, in order (each reuses cached rows whose model files are unchanged): "
         + "; ".join(f"`{r['command']}` ({r['started']})" for r in run_meta.get("runs", [])) + ". "
         if run_meta else "")
        + f"This file was written by `{cmd}`.",
        f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"Machine: {_machine()}.",
        "",
        "Versions: " + "; ".join(f"{k} {v}" for k, v in _versions().items()) + ".",
        "",
        "Our engine: " + _engine_state(all_rows) + ".",
        "",
        "How it is measured (see `benchmarks/README.md` for details):",
        "",
        "* sizes: raw file, `gzip -9`, brotli quality 9 and 11 (lgwin 24), zstd -19 (MB = 10^6 bytes); brotli-11",
        "  ran at only 0.02-0.2 MB/s on this shared 2-core machine, so it is *pending* where it did not finish",
        "  (comparisons then use zstd-19, never a mix of compressors);",
        "* task metric on offline synthetic data (see each model's section); *agree* = fraction of discrete",
        "  outputs (OCR lines, VAD frame decisions, labels, ...) identical to the original model's;",
        "  *cos* / *relL2* = cosine similarity / relative L2 error of the raw float outputs vs the original;",
        "* *lat x* = median per-inference CPU time of the calling thread / original's, interleaved runs in one",
        "  process, `intra_op_num_threads=1` (onnxruntime then computes on the calling thread, so thread CPU",
        "  time is the inference cost and other load on the shared machine does not distort it); *wall x* = the",
        "  same with wall-clock time; *load x* = InferenceSession creation CPU time / original's (median of 5,",
        "  interleaved); the *original* row compares the original with itself (noise level);",
        "* *shrink s* / *RSS MB* = wall time and peak RSS (`ru_maxrss`) of the shrinking subprocess",
        "  (the peer runs in its own venv via its CLI; its startup/imports are included, as for ours);",
        "* rows that do not load in onnxruntime, fail to shrink, or are *pending* (our engine method not",
        "  available when this file was written) keep their shrink numbers and an explanation.",
        "",
        "Peer commands (onnx-shrink-ray 0.0.11 CLI, own venv):",
        "",
    ]
    for v in VARIANTS:
        if v.kind == "peer":
            lines.append(f"* {v.label}: `python -m onnx_shrink_ray.shrink {' '.join(v.peer_args)} "
                         f"--output_dir DIR --output_suffix _peer.onnx MODEL.onnx`")
        elif v.kind == "ortdyn":
            lines.append(f"* {v.label}: `onnxruntime.quantization.quantize_dynamic(in, out, "
                         f"weight_type=QuantType.QInt8)` (defaults otherwise)")
        elif v.kind == "ours":
            lines.append(f"* {v.label}: `hatch_shrinkray.shrink(in, out, ShrinkOptions(method=\"{v.method}\", "
                         f"verify=None))`")
    lines.append("")
    lines += _overview(by_model)
    summary: list[str] = []
    for model, rs in by_model.items():
        entry = corpus.BY_KEY.get(model)
        primary, hib = _primary(model, rs)
        orig = next((r for r in rs if r["variant"] == "original"), None)
        title = entry.description if entry else "(not a corpus model)"
        source = f"`{entry.requirement}` `{entry.member}`. " if entry else ""
        tot, den = _denormals(model)
        dnote = ""
        if den:
            dnote = (f" The original has {den:,} denormal float32 weights ({100 * den / tot:.1f} % of {tot:,}); "
                     "methods that flush or re-encode them can be faster than the original on x86 CPUs.")
        lines += [f"## {model}: {title}", "",
                  f"{source}Primary metric: **{primary}** ({'higher' if hib else 'lower'} is better).{dnote}", ""]
        mcols = _metric_cols(rs)
        head = ["variant", "status", "raw MB", "gzip-9", "brotli-9", "brotli-11", "zstd-19", *mcols, "agree", "cos",
                "relL2", "lat x", "wall x", "load x", "shrink s", "RSS MB"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in rs:
            s = r["sizes"]
            status = r["status"] if r["status"] == "ok" else f"**{r['status']}**"
            if s:
                cells = [r["label"], status, _fmt_mb(s.get("raw")), _fmt_mb(s.get("gzip9")),
                         _fmt_mb(s.get("brotli9")), _fmt_mb(s.get("brotli11")), _fmt_mb(s.get("zstd19"))]
            else:  # no output file
                cells = [r["label"], status, "-", "-", "-", "-", "-"]
            cells += [_fmt(r["metrics"].get(c), ".4f") for c in mcols]
            cells += [_fmt(r["agreement"], ".3f"), _fmt(r["cosine"], ".6f"), _fmt(r["rel_l2"], ".2e"),
                      _fmt(r["latency_ratio"], ".2f"), _fmt(r.get("latency_wall_ratio"), ".2f"),
                      _fmt(r["session_ratio"], ".2f"),
                      _fmt(r["shrink_s"], ".1f"), _fmt(r["shrink_rss_mb"], ".0f")]
            lines.append("| " + " | ".join(cells) + " |")
        notes = [r for r in rs if r["status"] != "ok"]
        if notes:
            lines.append("")
            for r in notes:
                lines.append(f"* {r['label']}: {r['status']}: `{r['detail'][:240]}`")
        lines.append("")
        if orig:
            summary += _summary_lines(model, rs, orig, primary, hib)
    lines += curves_section()
    lines += ["## Where our methods lose to a peer", ""]
    lines += summary or ["(none found among measured rows)"]
    lines.append("")
    md_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        _plot(by_model, png_path)
        lines.insert(4, f"Plot: `{png_path.name}` (compressed size vs change of the primary metric).")
        lines.insert(5, "")
    except ImportError:
        lines.insert(4, "(matplotlib not installed: no plot)")
    md_path.write_text("\n".join(lines))
    print(f"wrote {md_path}")
    return md_path


OVERVIEW = ["ours-int8", "ours-fp16", "ours-int4", "ours-auto", "peer-default", "peer-per-channel",
            "peer-float256", "ort-dynamic"]


def _overview(by_model: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One line per model: compressed size ratio / primary-metric change / agreement / latency ratio."""
    head = ["model", "primary metric (original)", *OVERVIEW]
    out = ["## Overview", "",
           "Each cell: compressed size as a fraction of the original's (brotli-11, or zstd-19 for models "
           "whose brotli sizes are not all computed yet) / change of the primary metric in points (+ = better) / "
           "agreement with the original / latency ratio. *no load* = the output does not load in onnxruntime.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rs in by_model.items():
        primary, hib = _primary(model, rs)
        byv = {r["variant"]: r for r in rs}
        orig = byv.get("original")
        if orig is None:
            continue
        algo = _algo(rs)
        base, bsize = orig["metrics"].get(primary), _size(orig, algo)
        cells = [model, f"{primary} {_fmt(base, '.4f')} ({algo})"]
        for v in OVERVIEW:
            r = byv.get(v)
            if r is None:
                cells.append("-")
            elif r["status"] == "does not load":
                cells.append("**no load**")
            elif r["status"] != "ok":
                cells.append(r["status"])
            else:
                sz, val = _size(r, algo), r["metrics"].get(primary)
                ratio = f"{sz / bsize:.2f}" if sz and bsize else "?"
                delta = "?" if val is None or base is None else f"{((val - base) if hib else (base - val)) * 100:+.1f}"
                cells.append(f"{ratio} / {delta} / {_fmt(r['agreement'], '.2f')} / {_fmt(r['latency_ratio'], '.2f')}")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return out


def _algo(rs: list[dict[str, Any]]) -> str:
    """brotli11 if every row that has sizes has it, else zstd19 (never mix compressors in a comparison)."""
    sized = [r for r in rs if r["sizes"]]
    return "brotli11" if sized and all(r["sizes"].get("brotli11") for r in sized) else "zstd19"


def _size(r: dict[str, Any], algo: str = "brotli11") -> float | None:
    v = r["sizes"].get(algo)
    return None if v is None else float(v)


def _summary_lines(model: str, rs: list[dict[str, Any]], orig: dict[str, Any], primary: str,
                   hib: bool) -> list[str]:
    """Every peer row that none of our rows dominates (smaller-or-equal compressed size AND a primary
    metric at least as good), plus peers that are clearly faster than our size-matched best."""
    out: list[str] = []
    algo = _algo(rs)
    ours = [r for r in rs if r["kind"] == "ours" and r["status"] == "ok" and _size(r, algo) is not None]
    peers = [r for r in rs if r["kind"] in ("peer", "ortdyn") and r["status"] == "ok"]
    if not ours:
        return out

    def better_or_equal(a: float, b: float) -> bool:
        return a >= b - 1e-9 if hib else a <= b + 1e-9

    for p in peers:
        ps, pm = _size(p, algo), p["metrics"].get(primary)
        if ps is None or pm is None:
            continue
        good = [o for o in ours if o["metrics"].get(primary) is not None
                and better_or_equal(o["metrics"][primary], pm)]
        if not good:
            best = max(ours, key=lambda o: o["metrics"].get(primary, -1e9) if hib else -o["metrics"].get(primary, 1e9))
            out.append(f"* {model}: **{p['label']}** has a better {primary} ({pm:.4f}) than every method of ours "
                       f"(best: {best['label']} {best['metrics'].get(primary, float('nan')):.4f}); "
                       f"agreement with the original {_fmt(p['agreement'])} vs {_fmt(best['agreement'])}.")
            continue
        smallest = min(good, key=lambda o: _size(o, algo) or 0.0)
        os_ = _size(smallest, algo) or 0.0
        if ps < os_:
            out.append(f"* {model}: **{p['label']}** is smaller ({ps / MB:.2f} vs {os_ / MB:.2f} MB {algo}) "
                       f"than our smallest method with an equal-or-better {primary}, {smallest['label']} "
                       f"({primary} {pm:.4f} vs {smallest['metrics'][primary]:.4f}; agreement "
                       f"{_fmt(p['agreement'])} vs {_fmt(smallest['agreement'])}).")
        # speed: among our methods that are not worse and at most 10 % larger, is any as fast as the peer?
        lat_p = p["latency_ratio"]
        comparable = [o for o in good if (_size(o, algo) or 0.0) <= ps * 1.1 and o["latency_ratio"] is not None]
        if lat_p is not None and comparable:
            fastest = min(comparable, key=lambda o: o["latency_ratio"])
            if fastest["latency_ratio"] > lat_p + 0.1:
                out.append(f"* {model}: **{p['label']}** is faster ({lat_p:.2f}x of the original) than every method "
                           f"of ours that is as accurate and at most 10 % larger (fastest: {fastest['label']} "
                           f"{fastest['latency_ratio']:.2f}x).")
    return out


def _plot(by_model: dict[str, list[dict[str, Any]]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(by_model)
    n = len(models)
    cols = min(3, n)
    rows_n = math.ceil(n / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 4.2 * rows_n), squeeze=False)
    markers = {"original": "*", "ours": "o", "peer": "s", "ortdyn": "^"}
    colors = {"original": "black", "ours": "tab:blue", "peer": "tab:red", "ortdyn": "tab:orange"}
    for ax, model in zip(axes.ravel(), models, strict=False):
        rs = by_model[model]
        primary, hib = _primary(model, rs)
        orig = next((r for r in rs if r["variant"] == "original"), None)
        base = orig["metrics"].get(primary) if orig else None
        algo = _algo(rs)
        ys: list[float] = [0.0]
        failed: list[tuple[float, str]] = []
        for r in rs:
            sz = _size(r, algo)
            val = r["metrics"].get(primary)
            if sz is None:
                continue
            if r["status"] != "ok" or val is None or base is None:
                if r["status"] in ("does not load", "run failed"):
                    failed.append((sz, r["variant"]))
                continue
            delta = ((val - base) if hib else (base - val)) * 100
            ys.append(delta)
            ax.scatter(sz / MB, delta, marker=markers[r["kind"]], color=colors[r["kind"]], s=50)
            ax.annotate(r["variant"], (sz / MB, delta), fontsize=7, xytext=(3, 3), textcoords="offset points")
        if failed:
            lo, hi = min(ys), max(ys)
            yf = lo - 0.15 * max(hi - lo, 1.0)
            for sz, _ in failed:
                ax.scatter(sz / MB, yf, marker="x", color="tab:red", s=50)
            ax.annotate("do not load: " + ", ".join(name for _, name in failed), (min(f[0] for f in failed) / MB, yf),
                        fontsize=7, xytext=(3, 5), textcoords="offset points", color="tab:red")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_title(model)
        ax.set_xlabel(f"compressed size, MB ({'brotli-11' if algo == 'brotli11' else 'zstd-19'})")
        ax.set_ylabel(f"{primary} change, points (+ = better)")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    handles = [plt.Line2D([], [], marker=markers[k], color=colors[k], ls="", label=lab)
               for k, lab in (("original", "original"), ("ours", "hatch-shrinkray"), ("peer", "onnx-shrink-ray 0.0.11"),
                              ("ortdyn", "ORT quantize_dynamic"))]
    handles.append(plt.Line2D([], [], marker="x", color="tab:red", ls="", label="does not load in onnxruntime"))
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


CURVES_BEGIN = "<!-- curves: written from CURVES.md by benchmarks/curves.py and run.py; do not edit -->"
CURVES_END = "<!-- /curves -->"


def curves_section() -> list[str]:
    """The ``auto`` size-vs-agreement summary of ``CURVES.md`` (its own run, engine and commands)."""
    src = BENCH_DIR / "CURVES.md"
    if not src.exists():
        return []
    text = src.read_text()
    start = text.find("## Summary table")
    if start < 0:
        return []
    end = text.find("\n## ", start + 1)
    body = text[start:end if end >= 0 else len(text)].splitlines()[1:]
    return [CURVES_BEGIN, "## `auto`: size vs agreement, budget swept (from `CURVES.md`)", "",
            "Curves against `int8` and the predecessor for every corpus model, from "
            "`python -m benchmarks.curves` (calibration inputs disjoint from the test data; plot "
            "`curves.png`, per-point tables and verdicts in `CURVES.md`). The `ours auto` rows in the "
            "model sections above are `run.py`'s (default budgets on generated or one real input) and may come "
            "from an earlier engine (see \"Our engine\" at the top).",
            *body, CURVES_END, ""]


def splice_curves(md_path: Path) -> None:
    """Replace (or insert) the curves section of an existing RESULTS.md without rerunning its rows."""
    if not md_path.exists():
        return
    text = md_path.read_text()
    block = "\n".join(curves_section())
    if not block:
        return
    if CURVES_BEGIN in text and CURVES_END in text:
        a = text.index(CURVES_BEGIN)
        b = text.index(CURVES_END) + len(CURVES_END) + 1
        text = text[:a] + block + text[b:]
    else:
        at = text.find("## Where our methods lose to a peer")
        at = at if at >= 0 else len(text)
        text = text[:at] + block + "\n" + text[at:]
    md_path.write_text(text)
