"""Memory as users pay it (issue 43): per model, what a running process holds once the session is created
and after 100 inferences, the load peak, load time and time per inference, for the original, round-to-nearest
int8 and the memory target's methods, beside the answers each keeps on the task's held-out test data.

    python -m benchmarks.memory run [KEY ...] [--rounds 5]   # shrink (CLI), answers, footprints -> .cache/memory/
    python -m benchmarks.memory report                       # -> benchmarks/MEMORY.md

Every shrink is the CLI (``download.shrink``), the memory target's with the task's recording
(``record_task``: calibration items none of the test items share). Footprints: ``hatch_shrinkray.bench.footprint``,
the probe the build itself runs, one fresh process per (variant, round), rounds interleaved over the variants and
each round starting at another variant, medians; the process first creates a one-node session (what onnxruntime
sets up once per process is not the model's), then the model's; ``session`` is read after handing freed memory
back (``malloc_trim``), ``steady`` after 100 inferences on the first recorded input as it is, CPU times with one
thread. Held-out answers: ``download.evaluate`` (the task's test data, which the fitting never saw).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import CACHE_DIR
from benchmarks.download import _load, _save, cached, evaluate, log, shrink
from benchmarks.record_task import RECORDINGS, record
from benchmarks.variants import engine_key

BENCH_DIR = Path(__file__).resolve().parent
OUT = CACHE_DIR / "memory"
KEYS = ("minilm", "mpnet", "ppocrv6_rec", "silero_vad", "magika")
WHAT = {"ppocrv6_rec": "lines", "silero_vad": "32 ms decisions", "magika": "labels",
        "minilm": "nearest neighbours", "mpnet": "nearest neighbours"}
VARIANTS: dict[str, list[str]] = {
    "int8": ["--method", "int8", "--no-verify"],
    "int8, target memory": ["--method", "int8", "--target", "memory", "--inputs", "{rec}"],
    "int4, target memory": ["--method", "int4", "--target", "memory", "--inputs", "{rec}"],
    "int4, target memory, not verified": ["--method", "int4", "--target", "memory", "--no-verify"],
    "auto, target memory": ["--method", "auto", "--target", "memory", "--inputs", "{rec}"],
}
"""``int8``: round-to-nearest, as every size target ships it without a recording (the do-no-harm floor).
``int4 ..., not verified``: what 4-bit blocks hold where verification would not ship them (their answers
are in the table: the floor decides, not the memory)."""
FIGURES = ("session_kb", "steady_kb", "peak_kb", "load_s", "run_ms")
HEAD = """# Memory as users pay it (`target = "memory"`, issue 43)

What a running process holds once the session is created and after 100 inferences, the load peak,
load time and time per inference, for each model's original, round-to-nearest int8 (what every size
target ships without a recording: the do-no-harm floor) and the memory target's methods, beside the
answers each keeps on the task's held-out test data (data the recording and every fit never saw:
`benchmarks/README.md`, "Tasks").

```bash
.venv/bin/python -m benchmarks.memory run minilm mpnet ppocrv6_rec silero_vad magika   # shrink, answers, footprints
.venv/bin/python -m benchmarks.memory report                                           # this file
```

How it is measured:

* Every variant is the CLI (`hatch-shrinkray shrink MODEL -o OUT ...`, the command under each table),
  the memory target's with the task's recording (`benchmarks/record_task.py`: calibration items that
  none of the test items share). The engine is a `git archive` snapshot of the commit named above
  each table.
* Footprints are the probe the build itself runs (`hatch_shrinkray/verification/memory.py`): one
  fresh process per variant and round, rounds interleaved over the variants (each round starting at
  another), medians of 5 rounds, CPU times with one thread (the machine is shared: 2 cores, other
  jobs running). The process first creates a one-node session, so that what onnxruntime sets up
  once per process (about 10 MB) is not counted as the model's; *session* is what the model's session
  adds once created, read after handing back what loading freed (`malloc_trim`): its weights, graph
  and the kernels' prepacked copies, the part attributable to the weights. *After 100 inferences* is
  read as the process holds it (buffers of the activations added). *Load peak* is the high-water mark
  while the session is created. *ms an inference*: the median over the 100 inferences, on the first
  recorded input.
* *Weights float in memory*: the share of the recorded weights' float32 bytes that a session holds
  as float32 (decoded at load, or kept), from the build's own records.
* Held-out answers: `benchmarks/download.py`'s `evaluate`, each variant's answers (lines, 32 ms
  decisions, labels, nearest neighbours) against the original's.

onnxruntime 1.32.0 (the project venv) for everything here; which releases run which packed kernel
is in `docs/memory.md` ("Where it runs", measured by `tests/test_memory_runtimes.py`).
"""
NOTES = ""
"""What the tables say against the issue's bars, written after a run (empty: only the tables)."""


def first_input(key: str, model: Path) -> dict[str, Any]:
    """The first recorded input of ``key``'s recording (what the build's own probe runs on)."""
    import onnxruntime as ort

    from hatch_shrinkray.bench import load_samples, model_sha256, specs_of

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    samples = load_samples(RECORDINGS / key, specs_of(sess), model_sha256=model_sha256(str(model)),
                           model_name=model.name)
    return dict(samples.feeds[0])


