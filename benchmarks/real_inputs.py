"""Recorded real inputs, used as a user would use them: ``int8`` round-to-nearest (no inputs) vs ``int8``
with the recording (output-aware rounding, same bytes) vs ``auto`` with the recording, judged on each
task's own test data, which the recording never saw.

    python -m benchmarks.real_inputs [KEY ...] [--repeats 3] [--report-only]

-> ``benchmarks/REAL_INPUTS.md``. Per model (PP-OCRv6/v4 rec, Silero VAD, Magika):

1. ``hatch-shrinkray record --output DIR -- python -m benchmarks.record_task KEY`` runs the task's
   pipeline on calibration data (``record_task``: other lines, other sentences, other files);
2. every variant is a ``hatch-shrinkray shrink`` subprocess (``python -m hatch_shrinkray``, the same
   command line), run ``--repeats`` times interleaved (variant order rotates each round); CPU time
   (user + system of the child, from ``os.wait4``) and wall time, medians; the outputs of the repeats
   must be byte-identical;
3. each output runs the task on its test data: share of answers identical to the original's
   (OCR lines, VAD 32 ms decisions, Magika labels), the task metric, the file size.

``auto`` without inputs must exit non-zero with a one-line error; that is checked too.

The engine is a ``git archive`` snapshot of ``HSR_BENCH_ENGINE`` (default ``HEAD``; ``worktree`` = the
work tree as installed), put first on ``PYTHONPATH`` of every command, so a run names one commit and
edits made while it runs do not leak in. Results are cached per engine in ``.cache/real_inputs/``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import CACHE_DIR, json_default, make_session, sha256_file
from benchmarks.record_task import KEYS, RECORDINGS, record
from benchmarks.variants import ENGINE_REV, engine_dir

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
OUT = CACHE_DIR / "real_inputs"
CLI = [sys.executable, "-m", "hatch_shrinkray"]
VARIANTS: dict[str, list[str]] = {
    "int8 (no inputs)": ["--method", "int8"],
    "int8 + recording": ["--method", "int8", "--inputs", "{rec}"],
    "auto + recording": ["--method", "auto", "--inputs", "{rec}"],
}
BASELINE = {"int8 asymmetric + recording": ["--method", "int8", "--scheme", "asymmetric", "--inputs", "{rec}"]}
"""Round-to-nearest verified on the same recording (the asymmetric scheme is the int8 variant that stays
round-to-nearest with real inputs, and it verifies on every sample): a timing baseline only."""
NO_INPUTS = ["--method", "auto"]
WHAT = {"ppocrv6_rec": "lines", "ppocrv4_rec": "lines", "silero_vad": "32 ms decisions", "magika": "labels"}


@functools.cache
def engine() -> tuple[Path | None, dict[str, str]]:
    """The engine snapshot (made on first use) and the environment that puts it first on the path."""
    snapshot = engine_dir()
    path = os.pathsep.join(p for p in (str(snapshot or ""), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return snapshot, {**os.environ, "PYTHONPATH": path}


def engine_id() -> str:
    """The snapshot's commit, or for the work tree ``git describe --dirty`` and a hash of its sources."""
    snapshot = engine()[0]
    if snapshot is not None:
        return snapshot.name[:12]
    desc = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO,
                          check=True).stdout.strip()
    h = hashlib.sha256()
    for p in sorted((REPO / "hatch_shrinkray").rglob("*.py")):
        h.update(p.relative_to(REPO).as_posix().encode() + b"\0" + p.read_bytes())
    return f"{desc}-{h.hexdigest()[:8]}"


def timed(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``: exit code, wall time, the child's own CPU time (``os.wait4``), its output."""
    t0 = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)  # not the work tree: `python -m` puts the working directory first
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=OUT, env=engine()[1])
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "wall": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime,
            "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")}


