"""How long ``hatch-shrinkray shrink`` takes with a recording, engine against engine and method against
method, in one run.

    python -m benchmarks.shrink_time [--engines REV REV ...] [--runs N] [--keys KEY ...] [--web]

Each engine is a ``git archive`` snapshot (``variants.engine_dir``) run as a CLI subprocess
(``python -m hatch_shrinkray shrink MODEL -o OUT --method M --inputs REC``, its own empty cache). Run
after run, every variant of a model and every engine take their turn, so a machine that slows down
mid-way slows them all alike. ``--web`` adds each variant with ``--target web`` (its exact brotli 11
of the shrunk file is part of its cost). Per variant: the median wall and CPU (user + system of the
subprocess) seconds, the wall as a multiple of int8 with the recording's (the newest engine: in the
wheel target, and in the variant's own target), and whether every engine wrote byte-identical models
(a speed-up that changed the output would say so). Writes ``benchmarks/SHRINK_TIME.md``; results are
not cached (timings are only comparable within a run).
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

VARIANTS = {"auto": ["--method", "auto"], "int8 with the recording": ["--method", "int8"],
            "int8 round-to-nearest": ["--method", "int8", "--rounding", "nearest"]}
"""The variants; round-to-nearest is the data-free floor whose build time the fitted ones are held to
(output-aware rounding costs what its evidence buys: int8 with the recording <= 5x its time)."""
INT8 = "int8 with the recording"
WEB = ", target web"
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


def variants(web: bool) -> dict[str, list[str]]:
    """The variants measured: each method in the wheel target, and with ``web`` in the web target too."""
    out = dict(VARIANTS)
    if web:
        out.update({f"{name}{WEB}": [*args, "--target", "web"] for name, args in VARIANTS.items()})
    return out


def measure(keys: list[str], engines: list[str], runs: int, web: bool = False) -> list[dict[str, Any]]:
    dirs = {rev: engine_dir(rev) or REPO_DIR for rev in engines}
    rows = []
    for key in keys:
        model = corpus.model_path(key)
        rec = RECORDINGS / key
        record(key, model, rec)
        todo = variants(web)
        got: dict[tuple[str, str], list[tuple[float, float, str]]] = {(v, rev): [] for v in todo for rev in engines}
        for i in range(runs):
            for variant, args in todo.items():
                for rev in engines:
                    got[variant, rev].append(_run(dirs[rev], model, rec, args))
                    print(f"{key} {variant} {rev} run {i + 1}: {got[variant, rev][-1][0]:.1f} s", file=sys.stderr)
        for variant in todo:
            digests = {d for rev in engines for _, _, d in got[variant, rev]}
            rows.append({"key": key, "variant": variant, "identical": len(digests) == 1,
                         "engines": {rev: (statistics.median(w for w, _, _ in got[variant, rev]),
                                           statistics.median(c for _, c, _ in got[variant, rev]))
                                     for rev in engines}})
    return rows


def against_int8(rows: list[dict[str, Any]], rev: str) -> dict[tuple[str, str], tuple[float, float | None]]:
    """Per (model, variant): its median wall over int8 with the recording's in the wheel target, and
    over int8's in the variant's own target (None: that was not measured)."""
    wall = {(r["key"], r["variant"]): r["engines"][rev][0] for r in rows}
    out = {}
    for (key, variant), seconds in wall.items():
        same = f"{INT8}{WEB}" if variant.endswith(WEB) else INT8
        out[key, variant] = (seconds / wall[key, INT8], seconds / wall[key, same] if (key, same) in wall else None)
    return out


def report(rows: list[dict[str, Any]], engines: list[str], shas: dict[str, str], runs: int, command: str) -> str:
    lines = ["# Shrink time with a recording, engine against engine", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on the shared 2-vCPU VM (other jobs may "
             f"run: read CPU seconds alongside wall). Command: `{command}`. Medians of {runs} interleaved runs per "
             "engine; each run is the CLI in a fresh process with an empty cache, on the task's recording "
             "(`benchmarks/record_task.py`).", "",
             "| model | variant | " + " | ".join(f"{rev} (`{shas[rev]}`) wall / CPU s" for rev in engines)
             + f" | {engines[-1]} / {engines[0]} wall | / {INT8}, wall | / {INT8} in the same target, wall "
             "| same output |",
             "|---|---|" + "---|" * len(engines) + "---|---|---|---|"]
    ratios = against_int8(rows, engines[-1])
    for r in rows:
        cells = [f"{r['engines'][rev][0]:.1f} / {r['engines'][rev][1]:.1f}" for rev in engines]
        ratio = r["engines"][engines[-1]][0] / r["engines"][engines[0]][0]
        wheel, same = ratios[r["key"], r["variant"]]
        lines.append(f"| {r['key']} | {r['variant']} | " + " | ".join(cells)
                     + f" | {ratio:.2f}x | {wheel:.2f}x | {'-' if same is None else f'{same:.2f}x'} "
                     f"| {'byte-identical' if r['identical'] else 'differs'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=list(DEFAULT_ENGINES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", nargs="+", default=["ppocrv6_rec"])
    parser.add_argument("--web", action="store_true", help="also each variant with --target web")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("git is needed to snapshot the engines")
    shas = {rev: _sha(rev) for rev in args.engines}  # before the runs: a commit made meanwhile is not measured
    rows = measure(args.keys, args.engines, args.runs, args.web)
    command = "python -m benchmarks.shrink_time " + " ".join(sys.argv[1:] if argv is None else argv)
    text = report(rows, args.engines, shas, args.runs, command.strip())
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(OUT)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