def footprints(files: dict[str, str], feed: dict[str, Any], rounds: int) -> dict[str, dict[str, float]]:
    """Median figures per file, one fresh process per (file, round), interleaved."""
    from hatch_shrinkray.bench import footprint

    got: dict[str, list[Any]] = {n: [] for n in files}
    order = list(files.items())
    for r in range(rounds):
        for name, path in order[r % len(order):] + order[:r % len(order)]:
            got[name].append(footprint(path, feed))
        log(f"footprints: round {r + 1} of {rounds}")
    return {n: {f: statistics.median(getattr(x, f) for x in v) for f in FIGURES} for n, v in got.items()}


def float_share(report: dict[str, Any] | None) -> tuple[int, int] | None:
    """Bytes of the weights float once loaded, and of all of them, from a shrink's report."""
    if report is None:
        return None
    from types import SimpleNamespace

    from hatch_shrinkray.bench import packed

    records = [SimpleNamespace(encoding=t["encoding"], note=t.get("note", ""), original_bytes=t["original_bytes"])
               for t in report["tensors"]]
    total = sum(r.original_bytes for r in records)
    return total - sum(r.original_bytes for r in records if packed(r)), total


def run_model(key: str, rounds: int, fresh: bool) -> dict[str, Any]:
    cache, prev = cached(OUT, key, fresh)
    if prev is not None:
        return prev
    model, rec = corpus.model_path(key), RECORDINGS / key
    recording = record(key, model, rec)
    (CACHE_DIR / "download").mkdir(parents=True, exist_ok=True)  # download.shrink runs its commands there
    shrunk: dict[str, Any] = {}
    for name, args in VARIANTS.items():
        log(f"{key}: {name}")
        t0 = time.perf_counter()
        try:
            shrunk[name] = shrink(model, name, args, rec, OUT / "work" / key)
        except RuntimeError as exc:
            shrunk[name] = {"error": str(exc)[-800:], "seconds": time.perf_counter() - t0,
                            "command": "hatch-shrinkray shrink MODEL -o OUT " + " ".join(
                                a.format(rec="REC") for a in args)}
    files = {n: v["file"] for n, v in shrunk.items() if "file" in v}
    answers = evaluate(key, model, files)
    feed = first_input(key, model)
    memory = footprints({"original": str(model), **files}, feed, rounds)
    result = {"key": key, "engine": engine_key(), "model": str(model), "recording": recording, "variants": shrunk,
              "answers": answers, "memory": memory, "rounds": rounds,
              "sizes": {n: Path(p).stat().st_size for n, p in {"original": str(model), **files}.items()},
              "float": {n: float_share(v.get("report")) for n, v in shrunk.items() if "file" in v}}
    _save(cache, result)
    return result


def _mb(kb: float) -> str:
    return f"{kb / 1000:.1f}"


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def table(r: dict[str, Any]) -> list[str]:
    o = r["memory"]["original"]
    ans = r["answers"]
    rows = ["| variant | file MB | session MB (x original) | after 100 inferences MB (x) | load peak MB | "
            "load CPU s (x) | ms an inference, CPU (x) | weights float in memory | held-out " + WHAT[r["key"]]
            + " as the original's | task metric |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("original", *(n for n in VARIANTS if n in r["variants"])):
        if name != "original" and "file" not in r["variants"][name]:
            said = r["variants"][name]["error"].strip().splitlines()
            err = next((f"verification fails: {ln.split('FAIL: ', 1)[1]}" for ln in said if "FAIL: " in ln), said[-1])
            err = err[:160].replace("|", "/")
            rows.append(f"| {name} | did not ship: {err} |||||||||")
            continue
        m = r["memory"][name]
        share = r["float"].get(name)
        floats = "100%" if name == "original" else (f"{100 * share[0] / share[1]:.0f}% ({share[0] / 1e6:.1f} MB)"
                                                    if share and share[1] else "-")
        a = ans[name]
        same = "-" if name == "original" else f"{a['same']}/{a['n']}"
        metric = ", ".join(f"{k} {v:.4g}" for k, v in list(a["metrics"].items())[:2])
        cells = [f"{_mb(m[f])} ({_x(m[f], o[f])})" for f in ("session_kb", "steady_kb")]
        cells += [_mb(m["peak_kb"]), f"{m['load_s']:.3f} ({_x(m['load_s'], o['load_s'])})",
                  f"{m['run_ms']:.2f} ({_x(m['run_ms'], o['run_ms'])})"]
        cells += [floats, same, metric]
        rows.append(f"| {name} | {r['sizes'][name] / 1e6:.2f} | " + " | ".join(cells) + " |")
    return rows


def report() -> Path:
    results = [_load(OUT / "results" / f"{k}.json") for k in KEYS]
    results = [r for r in results if r]
    lines = [HEAD.rstrip(), *(["", NOTES.rstrip()] if NOTES else [])]
    for r in results:
        lines += ["", f"## {r['key']} ({corpus.BY_KEY[r['key']].description})", "",
                  f"Engine `{r['engine']}`, {r['rounds']} interleaved fresh-process rounds, medians.", "", *table(r)]
        for name, v in r["variants"].items():
            if "file" in v:
                lines.append(f"- {name}: `{v['command']}`")
    out = BENCH_DIR / "MEMORY.md"
    out.write_text("\n".join(lines) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "report"))
    ap.add_argument("keys", nargs="*", default=list(KEYS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fresh", action="store_true", help="run again even if cached for this engine")
    args = ap.parse_args()
    if args.what == "run":
        for key in args.keys:
            run_model(key, args.rounds, args.fresh)
    print(report())


if __name__ == "__main__":
    main()