def shrink_args(model: Path, dest: Path, args: list[str], rec_dir: Path) -> list[str]:
    """The ``shrink`` command; its JSON report goes beside ``dest`` (made here: the CLI does not create
    the directory of ``--json`` when the shrink fails first)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    return [*CLI, "shrink", str(model), "-o", str(dest), "--force", "--json", f"{dest}.json",
            *[a.format(rec=rec_dir) for a in args]]


def run_variants(key: str, model: Path, rec_dir: Path, work: Path, repeats: int) -> dict[str, Any]:
    """Every variant ``repeats`` times, interleaved (order rotated per round)."""
    commands = {**VARIANTS, **BASELINE}
    names = list(commands)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    digests: dict[str, set[str]] = {n: set() for n in names}
    for r in range(repeats):
        for n in names[r % len(names):] + names[: r % len(names)]:
            dest = work / _slug(n)
            run = timed(shrink_args(model, dest, commands[n], rec_dir))
            out = dest / model.name
            run["output"] = str(out) if out.exists() and run["rc"] == 0 else None
            if run["output"]:
                digests[n].add(sha256_file(out))
            runs[n].append(run)
    result: dict[str, Any] = {}
    for n in names:
        last = runs[n][-1]
        report = json.loads(Path(f"{work / _slug(n)}.json").read_text()) if last["rc"] == 0 else []
        result[n] = {"rc": [x["rc"] for x in runs[n]], "cpu": [x["cpu"] for x in runs[n]],
                     "wall": [x["wall"] for x in runs[n]], "identical_outputs": len(digests[n]) <= 1,
                     "output": last["output"], "report": report[0] if report else None,
                     "stderr": last["stderr"][-3000:], "stdout": last["stdout"][-3000:]}
        log(f"{key} {n}: rc {result[n]['rc']} cpu {statistics.median(result[n]['cpu']):.1f} s")
    return result


def _slug(name: str) -> str:
    return "-".join(w for w in name.replace("+", " ").replace("(", " ").replace(")", " ").split())


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def unverified_int8(key: str, model: Path, work: Path, rec_dir: Path) -> str:
    """The int8 round-to-nearest file even where its verification on generated inputs fails (same bytes:
    verification never changes them), so its task figures can still be shown."""
    dest = work / "int8" / "unverified"
    run = timed(shrink_args(model, dest, ["--method", "int8", "--no-verify"], rec_dir))
    if run["rc"] != 0:
        raise RuntimeError(f"{key}: int8 --no-verify failed: {run['stderr'][-500:]}")
    return str(dest / model.name)


def no_inputs(model: Path, work: Path, rec_dir: Path) -> dict[str, Any]:
    run = timed(shrink_args(model, work / "auto" / "none", NO_INPUTS, rec_dir))
    lines = [ln for ln in run["stderr"].splitlines() if ln.strip()]
    return {"rc": run["rc"], "stderr": run["stderr"].strip(), "lines": len(lines),
            "output_written": (work / "auto" / "none" / model.name).exists()}


def task_for(key: str, model: Path) -> Any:
    from benchmarks.task_specs import TASKS

    return TASKS[key].build(model, False)


def evaluate(key: str, model: Path, files: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Task figures on the test data for the original and each file."""
    from benchmarks.task_specs import TASKS

    spec = TASKS[key]
    task = task_for(key, model)
    ref = task.run(make_session(model, threads=2), model)
    out = {"original": {"metrics": ref.metrics, "identical": 1.0, "n": len(ref.decisions),
                        "bytes": model.stat().st_size}}
    for name, path in files.items():
        got = task.run(make_session(path, threads=2), Path(path))
        same = sum(a == b for a, b in zip(ref.decisions, got.decisions, strict=True))
        out[name] = {"metrics": got.metrics, "identical": same / len(ref.decisions), "same": same,
                     "n": len(ref.decisions), "bytes": Path(path).stat().st_size, "primary": spec.primary}
    return out


