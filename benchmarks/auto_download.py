"""``auto`` against the download (issue 20, items 3-4): per model, the bytes users pay (raw, wheel, brotli),
identical answers on the task's held-out test data, shrink time (wall and CPU) and session creation
time, for round-to-nearest int8, int8 with the recording, ``auto`` (wheel and web targets), fp16, onnxruntime's
``quantize_dynamic`` and 4-bit MatMulNBits (ours ``dynamic`` / ``int4``), and onnx-shrink-ray 0.0.11 (default and
per-channel), side by side in one run.

    python -m benchmarks.auto_download run [KEY ...]     # shrink + evaluate (cached per engine commit)
    python -m benchmarks.auto_download report            # -> benchmarks/AUTO_DOWNLOAD.md, auto_download.png
    python -m benchmarks.auto_download loads [KEY ...]   # load times again, on a quiet machine
    python -m benchmarks.auto_download runtimes [KEY ...] [--reps 5]   # load and memory in every runtime

Recordings are ``benchmarks/record_task.py``'s (the task pipeline on calibration items none of the test
items share), as in ``download.py``; every shrink is the CLI (``download.shrink``). Load time: session
creation CPU time (``time.process_time`` around ``InferenceSession``), median of ``LOADS`` runs interleaved
over the variants, in this venv's onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import CACHE_DIR, engine_notes, make_session, sha256_file
from benchmarks.download import _load, _save, evaluate, log, shrink, sizes_of
from benchmarks.record_task import RECORDINGS, record
from benchmarks.variants import PEER_VENV, engine_key, ensure_peer_venv

BENCH_DIR = Path(__file__).resolve().parent
OUT = CACHE_DIR / "auto_download"
KEYS = ("ppocrv6_rec", "ppocrv4_rec", "magika", "silero_vad", "ppocrv4_det", "minilm")
LOADS = 7
BROTLI_KEYS = ("ppocrv6_rec",)
"""Models whose files get brotli 11 measured (slow: ~0.3 MB/s); the others show the LZMA estimate."""
WHAT = {"ppocrv6_rec": "lines", "ppocrv4_rec": "lines", "silero_vad": "32 ms decisions", "magika": "labels",
        "ppocrv4_det": "pages (identical = every DB box of the page the same)",
        "minilm": "sentences' nearest neighbours (cosine, in the pool of 130)"}

OURS: dict[str, list[str]] = {
    "int8, round-to-nearest": ["--method", "int8", "--no-verify"],
    "int8 with the recording": ["--method", "int8", "--inputs", "{rec}"],
    "auto, target wheel": ["--method", "auto", "--inputs", "{rec}"],
    "auto, target web": ["--method", "auto", "--inputs", "{rec}", "--target", "web"],
    "fp16": ["--method", "fp16", "--no-verify"],
    "quantize_dynamic (ours dynamic)": ["--method", "dynamic", "--no-verify"],
    "MatMulNBits 4-bit (ours int4)": ["--method", "int4", "--no-verify"],
}
PEER: dict[str, list[str]] = {
    "onnx-shrink-ray default": ["--action", "integer_weights"],
    "onnx-shrink-ray per-channel": ["--action", "integer_weights", "--per-channel"],
}


def peer(model: Path, name: str, args: list[str], work: Path) -> dict[str, Any]:
    py = PEER_VENV / "bin" / "python"
    if not py.exists():
        py = ensure_peer_venv()
    dest = work / "-".join(name.split())
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [str(py), "-m", "onnx_shrink_ray.shrink", *args, "--output_dir", str(dest), "--output_suffix",
           "_peer.onnx", str(model)]
    t0 = time.perf_counter()
    before = os.times()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: {proc.stderr[-2000:]}")
    out = next(dest.glob("*_peer.onnx"))
    return {"file": str(out), "seconds": time.perf_counter() - t0,
            "cpu": (after.children_user + after.children_system) - (before.children_user + before.children_system),
            "report": None, "command": "python -m onnx_shrink_ray.shrink " + " ".join(args) + " MODEL"}


def ours(model: Path, name: str, args: list[str], rec: Path, work: Path) -> dict[str, Any]:
    before = os.times()
    try:
        got = shrink(model, name, args, rec, work)
    except RuntimeError as exc:
        return {"error": str(exc)[-600:], "command": "hatch-shrinkray shrink MODEL -o OUT " + " ".join(
            a.format(rec="REC") for a in args)}
    after = os.times()
    got["cpu"] = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return got


def load_times(files: dict[str, str], rounds: int = LOADS) -> dict[str, float]:
    """Median session creation CPU seconds per file, ``rounds`` rounds interleaved over the files, each
    round starting at another file."""
    times: dict[str, list[float]] = {n: [] for n in files}
    order = list(files.items())
    for r in range(rounds):
        for name, path in order[r % len(order):] + order[:r % len(order)]:
            t0 = time.process_time()
            make_session(path, threads=1)
            times[name].append(time.process_time() - t0)
    return {n: statistics.median(v) for n, v in times.items()}


FRESH = ("original", "int8, round-to-nearest", "int8 with the recording", "auto, target wheel", "auto, target web")
"""The files whose loads are measured in fresh processes too (``fresh-loads``)."""


def fresh_load_times(files: dict[str, str], rounds: int) -> dict[str, float]:
    """Median session creation CPU seconds per file, each load alone in a fresh process
    (``load_probe.py``: nothing cached from an earlier session, as a user's program meets it),
    ``rounds`` rounds interleaved over the files, each round starting at another file."""
    probe = str(Path(__file__).resolve().parent / "load_probe.py")
    times: dict[str, list[float]] = {n: [] for n in files}
    order = list(files.items())
    for r in range(rounds):
        for name, path in order[r % len(order):] + order[:r % len(order)]:
            out = subprocess.run([sys.executable, probe, path], capture_output=True, text=True, check=True).stdout
            times[name].append(float(json.loads(out.strip().splitlines()[-1])["cpu"]))
    return {n: statistics.median(v) for n, v in times.items()}


NOTES_ENGINES = ("c463ea776ffa", "f277ee7f2d2f", "f2f133e1723b")
"""The engines whose results the notes below were written about (``engine_notes``)."""
NOTES = """## Where issue 33's bars stand (2026-11-27, sixth and seventh sessions: the tables above)

One `run` of all six models on a quiet machine, 20:35-20:47 UTC, engine `f277ee7` (the small Conv/MatMul
weights below `min-elements` in `auto`'s search, `auto`'s int8 scales in fp16, the original's web size
estimated where the shrunk file is clearly smaller: DOWNLOAD.md's last two sections, BUILD_TIME.md's
last). Loads again with `loads KEYS --reps 40` right after. The web column is brotli 11 for PP-OCRv6 rec
and the LZMA estimate (`~`) for the others. The table of every runtime (`runtimes`) was not run again.
Silero VAD's section was run again on engine `c463ea7` (`run silero_vad --fresh`, `loads silero_vad --reps
40`): the same bytes, its guard's words from the change below. PP-OCRv6 rec, PP-OCRv4 rec and PP-OCRv4 det
were run again on engine `f2f133e` (`run ppocrv4_det ppocrv4_rec ppocrv6_rec --fresh`, then `loads ... --reps
40`), after a small weight's scales went back to float32 storage (the fp16 values, no `Cast`: DOWNLOAD.md's
last section). Every model then got `fresh-loads KEYS --reps 61`, 22:45-23:07 UTC, nothing else running.

* **Magika**, `auto` <= 0.636 MB at >= round-to-nearest int8's labels: **not met**. `auto`'s plan is now
  kept (int8 for its three weights, fp16 scales, small tensors in fp16; held-out rel-L2 5.97e-03 against
  round-to-nearest's 6.64e-03): 0.712 MB (0.99x int8's) at 358/358. onnx-shrink-ray's default is 0.636 MB at
  357/358. Every encoding at or below 0.64 MB measured on 507 held-out files changes more labels than
  int8 (DOWNLOAD.md, "Magika, each alone on held-out files"); decision 5 calls int8 there a result.
* **PP-OCRv6 rec**, `auto --target web` <= 2.87 MB brotli at >= 171/200: **met**, 2.760 MB (0.56x int8's
  brotli, 0.77x onnx-shrink-ray default's 3.590) at 174/200 (2.738 MB on `f277ee7`: the web plan moved with
  the small weights' scale bytes). `auto` (wheel) <= 0.70x int8's wheel member at the same floor: **met**,
  3.096 MB against 5.085 (0.61x) at 174/200. The margin (110 KB) is smaller than the plan moves between two
  engines that differ in a scale's last bits (DOWNLOAD.md, "int8 scales in fp16").
* **No `auto` larger in its target than onnx-shrink-ray's default at >= its answers**: **met**. Where the
  peer's file is smaller (Magika 0.636 against 0.712 MB, MiniLM 15.582 against 20.959 MB), it keeps fewer
  answers (357/358, 128/130); PP-OCRv6 rec's `auto` is smaller in both targets at more lines; on PP-OCRv4
  rec and det and Silero VAD the peer's files do not load.
* **None below round-to-nearest int8's answers**: **met** on all six (PP-OCRv6 rec 174 against 171,
  PP-OCRv4 rec 157 against 129, PP-OCRv4 det 15 and 17 against 13 of 30 pages, Magika, Silero VAD and MiniLM
  equal).
* **`auto` <= 3x the wall time of int8 with the recording: met on all six, in both targets**, from one
  interleaved run (SHRINK_TIME.md: `python -m benchmarks.shrink_time --engines HEAD --runs 3 --web --keys
  ...`, engine `e133dbc`, medians of 3 runs in fresh processes, 2026-11-27 22:29-22:43 UTC, nothing else
  running; the table's own wall column above is one run on the engine it names). Against int8 with the
  recording in the wheel target: `auto` 1.61x (MiniLM) to 2.70x (Silero VAD, 5.2 s against 1.9 s);
  `auto --target web` 1.35x (MiniLM) to 2.33x (Silero VAD). Two changes of the seventh session got there:
  * Silero VAD went from 8 s (its row before) to 5.2 s: where the plan with the small weights loses, the
    guard now judges that plan's other weights with the small weights back at float32 instead of running
    a second search (DOWNLOAD.md, "Small weights in `auto`'s search"); the shipped bytes are unchanged
    (round-to-nearest int8 on both targets).
  * MiniLM `--target web` went from 54.5 s to 15.6 s (4.79x to 1.35x; the run before, SHRINK_TIME.md in git
    at `c463ea7`): target web no longer compresses the 23 MB shrunk file at brotli 11 where the two LZMA
    estimates are more than 2.25x apart, so that no error of theirs could change which file ships; both
    stay estimates, marked `~`, and `--sizes` measures them (docs/methods.md, "Size as users pay for it").
    The web figures of these tables are the benchmark's own brotli 11 of each file, as before.
* **Load <= 1.1x int8's in the newest onnxruntime: met on all six** in fresh processes (the column `load /
  int8, fresh processes`: `benchmarks/load_probe.py`, one session per process, 61 interleaved rounds, CPU
  seconds, onnxruntime 1.32): `auto` 0.99x-1.09x, `auto --target web` 1.00x-1.08x. The highest: PP-OCRv4 rec
  1.085x / 1.079x (wheel / web), PP-OCRv6 rec 1.063x / 1.054x, PP-OCRv4 det 1.032x / 1.038x (1.096x / 1.101x
  before a small weight's scales lost their `Cast`). On Magika, whose `auto` files for the two targets are
  byte-identical, 21 rounds read 1.003x and 1.112x for the same bytes; 61 rounds, 1.006x and 1.030x: read the
  small models' figures to about 3%. The in-process column (40 rounds, this benchmark's first measure) reads
  up to 1.18x (PP-OCRv6 rec web) and 1.09x-1.11x for MiniLM files that are round-to-nearest int8's own bytes:
  sessions created one after another in one process share onnxruntime's allocations and caches, which a
  user's program does not. The extra work at load is the small weights' decode and the large weights'
  scale `Cast`, both folded by onnxruntime.

## What these say (2026-11-26, time and Magika's budget 2026-11-27)

* **PP-OCRv6 rec** (64 recorded lines, 32 fitted on; engine `24a3c9a`, and `43214df` writes the same plan):
  `auto` ships **0.71x** round-to-nearest int8's wheel member (3.61 MB against 5.09) at 183/200 held-out lines
  identical (int8: 171, int8 with the recording: 189); with `--target web` 0.69x int8's brotli at 182. Issue
  20's wheel bar (<= 0.80x at >= int8's lines) is met; its brotli bar (<= 0.70x onnx-shrink-ray's default,
  about 2.51 MB) is not: 3.37 MB is 0.94x.
  What changed: the CTC head (`linear_8.w_0`, 120 x 18710, 42% of the weights) keeps 255 levels for the 159
  characters that are first or second choice somewhere on the 32 fitted lines and 7 levels for the other 18551
  (`auto/heads.py`); before, it kept 127 levels for all (4.41 MB, 0.87x, 185/200). Half of what output-aware
  rounding wins is still kept as a margin (`auto.budget.SPEND`), chosen on 100 other lines (seed 555).
* **Magika** (20 recorded calls of 4 files, 10 fitted on; engine `44a7341`): output-aware rounding does worse
  than plain rounding on these samples, nothing smaller than int8 keeps int8's answers there, and `auto` ships
  round-to-nearest int8 and says so (before that it printed "auto's plan kept" for the same bytes; before the
  no-larger-than-int8 rule it shipped every large weight as int16, 1.99x int8's wheel).
  With more evidence and a looser budget (2026-11-27, engine `b15589e`, not in the table): recorded one file per
  call (`magika_task.use(model, batch=1)` under `hatch-shrinkray record`: 80 calls, 40 fitted on), the default
  budget still ships round-to-nearest int8 (380/380 test labels); with the budget set a priori to verification's
  own limits (`--budget-rel-l2 0.1 --budget-cosine 0.995 --budget-agreement 0.99`) `auto` ships 0.56x int8's wheel
  (0.400 MB) at 377/380, and its guard kept it (0 vs 1 held-out labels changed). Issue 20's Magika bar (<= 0.8x
  at int8's answers) is between the two; `DOWNLOAD.md`'s ladder puts every uniform level count below 255 under
  int8's answers too (127 levels: 0.87x, 349/350). One budget was tried, not a sweep over the test labels.
* **Silero VAD** (17 recorded streams, 8 held out; engine `44a7341`): both plans lose the do-no-harm guard and
  int8 ships. The web-target plan tied int8 on the held-out decisions (1 vs 1) at more error; on 8 held-out
  streams a tie goes to the smaller error now. Before that rule it shipped at 0.93x int8's wheel and changed 10
  more of the 36000 unseen decisions than int8.
* **PP-OCRv4 rec** (a held-out check of the head split: another recogniser, 6625 classes, its own 64 recorded
  lines; engine `ac488e9`): with engine `24a3c9a` the build failed. The plan passed the guard (fewer flips than
  int8) but measured rel-L2 0.111 on the held-out half against verification's 0.1 (round-to-nearest int8: 0.132;
  the engine before the split: 0.097). Since `43214df` what the guard chose is also held to verification's
  limits on the held-out half, and where it is over them int8 with output-aware rounding ships and the line
  says so: 171/200 lines at 1.00x int8's wheel (round-to-nearest: 129, int8 with the recording: 170). No
  bytes won on this model; onnx-shrink-ray's files of it do not load in onnxruntime.
* **Load**: `auto`'s files are int8's graph node for node (PP-OCRv6 rec: 558 nodes, the same op counts, 283
  initializers; only the codes and scales differ), so session creation does the same work. Measured in this
  process (`python -m benchmarks.auto_download loads ppocrv6_rec --reps 40`, 2026-11-27, 40 interleaved
  rounds, newest onnxruntime): `auto` 0.99x int8's CPU time, `auto --target web` 0.94x, int8 with the
  recording 0.99x. In every runtime (`runtimes`, fresh processes, table above) the medians scatter more:
  a file with int8's very bytes (Magika's and Silero's int8 with the recording, where the guard kept
  round-to-nearest) measured 0.67x-1.32x of int8, so only a ratio well outside that band would say
  something; none is. Peak memory is 0.96x-1.02x of int8's in onnxruntime 1.16.3, 1.18.0 and the newest,
  and 0.94x-1.15x in onnxruntime-web, where Silero's int8 bytes measured 1.12x against themselves.
  PP-OCRv6 rec (the original too) does not load in onnxruntime 1.16.3. onnx-shrink-ray's default takes 2.1x.
* **Time** (`SHRINK_TIME.md`, `python -m benchmarks.shrink_time --engines 4bc6bdd HEAD --runs 3`, engines
  interleaved, 2026-11-27 04:05): `auto` on the 21 MB PP-OCRv6 rec takes **51.5 s** wall / 81 s CPU (runs
  46.6-53.6 s) against 56.2 s / 90 s for `4bc6bdd`: 0.92x, byte-identical output. What changed: where the
  screen's first point fails the full check, the screen bisects once more above it (2 full runs of the search
  instead of 6). Earlier the same day (`--engines b15589e HEAD`): 56.3 s against 65.8 s for `b15589e`, the
  engine of the table above, 0.86x, byte-identical. What changed then, none of it in what ships: the search
  no longer runs the chain's all-lossless top (deviation 0) unless the bisection ends there; the original runs
  once on the held-out half, its outputs judged once, for both the guard and the verification; the original's sizes are
  compressed while the model is encoded; the search's screen reuses the subset outputs the sensitivity runs
  prepared. The day before, the same `b15589e`-era `auto` measured 66.7 s against 59.8 s for the engine before
  the head split (`0cf6781`, 49.0 s on the faster VM of 2026-11-25): this VM's speed varies by 20%.
"""


def run_model(key: str, fresh: bool) -> dict[str, Any]:
    eng = engine_key()
    cache = OUT / "results" / f"{key}.json"
    prev = _load(cache)
    if prev.get("engine") == eng and not fresh:
        return prev
    model = corpus.model_path(key)
    rec = RECORDINGS / key
    recording = record(key, model, rec)
    work = OUT / "work" / key
    (CACHE_DIR / "download").mkdir(parents=True, exist_ok=True)  # download.shrink runs its commands there
    partial = OUT / "partial" / f"{key}.json"
    done = _load(partial)
    shrunk: dict[str, Any] = done.get("shrunk", {}) if done.get("engine") == eng and not fresh else {}
    for name, args in OURS.items():
        if name not in shrunk:
            log(f"{key}: {name}")
            shrunk[name] = ours(model, name, args, rec, work)
            _save(partial, {"engine": eng, "shrunk": shrunk})
    for name, args in PEER.items():
        if name in shrunk:
            continue
        log(f"{key}: {name}")
        try:
            shrunk[name] = peer(model, name, args, work)
        except (RuntimeError, StopIteration, subprocess.CalledProcessError) as exc:
            shrunk[name] = {"error": str(exc)[-600:], "command": " ".join(args)}
        _save(partial, {"engine": eng, "shrunk": shrunk})
    for name, v in shrunk.items():
        if "file" in v:
            try:
                make_session(v["file"], threads=1)
            except Exception as exc:  # the peer's Silero VAD file does not load
                shrunk[name] = {"error": f"does not load in onnxruntime: {str(exc)[-300:]}", "command": v["command"]}
    files = {n: v["file"] for n, v in shrunk.items() if "file" in v}
    answers = evaluate(key, model, files)
    loads = load_times({"original": str(model), **files})
    sizes_cache = _load(OUT / "sizes.json")
    sizes = {n: sizes_of(Path(p), sizes_cache, brotli=key in BROTLI_KEYS) for n, p in
             {"original": str(model), **files}.items()}
    _save(OUT / "sizes.json", sizes_cache)
    result = {"key": key, "engine": eng, "model": str(model), "model_sha256": sha256_file(model),
              "recording": recording, "variants": shrunk, "answers": answers, "loads": loads, "sizes": sizes}
    _save(cache, result)
    return result


RUNTIME_VARIANTS = ("int8, round-to-nearest", "int8 with the recording", "auto, target wheel", "auto, target web")
RUNTIMES = ("1.16.3", "1.18.0", "newest", "web")


def runtime_loads(keys: list[str], reps: int) -> dict[str, Any]:
    """Session creation CPU seconds and peak RSS of the loading process, per runtime, for the files of
    the latest ``run``: one fresh process per (model, variant, runtime, repetition), repetitions
    interleaved round-robin; medians (``load_cost``'s probes: onnxruntime 1.16.3 and 1.18.0 in venvs of
    their own, this venv's newest, onnxruntime-web under Node)."""
    from benchmarks.load_cost import _probe, medians

    files: dict[tuple[str, str], Path] = {}
    for key in keys:
        result = _load(OUT / "results" / f"{key}.json")
        files[(key, "original")] = Path(result["model"])
        for name in RUNTIME_VARIANTS:
            v = result["variants"].get(name, {})
            if "file" in v:
                files[(key, name)] = Path(v["file"])
    got: dict[str, list[dict[str, Any]]] = {}
    order = list(files.items())
    for rep in range(reps):
        shift = rep % len(order)  # each repetition starts elsewhere: no file is always first or last
        for (key, name), path in order[shift:] + order[:shift]:
            for rt in RUNTIMES:
                got.setdefault(f"{key}|{name}|{rt}", []).append(_probe(rt, path, key))
        log(f"runtimes: repetition {rep + 1}/{reps} done")
    out: dict[str, Any] = {f"{k}|reps": reps for k in keys}
    for name, rows in got.items():
        cell = medians(rows)
        if "error" not in cell:
            cell["cpu_runs"] = [g.get("cpu", g.get("load_cpu")) for g in rows if "error" not in g]
        out[name] = cell
    return out


def runtime_table(data: dict[str, Any]) -> list[str]:
    """The ``runtimes`` figures as ratios to round-to-nearest int8 in the same runtime."""
    if not data:
        return []
    lines = ["## Load in every runtime", "",
             "Session creation CPU time / peak memory of the loading process, each as a multiple of round-to-nearest "
             "int8's in the same runtime (medians of fresh processes per cell, the files interleaved and each "
             "repetition starting at another file; `python -m benchmarks.auto_download runtimes [KEY ...] --reps N`). "
             "Issue 20's bar for `auto`: within 1.1x. `int8 with the recording` has int8's nodes (and, where the "
             "guard fell back, its very bytes): its spread around 1.00x is the measurement's.", "",
             "| model | repetitions | variant | " + " | ".join(RUNTIMES) + " |",
             "|---|---|---|" + "---|" * len(RUNTIMES)]
    keys = sorted({k.split("|")[0] for k in data if "|" in k}, key=KEYS.index)
    for key in keys:
        for name in ("original", *RUNTIME_VARIANTS[1:]):
            cells = []
            for rt in RUNTIMES:
                row, base = data.get(f"{key}|{name}|{rt}", {}), data.get(f"{key}|{RUNTIME_VARIANTS[0]}|{rt}", {})
                if "cpu" not in row or "cpu" not in base:
                    cells.append("-" if not row else f"error: {row.get('error', '?')[:60]}")
                    continue
                cells.append(f"{row['cpu'] / base['cpu']:.2f}x / {row['peak_mib'] / base['peak_mib']:.2f}x")
            lines.append(f"| {key} | {data.get(f'{key}|reps', '?')} | {name} | " + " | ".join(cells) + " |")
    versions = sorted({f"{k.split('|')[2]}: {v['version']}" for k, v in data.items() if k.count("|") == 2
                       if "|" in k and isinstance(v, dict) and v.get("version")})
    lines += ["", "Runtimes: " + ", ".join(versions) + ".", ""]
    return lines


def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.3f}"


def write_report(results: list[dict[str, Any]]) -> Path:
    lines = ["# `auto` and the download (issues 20 and 33)", "",
             f"Engine {', '.join(sorted({'`' + r['engine'] + '`' for r in results})) or '?'} (each model's "
             f"section names its own); written "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on the shared 2-vCPU VM (other jobs ran at "
             "the same time: CPU seconds are the figure to read, wall seconds are indicative). Commands:", "",
             "```sh", "python -m benchmarks.auto_download run      # shrink, evaluate, time (cached per engine commit)",
             "python -m benchmarks.auto_download report", "```", "",
             "Sizes in MB (10^6 bytes): raw file; wheel = the zip member at deflate 6 as hatchling writes it; web = "
             "brotli 11 where measured (PP-OCRv6), else `~` the LZMA estimate reports show. identical = answers "
             "identical to the original's on the task's held-out test data (none of it recorded). load = session "
             f"creation CPU time in this process, median of {LOADS} or more interleaved runs (each section says how "
             "many), as a multiple of round-to-nearest int8's. The plot (`auto_download.png`, docs/methods.md) has one "
             "panel per model: bytes in the target against identical answers.", ""]
    for r in results:
        ans, sizes, loads = r["answers"], r["sizes"], r["loads"]
        base = "int8, round-to-nearest"
        lines += [f"## {r['key']}", "", f"Engine `{r['engine']}`. Load: {r.get('load_rounds', LOADS)} rounds"
                  f"{_fresh_rounds(r)}. "
                  f"Recording: {_rec(r['recording'])}. Test data: "
                  f"{ans['original']['n']} "
                  f"{WHAT[r['key']]}.", "",
                  "| variant | raw | wheel | web | identical | wheel / int8 | web / int8 | load / int8 "
                  "| load / int8, fresh processes | shrink wall s "
                  "| shrink CPU s | build's evidence | what auto / the guard said | command |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        o = sizes["original"]
        lines.append(f"| original | {_mb(o['raw'])} | {_mb(o['wheel'])} | {_web(o)} | - | - | - | "
                     f"{loads['original'] / loads[base]:.2f}x | {_fresh(r, 'original')} | - | - | - | - | - |")
        for name, v in r["variants"].items():
            if "error" in v:
                lines.append(f"| {name} | failed: {v['error'][-200:]!r} | | | | | | | | | | | | `{v['command']}` |")
                continue
            s, a = sizes[name], ans[name]
            note = ""
            rep = v.get("report") or {}
            ver = rep.get("verification") or {}
            if ver.get("fitting"):
                note = str(ver["fitting"]).replace("|", "/")[:260]
            evidence = _evidence(ver.get("evidence"))
            lines.append(
                f"| {name} | {_mb(s['raw'])} | {_mb(s['wheel'])} | {_web(s)} | {100 * a['same'] / a['n']:.2f}% "
                f"({a['same']}/{a['n']}) | {s['wheel'] / sizes[base]['wheel']:.2f}x | "
                f"{_webv(s) / _webv(sizes[base]):.2f}x | {loads[name] / loads[base]:.2f}x | {_fresh(r, name)} | "
                f"{v['seconds']:.1f} | "
                f"{v.get('cpu', 0):.1f} | {evidence} | {note} | `{v['command']}` |")
        lines.append("")
    lines += runtime_table(_load(OUT / "runtimes.json"))
    path = BENCH_DIR / "AUTO_DOWNLOAD.md"
    path.write_text("\n".join(lines) + "\n"
                    + engine_notes(NOTES, NOTES_ENGINES, [r["engine"] for r in results], path.name))
    return path


def _fresh(result: dict[str, Any], name: str) -> str:
    """``name``'s load in fresh processes as a multiple of round-to-nearest int8's (- where not measured)."""
    fresh, base = result.get("fresh_loads") or {}, "int8, round-to-nearest"
    return f"{fresh[name] / fresh[base]:.3f}x" if name in fresh and base in fresh else "-"


def _fresh_rounds(result: dict[str, Any]) -> str:
    n = result.get("fresh_load_rounds")
    return f" in this process, {n} in fresh processes (`load_probe.py`, CPU seconds)" if n else ""


def _rec(recording: dict[str, Any]) -> str:
    summary = str(recording.get("summary", "")).splitlines()
    return summary[2].split("  ")[0] + ": " + " ".join(summary[2].split()[3:6]) if len(summary) > 2 else "?"


def _evidence(e: dict[str, Any] | None) -> str:
    """The verification's evidence counts, as the build line gives them."""
    if not e:
        return "not verified"
    from hatch_shrinkray.bench import Evidence

    fields = {k: e[k] for k in ("units", "changed_units", "unit_kind", "answers", "changed_answers", "decisions",
                                "flips", "real", "describes") if k in e}
    return Evidence(**fields).text()


def _webv(s: dict[str, Any]) -> float:
    return float(s.get("web") or s["estimate"])


def _web(s: dict[str, Any]) -> str:
    return _mb(s["web"]) if s.get("web") else "~" + _mb(s["estimate"])


SHORT = {"int8, round-to-nearest": "int8 RTN", "int8 with the recording": "int8 rec", "auto, target wheel": "auto",
         "auto, target web": "auto web", "fp16": "fp16", "quantize_dynamic (ours dynamic)": "dynamic",
         "MatMulNBits 4-bit (ours int4)": "int4", "onnx-shrink-ray default": "peer default",
         "onnx-shrink-ray per-channel": "peer per-channel"}
WEB_TOO = ("auto, target web", "int8, round-to-nearest", "onnx-shrink-ray default")
"""Variants drawn at their web bytes too (hollow): what ``--target web`` is measured against."""


def _style(name: str) -> tuple[str, str]:
    if name.startswith("onnx-shrink-ray"):
        return "x", "C3"
    if name.startswith("auto"):
        return "o", "C0"
    return "o", {"int8, round-to-nearest": "C2", "int8 with the recording": "C1"}.get(name, "C7")


def _at(r: dict[str, Any], name: str) -> tuple[float, float]:
    """(wheel MB, % of held-out answers identical) of variant ``name`` in result ``r``."""
    a = r["answers"][name]
    return r["sizes"][name]["wheel"] / 1e6, 100 * a["same"] / a["n"]


def plot(results: list[dict[str, Any]]) -> Path:
    """One panel per model: bytes in the target against identical answers on the held-out test data, one
    point per variant at its wheel member (filled; onnx-shrink-ray's ``x``) and, for ``auto --target web``,
    round-to-nearest int8 and onnx-shrink-ray's default, at its web bytes too (hollow; onnx-shrink-ray's
    ``+``). The dashed line is round-to-nearest int8's answers (the floor), the dotted one onnx-shrink-ray
    default's wheel member; upper left is better."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(results))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, grid = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.4 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax, r in zip(axes, results, strict=False):
        for name, v in r["variants"].items():
            if "error" in v or name not in r["answers"]:
                continue
            marker, color = _style(name)
            x, y = _at(r, name)
            web = _webv(r["sizes"][name]) / 1e6
            if name != "auto, target web":
                ax.scatter([x], [y], marker=marker, s=40, color=color)
                ax.annotate(SHORT.get(name, name), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
            if name in WEB_TOO:
                if marker == "o":
                    ax.scatter([web], [y], marker=marker, s=40, facecolors="none", edgecolors=color)
                else:
                    ax.scatter([web], [y], marker="+", s=40, color=color)
                ax.annotate(SHORT[name] + (" (web)" if name != "auto, target web" else ""), (web, y), fontsize=7,
                            xytext=(3, -9), textcoords="offset points", color=color)
        if "int8, round-to-nearest" in r["answers"]:
            ax.axhline(_at(r, "int8, round-to-nearest")[1], color="C2", ls="--", lw=0.8)
        if "onnx-shrink-ray default" in r["answers"]:
            ax.axvline(_at(r, "onnx-shrink-ray default")[0], color="C3", ls=":", lw=0.8)
        failed = [SHORT.get(n, n) for n, v in r["variants"].items() if "error" in v]
        if failed:
            ax.text(0.5, 0.97, "failed or does not load: " + ", ".join(failed), transform=ax.transAxes, fontsize=7,
                    ha="center", va="top", color="C3")
        ax.set_title(f"{r['key']}: {r['answers']['original']['n']} {WHAT[r['key']].split(' (')[0]}", fontsize=9)
        ax.set_xlabel("MB in the target: wheel member (filled, x), web (hollow, +)", fontsize=8)
        ax.set_ylabel("identical to the original, % of held-out", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(results):]:
        ax.set_visible(False)
    fig.tight_layout()
    path = BENCH_DIR / "auto_download.png"
    fig.savefig(path, dpi=100)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["run", "report", "loads", "fresh-loads", "runtimes"])
    ap.add_argument("keys", nargs="*", default=list(KEYS))
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if args.action == "runtimes":
        kept = {k: v for k, v in _load(OUT / "runtimes.json").items() if k.split("|")[0] not in args.keys}
        _save(OUT / "runtimes.json", {**kept, **runtime_loads(args.keys, args.reps)})
    if args.action == "run":
        for key in args.keys:
            run_model(key, args.fresh)
    if args.action == "loads":  # the same files: a run's loads share the machine with its shrinks
        for key in args.keys:
            result = _load(OUT / "results" / f"{key}.json")
            files = {n: v["file"] for n, v in result["variants"].items() if "file" in v}
            result["loads"] = load_times({"original": result["model"], **files}, max(args.reps, LOADS))
            result["load_rounds"] = max(args.reps, LOADS)
            _save(OUT / "results" / f"{key}.json", result)
    if args.action == "fresh-loads":
        for key in args.keys:
            result = _load(OUT / "results" / f"{key}.json")
            files = {"original": result["model"], **{n: v["file"] for n, v in result["variants"].items()
                                                     if "file" in v and n in FRESH}}
            result["fresh_loads"] = fresh_load_times(files, args.reps)
            result["fresh_load_rounds"] = args.reps
            _save(OUT / "results" / f"{key}.json", result)
    results = [r for k in KEYS if (r := _load(OUT / "results" / f"{k}.json"))]
    print(write_report(results))
    print(plot(results))
    print(json.dumps({r["key"]: {n: a.get("same") for n, a in r["answers"].items()} for r in results}))


if __name__ == "__main__":
    main()
