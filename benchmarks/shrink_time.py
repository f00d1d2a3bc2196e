"""How long ``hatch-shrinkray shrink`` takes with a recording, engine against engine, in one run.

    python -m benchmarks.shrink_time [--engines REV REV ...] [--runs N] [--keys KEY ...]

Each engine is a ``git archive`` snapshot (``variants.engine_dir``) run as a CLI subprocess
(``python -m hatch_shrinkray shrink MODEL -o OUT --method M --inputs REC``, its own empty cache), the
engines interleaved run after run so a machine that slows down mid-way slows every engine alike.
Per variant: the median wall and CPU (user + system of the subprocess) seconds, and whether every
engine wrote byte-identical models (a speed-up that changed the output would say so). Writes
``benchmarks/SHRINK_TIME.md``; results are not cached (timings are only comparable within a run).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import BENCH_DIR
from benchmarks.record_task import RECORDINGS, record
from benchmarks.variants import REPO_DIR, engine_dir

VARIANTS = {"auto": ["--method", "auto"], "int8 with the recording": ["--method", "int8"]}
DEFAULT_ENGINES = ("98d6c70", "HEAD")
"""The engine before the speed-ups of this benchmark's first run, and the newest commit."""
OUT = BENCH_DIR / "SHRINK_TIME.md"


def _run(engine: Path, model: Path, rec: Path, args: list[str]) -> tuple[float, float, str]:
    """One shrink: wall seconds, CPU seconds of the subprocess, sha256 of the written model."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(engine), "HATCH_SHRINKRAY_CACHE_DIR": str(Path(tmp) / "cache")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hatch_shrinkray", "shrink", str(model), "-o", str(Path(tmp) / "out"),
                        *args, "--inputs", str(rec), "-q"], env=env, cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        digest = hashlib.sha256((Path(tmp) / "out" / model.name).read_bytes()).hexdigest()
    return wall, cpu, digest


def _sha(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short=12", rev], capture_output=True, text=True, cwd=REPO_DIR,
                          check=True).stdout.strip()


def measure(keys: list[str], engines: list[str], runs: int) -> list[dict[str, Any]]:
    dirs = {rev: engine_dir(rev) or REPO_DIR for rev in engines}
    rows = []
    for key in keys:
        model = corpus.model_path(key)
        rec = RECORDINGS / key
        record(key, model, rec)
        for variant, args in VARIANTS.items():
            got: dict[str, list[tuple[float, float, str]]] = {rev: [] for rev in engines}
            for i in range(runs):
                for rev in engines:
                    got[rev].append(_run(dirs[rev], model, rec, args))
                    print(f"{key} {variant} {rev} run {i + 1}: {got[rev][-1][0]:.1f} s", file=sys.stderr)
            digests = {d for rev in engines for _, _, d in got[rev]}
            rows.append({"key": key, "variant": variant, "identical": len(digests) == 1,
                         "engines": {rev: (statistics.median(w for w, _, _ in got[rev]),
                                           statistics.median(c for _, c, _ in got[rev])) for rev in engines}})
    return rows


def report(rows: list[dict[str, Any]], engines: list[str], shas: dict[str, str], runs: int, command: str) -> str:
    lines = ["# Shrink time with a recording, engine against engine", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on the shared 2-vCPU VM (other jobs may "
             f"run: read CPU seconds alongside wall). Command: `{command}`. Medians of {runs} interleaved runs per "
             "engine; each run is the CLI in a fresh process with an empty cache, on the task's recording "
             "(`benchmarks/record_task.py`).", "",
             "| model | variant | " + " | ".join(f"{rev} (`{shas[rev]}`) wall / CPU s" for rev in engines)
             + f" | {engines[-1]} / {engines[0]} wall | same output |",
             "|---|---|" + "---|" * len(engines) + "---|---|"]
    for r in rows:
        cells = [f"{r['engines'][rev][0]:.1f} / {r['engines'][rev][1]:.1f}" for rev in engines]
        ratio = r["engines"][engines[-1]][0] / r["engines"][engines[0]][0]
        lines.append(f"| {r['key']} | {r['variant']} | " + " | ".join(cells)
                     + f" | {ratio:.2f}x | {'byte-identical' if r['identical'] else 'differs'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=list(DEFAULT_ENGINES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", nargs="+", default=["ppocrv6_rec"])
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("git is needed to snapshot the engines")
    shas = {rev: _sha(rev) for rev in args.engines}  # before the runs: a commit made meanwhile is not measured
    rows = measure(args.keys, args.engines, args.runs)
    command = "python -m benchmarks.shrink_time " + " ".join(sys.argv[1:] if argv is None else argv)
    text = report(rows, args.engines, shas, args.runs, command.strip())
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(OUT)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