def run_model(key: str, repeats: int, fresh: bool) -> dict[str, Any]:
    model = corpus.model_path(key)
    eng = engine_id()
    cache = OUT / "results" / f"{key}.json"
    if cache.exists() and not fresh:
        prev: dict[str, Any] = json.loads(cache.read_text())
        if prev.get("engine") == eng and prev.get("repeats") == repeats:
            return prev
    rec_dir = RECORDINGS / key
    rec = record(key, model, rec_dir, env=engine()[1])
    work = OUT / "work" / key
    log(f"{key}: recorded {rec['files']} ({rec['bytes']} bytes); shrinking x{repeats}")
    variants = run_variants(key, model, rec_dir, work, repeats)
    files = {n: v["output"] for n, v in variants.items() if v["output"] and n in VARIANTS}
    if not variants["int8 (no inputs)"]["output"]:
        files["int8 (no inputs)"] = unverified_int8(key, model, work, rec_dir)
    log(f"{key}: evaluating {len(files)} files on the test data")
    result = {"key": key, "engine": eng, "repeats": repeats, "model_bytes": model.stat().st_size,
              "recording": rec, "variants": variants, "no_inputs": no_inputs(model, work, rec_dir),
              "task": evaluate(key, model, files), "load": os.getloadavg()[0],
              "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result, indent=1, default=json_default))
    return result


# ---------------------------------------------------------------- report


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Median CPU and wall time of ``a`` over ``b``'s."""
    return f"{_med(a['cpu']) / _med(b['cpu']):.2f}x / {_med(a['wall']) / _med(b['wall']):.2f}x"


def _verified(v: dict[str, Any]) -> str:
    rep = v.get("report") or {}
    ver = rep.get("verification")
    if v["rc"][-1] != 0:
        first = next((ln for ln in v["stderr"].splitlines() if ln.startswith("error:")), "failed")
        return "**fails**: " + first.split(":", 2)[-1].strip()[:140].replace("|", "/")
    if not ver:
        return "-"
    real = "held-out recorded" if ver.get("real_inputs") else "generated"
    outs = [c for c in ver.get("outputs", []) if c.get("top1") is not None and c.get("positions")]
    worst = min(outs, key=lambda c: c["top1"], default=None)
    agree = f", {worst['agreement_kind']} {100 * worst['top1']:.1f}% of {worst['positions']}" if worst else ""
    return f"ok on {ver.get('samples')} {real} samples{agree}"


NOTES = """## Where the time went, and what changed (issue 10, item 4)

Profiled first, on PP-OCRv6 rec (21.2 MB) with its recording (`py-spy record -r 100 -f raw -- python -m
hatch_shrinkray shrink MODEL -o OUT [--method auto] --inputs DIR`, inclusive shares of the samples), on the engine
as merged from main (`d95976f`):

* `int8` + recording: 8.9 s wall, 10.8 s CPU at load 4 (round-to-nearest: 1.1 s / 1.2 s). Activation moments
  24% (`Moments.add`), GPTQ and its scale search 28% (`output_error` 12.5%: 16 products with the full `H` per
  weight), the probe session's runs 15%, the verification's comparison 10%.
* `auto` + recording: 518 s wall, 344 s CPU at load 5-7. `budget.deviation` 56%, of it `compare` 52%: the
  original's side (float64 copies, a full sort for the top-2 of 18,711 classes per position) derived again for
  each of 271 runs; single-tensor runs 66% (about 235 runs: every rung of every weight); the candidates' GPTQ 10%.

Changes, each measured before it stayed (the tables above are the result):

* **The original's outputs prepared once per search** (`compare.expect`, `budget.Baseline`): float64 values,
  norms, top-1 classes, near-ties and the floored margins; each candidate then costs two dot products (rel-L2 and
  cosine from `|x|^2 + |y|^2 - 2 x.y`, the same figures up to 1e-13) and one argmax. Same deviations as before
  (checked on real outputs).
* **Fewer single-tensor runs**: every weight's int8 is measured alone, its rungs below int8 only for the largest
  weights that hold half of the bytes (where the size is won), the other rungs are estimated from the nearest
  measured one by the ratio of their calibrated output errors; PP-OCRv6: 104 runs instead of 271.
* **Screened search**: an assignment (bisection point, uniform rung, clean-up move) runs on all calibration feeds
  only after it keeps the budget on the 8 single-tensor feeds.
* **GPTQ**: scale factors chosen by each input feature's activation energy (the diagonal of `H`) instead of 16
  products with the full `H`: cheaper *and* better (output error left by GPTQ on PP-OCRv6's weights: 0.244 of
  round-to-nearest's instead of 0.266; v4: 0.053 instead of 0.057; better at every width 4-10 bits); GPTQ on the
  transposed weight in 16-column blocks; one Cholesky factorisation and a triangular inverse by halves instead of
  two factorisations and a general inverse (1 s on PP-OCRv4's 2880-feature convolution); output errors in float32
  products with float64 sums. Same codes as the old loop up to rounding ties (tests/test_fast_paths.py).
* **Calibration rows**: 16 per input feature over all samples instead of up to 2048 per sample (v6: 96.5% of
  lines identical with int8 + recording vs 93.0% with every row; v4 83.0% vs 84.0%: one line).
* **One BLAS thread and non-spinning onnxruntime sessions** (`numerics/threads.py`, threadpoolctl): on the
  loaded VM OpenBLAS's and onnxruntime's busy-waiting threads made `int8` + recording take 17-19 s of CPU instead
  of 4.6 s (`OPENBLAS_NUM_THREADS=1` vs 2, same run) and 2x the wall time; the codes no longer depend on the core count.

Before and after, PP-OCRv6 rec with its recording, one run each, old and new engine interleaved on the same VM
(load 2-3), each engine a `git archive` snapshot first on `PYTHONPATH`, run from outside the work tree:
`PYTHONPATH=SNAPSHOT python -m hatch_shrinkray shrink ppocrv6_rec.onnx -o OUT --force [--method M --inputs DIR]`
(old = `d95976f`, main as merged before this work; new = this branch at `4b66d78`, before the issue-14 merge):

| command | old: wall / CPU | new: wall / CPU |
|---|---|---|
| `--method int8` (no inputs) | 1.1 s / 1.0 s | 0.8 s / 0.8 s |
| `--method int8 --inputs DIR` | 17.2 s / 18.2 s | 2.9 s / 2.9 s |
| `--method auto --inputs DIR` | 125.8 s / 208.1 s | 26.8 s / 40.9 s |

What holds and what does not:

* int8 + recording beats round-to-nearest by far more than the +5 points on both recognisers, at the same bytes.
* `auto` + recording meets >= 90% at <= 35% on PP-OCRv6 and **misses the size on PP-OCRv4**: 49.1% of the file
  for 96.0% of lines with the engine as merged with issue 14, whose load cap (`LOAD_FACTOR`: an assignment may
  fold at most 1.25x the bytes of every weight at int8) moves the packed int10/int12 weights this model needs to
  16 bits; on the same recording just before that merge (engine `3c67f01`) it was 37.8% for 94.5%. Either way
  7.4% of the file is float32 tensors below `min-elements` (16384) that no method touches, and its CTC head and
  480-channel convolutions need 10-12 bits to keep 0.998 of the CTC positions on 18 calibration lines. Measured
  alternatives before the load cap (same recording; one analysis, `auto.finish` per budget): `--budget-agreement
  0.995` -> 34.7% / 90.0% of lines (34.5% / 93.0% when every weight's low rungs are measured), `--min-elements
  4096` -> 35.1% / 95.0%, `--min-elements 4096 --budget-agreement 0.996` -> 33.3% / 96.0%; PP-OCRv6 at 0.995:
  25.3% / 91.5%. The default budget was left at 0.998: a lower one passed both minimums by a line or two on this
  data, not a margin to change every user's default on; how the load cap should weigh against size is issue
  14's call.
* The 3x time target of `int8` with output-aware rounding is **missed against round-to-nearest without inputs**
  (3.7-4.0x on the recognisers, 3.2x on Magika): that baseline verifies on 8 generated samples and takes
  0.6-0.8 s, while the recording costs 18 probe runs of the original (the activations), the moments and GPTQ
  of 38 weights and a verification on real lines; before this work it was 9x (load 4) to 18x (load 2-3, table
  above). Against round-to-nearest verified on the same recording (`--scheme asymmetric`, which verifies on
  every sample rather than a held-out quarter) it costs 0.3-1.4x (the table's second ratio; on PP-OCRv4 that
  baseline fails its verification, and its time includes the sensitivity ranking behind the failure's hint).
* `auto` per 20 MB, CPU / wall: 40 s / 38 s on PP-OCRv6 (was 208 s of CPU at the same load, 344 s at load 5-7),
  60 s / 53 s on PP-OCRv4 (10.9 MB: 33 s of CPU, at the limit), 56 s / 53 s on Magika (3.2 MB: start-up and
  loading weigh most), 11 s on Silero VAD. At load 9 (other engineers' runs) PP-OCRv6 took 75-105 s of wall
  time for the same 46-48 s of CPU.
* Silero VAD: with 32 recorded chunks (the old default) `auto` fitted on 24 and failed its own verification on
  the 8 held out (rel-L2 0.18 on the speech probability); the recorder now keeps 256 samples by default (8 MB
  still bounds large inputs) and it passes (larger than `int8` here, 39.6% vs 34.2%, at 99.97% vs 99.95% of
  decisions).
* `hatch-shrinkray shrink ... -o OUT --json OUT/r.json` when the shrink fails before `OUT` exists (seen with `auto`
  without inputs): a traceback before issue 11 was merged, now a second one-line error ("cannot write the
  report"); the benchmark writes the JSON beside `OUT`. Left to `cli.py`'s owners."""


def write_report(results: list[dict[str, Any]], path: Path = BENCH_DIR / "REAL_INPUTS.md") -> Path:
    """The tables and verdicts from ``results`` (as ``run_model`` returns them), with the command that
    measures them (``--report-only`` only rewrites)."""
    keys = [r["key"] for r in results]
    argv = [*(keys if keys != list(KEYS) else []), "--repeats", str(results[0].get("repeats", 3))]
    import onnxruntime

    lines = [
        "# Recorded real inputs: int8 vs int8 with the recording vs auto with the recording (issue 10)", "",
        f"Engine `{results[0]['engine']}` (`HSR_BENCH_ENGINE`, a `git archive` snapshot; every command is "
        "`python -m hatch_shrinkray ...`, the same command line as the `hatch-shrinkray` script). "
        f"Python {platform.python_version()}, onnxruntime {onnxruntime.__version__}, on the shared 2-vCPU VM "
        "(other engineers' tests and benchmarks ran at the same time: load average "
        + ", ".join(f"{r['key']} {r['load']:.1f}" for r in results) + " when each model finished).", "",
        "```sh", "apt-get install -y espeak-ng fonts-dejavu-core   # speech and fonts for the task data",
        ".venv/bin/pip install pillow scipy scikit-learn   # the tasks' own dependencies",
        f"{'' if ENGINE_REV == 'HEAD' else f'HSR_BENCH_ENGINE={ENGINE_REV} '}"
        f".venv/bin/python -m benchmarks.real_inputs {' '.join(argv)}".rstrip(), "```", "",
        "What the command does, per model: records inputs by running the task's own pipeline on calibration "
        "data with the product's recorder, exactly as a user would "
        "(`hatch-shrinkray record --output DIR -- python -m benchmarks.record_task KEY`; the calibration data "
        "is disjoint from the test data: other rendered lines, other spoken sentences, other files of this "
        "machine); then runs each variant as `hatch-shrinkray shrink MODEL -o OUT --method M [--inputs DIR]`, "
        "interleaved, and judges every output on the task's test data (`benchmarks/tasks/*.py`, as in "
        "`RESULTS.md`). The engine holds out every 4th recorded sample: `int8`/`auto` fit on the rest and "
        "verify on the held-out part. Times: medians over the repeats of the child's CPU time (user + system, "
        "all threads) and wall time, whole command (start-up, load, shrink, verification, write).", "",
    ]
    head = ["## Summary", "", "| model | file | recording | variant | size | identical answers (test data) | "
            "task metric | verification (built-in) | CPU s | wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    timing = ["## Time budget", "", "Target (issue 10, item 4): `int8` with output-aware rounding shrinks and "
              "verifies in <= 3x the time of round-to-nearest; `auto` takes <= 60 s per 20 MB of model.", "",
              "| model | MB | int8 (no inputs) CPU / wall | int8 + recording CPU / wall | ratio (CPU / wall) | "
              "int8 asymmetric + recording CPU / wall | ratio to it (CPU / wall) | auto + recording CPU / wall | "
              "auto s per 20 MB (CPU / wall) |", "|---|---|---|---|---|---|---|---|---|"]
    refusals = ["## `auto` without real inputs", "", "| model | exit code | stderr | output written |",
                "|---|---|---|---|"]
    for r in results:
        key = r["key"]
        task = r["task"]
        orig = task["original"]
        primary = next((v["primary"] for v in task.values() if "primary" in v), "")
        mb = r["model_bytes"] / 1e6
        rec = r["recording"]
        rec_text = f"{len(rec['files'])} file, {rec['bytes'] / 1e6:.2f} MB on disk; " + _samples(rec["summary"])
        head.append(f"| {key} | {mb:.2f} MB | {rec_text} | original | 100% | - | {primary} "
                    f"{orig['metrics'].get(primary, float('nan')):.4f} | - | - | - |")
        for name, v in r["variants"].items():
            t = task.get(name) if name in VARIANTS else None
            if t is None:
                continue
            ident = f"{100 * t['identical']:.1f}% ({t['same']}/{t['n']} {WHAT[key]})"
            metric = f"{t['metrics'].get(primary, float('nan')):.4f}"
            head.append(f"| | | | {name} | {100 * t['bytes'] / r['model_bytes']:.1f}% | {ident} | {metric} | "
                        f"{_verified(v)} | {_med(v['cpu']):.1f} | {_med(v['wall']):.1f} |")
        v8, vr, va = (r["variants"][n] for n in VARIANTS)
        vb = r["variants"].get(next(iter(BASELINE)), {"cpu": [], "wall": []})
        timing.append(f"| {key} | {mb:.1f} | {_med(v8['cpu']):.1f} / {_med(v8['wall']):.1f} | "
                      f"{_med(vr['cpu']):.1f} / {_med(vr['wall']):.1f} | {_ratio(vr, v8)} | "
                      f"{_med(vb['cpu']):.1f} / {_med(vb['wall']):.1f} | {_ratio(vr, vb)} | "
                      f"{_med(va['cpu']):.1f} / {_med(va['wall']):.1f} | "
                      f"{_med(va['cpu']) * 20 / mb:.0f} / {_med(va['wall']) * 20 / mb:.0f} |")
        n = r["no_inputs"]
        refusals.append(f"| {key} | {n['rc']} | `{n['stderr'][:300]}` ({n['lines']} line) | "
                        f"{'yes' if n['output_written'] else 'no'} |")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join([*lines, *verdicts(results), "", *head, "", *timing, "", *refusals, "", NOTES, ""]))
    tmp.replace(path)
    return path


