"""What the hook costs a build: a small hatchling project shipping a real model (Silero VAD 6.2.3's
``silero_vad.onnx``, 2.3 MB, from the pinned PyPI wheel the test suite caches), built with and
without the hook, isolated and not, with a cold and a warm shrink cache.

    python benchmarks/build_time.py [--repeats 5] [--only NAME ...] [--out benchmarks/BUILD_TIME.md]

Frontends (each builds the sdist and then the wheel):

- ``build``: ``python -m build`` (isolated: a fresh venv per step that pip fills from its warm
  cache; the wheel is built from the unpacked sdist);
- ``build --no-isolation``: ``python -m build --no-isolation`` in this venv (engine installed);
- ``hatch``: ``hatch build`` (its ``hatch-build`` environment is created once, unmeasured, and
  reused, as on a developer's machine; sdist and wheel are both built from the source tree).

Each with the hook (``[tool.hatch.build.hooks.shrinkray]``, method fp16, verified on generated
inputs) and without it (the floor), and with a cold shrink cache (a fresh directory per build:
the hook really shrinks) or a warm one (filled by an unmeasured build first). Runs are interleaved
(each repeat builds every variant once, in rotating order) after one unmeasured warm-up per
variant. Reported: medians of wall time and of CPU time (user + system of all child processes; the
machine is shared, CPU is the steadier figure), the ratio to the build without the hook, and the
seconds the hook's own lines report for shrinking (``in N s`` of its total line).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BIN = Path(PY).parent
sys.path.insert(0, str(REPO / "tests"))

from realmodels import silero_vad  # noqa: E402

MODEL = "src/vadpkg/models/silero_vad.onnx"
RECORDING = "recordings"
TOTAL = re.compile(r"shrinkray: total \d+ models? \([^)]*\): .* in (\d+\.\d+) s")


def project(work: Path, hook: bool) -> Path:
    root = work / ("with-hook" if hook else "no-hook")
    (root / "src/vadpkg/models").mkdir(parents=True)
    (root / "src/vadpkg/__init__.py").write_text('"""Voice activity detection (benchmark)."""\n')
    shutil.copyfile(silero_vad(), root / MODEL)
    requires = '"hatchling>=1.21", "hatch-shrinkray-core==0.1.0"' if hook else '"hatchling>=1.21"'
    table = (f'\n[tool.hatch.build.hooks.shrinkray]\nmodels = ["{MODEL}"]\nmethod = "fp16"\n' if hook else "")
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = [{requires}]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "vadpkg"\nversion = "0.1.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/vadpkg"]\n' + table)
    return root


FRONTENDS = {
    "build": [PY, "-m", "build", "-v", "--outdir", "dist"],
    "build --no-isolation": [PY, "-m", "build", "-v", "--no-isolation", "--outdir", "dist"],
    "hatch": [str(BIN / "hatch"), "build"],
}


def build_once(root: Path, frontend: str, cache: Path, env: dict[str, str]) -> tuple[float, float, str]:
    shutil.rmtree(root / "dist", ignore_errors=True)
    variables = {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(FRONTENDS[frontend], cwd=root, env=variables, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{frontend} in {root} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + done.stderr


def shrink_seconds(log: str) -> float:
    return sum(float(s) for s in TOTAL.findall(log))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", action="append", default=[], help="frontends to run (default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "BUILD_TIME.md")
    ap.add_argument("--label", default="", help="a title for this table (e.g. before / after)")
    ap.add_argument("--backend-path", type=Path, default=None,
                    help="a checkout whose hatch_shrinkray the --no-isolation builds import (PYTHONPATH), to compare "
                         "another revision with the one installed in this venv")
    args = ap.parse_args()
    frontends = args.only or list(FRONTENDS)
    with tempfile.TemporaryDirectory(prefix="build-time-bench-") as tmp:
        work = Path(tmp)
        house = work / "wheelhouse"
        subprocess.run([PY, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-q", "-w", str(house), str(REPO)],
                       check=True)
        env = {**os.environ, "PIP_FIND_LINKS": f"{house} {os.environ.get('PIP_FIND_LINKS', '')}".strip(),
               "UV_FIND_LINKS": str(house), "HATCH_DATA_DIR": str(work / "hatch-data"),
               "UV_CACHE_DIR": str(work / "uv-cache")}
        for name in ("PYTHONPATH", "VIRTUAL_ENV", "HATCH_BUILD_NO_HOOKS", "HATCH_ENV_ACTIVE"):
            env.pop(name, None)
        if args.backend_path is not None:
            env["PYTHONPATH"] = str(args.backend_path.resolve())
        roots = {True: project(work, True), False: project(work, False)}
        warm = work / "warm-cache"
        variants = [(f, hook, cache) for f in frontends for hook, cache in
                    ((False, "-"), (True, "cold"), (True, "warm"))]
        caches = iter(range(10**6))

        def cache_for(kind: str) -> Path:
            return warm if kind == "warm" else work / f"cold-{next(caches)}"

        logs = {}
        for v in variants:  # warm-up: pip's, uv's and hatch's caches; the warm shrink cache
            logs[v] = build_once(roots[v[1]], v[0], cache_for(v[2]), env)[2]
        walls: dict[tuple[str, bool, str], list[float]] = {v: [] for v in variants}
        cpus: dict[tuple[str, bool, str], list[float]] = {v: [] for v in variants}
        shrinks: dict[tuple[str, bool, str], list[float]] = {v: [] for v in variants}
        for r in range(args.repeats):
            for v in variants[r % len(variants):] + variants[: r % len(variants)]:
                wall, cpu, log = build_once(roots[v[1]], v[0], cache_for(v[2]), env)
                walls[v].append(wall)
                cpus[v].append(cpu)
                shrinks[v].append(shrink_seconds(log))
                print(f"repeat {r + 1} {v}: wall {wall:.1f} s, cpu {cpu:.1f} s, shrink {shrinks[v][-1]:.1f} s",
                      flush=True)
                for old in work.glob("cold-*"):
                    shutil.rmtree(old, ignore_errors=True)
    rows = ["| frontend | hook | shrink cache | wall median (s) | CPU median (s) | x wall / x CPU of no hook | "
            "hook's shrink lines (s) | (wall - shrink) / no hook | wall runs (s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        floor = (statistics.median(walls[(v[0], False, "-")]), statistics.median(cpus[(v[0], False, "-")]))
        wall, cpu, shrunk = statistics.median(walls[v]), statistics.median(cpus[v]), statistics.median(shrinks[v])
        rows.append(f"| {v[0]} | {'yes' if v[1] else 'no'} | {v[2]} | {wall:.1f} | {cpu:.1f} | "
                    f"{wall / floor[0]:.2f} / {cpu / floor[1]:.2f} | {shrunk:.1f} | {(wall - shrunk) / floor[0]:.2f} | "
                    f"{', '.join(f'{w:.1f}' for w in walls[v])} |")
    command = "python benchmarks/build_time.py --repeats {} {}{}".format(
        args.repeats, " ".join(f"--only '{f}'" for f in args.only),
        f" --backend-path {args.backend_path}" if args.backend_path else "")
    text = (f"## {args.label or 'Build time'}\n\nCommand: `{command.strip()}` ({time.strftime('%Y-%m-%d %H:%M')}, "
            f"{os.cpu_count()} cores shared with other jobs).\n\n" + "\n".join(rows) + "\n")
    print(text)
    with args.out.open("a") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