def verdicts(results: list[dict[str, Any]]) -> list[str]:
    """The issue's minimums, computed from the tables: held or missed."""
    out = ["## The issue's minimums (computed from the tables below)", ""]
    for r in results:
        task, key = r["task"], r["key"]
        names = list(VARIANTS)
        if not all(n in task for n in names):
            continue
        rtn, rec, auto = (task[n] for n in names)
        if key.endswith("_rec"):
            gain = 100 * (rec["identical"] - rtn["identical"])
            size = auto["bytes"] / r["model_bytes"]
            held = auto["identical"] >= 0.9 and size <= 0.35
            out.append(f"* **{key}**: int8 + recording keeps {gain:+.1f} points of identical lines over "
                       f"round-to-nearest at the same bytes (minimum +5): **{'met' if gain >= 5 else 'missed'}**. "
                       f"auto + recording keeps {100 * auto['identical']:.1f}% at {100 * size:.1f}% of the file "
                       f"(minimum >= 90% at <= 35%): **{'met' if held else 'missed'}**.")
        else:
            out.append(f"* **{key}** ({WHAT[key]}): round-to-nearest {100 * rtn['identical']:.2f}%, int8 + recording "
                       f"{100 * rec['identical']:.2f}%, auto + recording {100 * auto['identical']:.2f}% at "
                       f"{100 * auto['bytes'] / r['model_bytes']:.1f}% of the file (no minimum set).")
        n = r["no_inputs"]
        first = n["stderr"].splitlines()[0] if n["stderr"] else ""
        written = "an output was written" if n["output_written"] else "no output"
        out.append(f"  `auto` without inputs: exit code {n['rc']}, "
                   f"{'one error line' if first.startswith('error:') else 'no error line'} (stderr: {n['lines']} "
                   f"lines with the CLI's batch summary), {written}.")
    return out


def _samples(summary: str) -> str:
    """``23 samples of 64 calls`` from ``hatch-shrinkray record``'s table."""
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[1].endswith(".npz") and parts[2].isdigit():
            return f"{parts[2]} samples of {parts[3]} calls"
    return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("keys", nargs="*", default=list(KEYS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fresh", action="store_true", help="re-run even when results of this engine are cached")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--results-dir", type=Path, default=OUT / "results",
                    help="where --report-only reads KEY.json (default: the cache)")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "REAL_INPUTS.md", help="the report to write")
    args = ap.parse_args()
    results = []
    for key in args.keys:
        cache = args.results_dir / f"{key}.json"
        if args.report_only:
            results.append(json.loads(cache.read_text()))
            continue
        results.append(run_model(key, args.repeats, args.fresh))
    print(write_report(results, args.out))


if __name__ == "__main__":
    main()
