"""``python -m build`` of example_project: before and after the light build environment, and without the hook.

    python benchmarks/build_env.py [--repeats 5] [--before-ref main] [--out benchmarks/BUILD_ENV.md]

Three variants of example_project, built the same way (``python -m build``: sdist, then the wheel
from the unpacked sdist, each in a fresh isolated environment that pip fills from its warm cache):

- ``before``: ``requires = ["hatch-shrinkray==V"]`` served by a wheel of ``--before-ref`` (whose
  own dependencies carried onnx, onnxruntime and numpy into every build environment);
- ``after``: ``requires = ["hatch-shrinkray-core==V"]`` from this tree (the engine is installed only
  by the step whose hook asks for it);
- ``no hook``: ``requires = ["hatchling"]`` and no hook table (the floor).

Runs are interleaved (every repeat builds each variant once, in rotating order) after one
unmeasured warm-up per variant; each run gets a fresh shrink cache, so the hook really shrinks in
the sdist step. Reported: medians of wall time and of CPU time (user + system of all child
processes), and what each step installed (from build's own log).
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
EXAMPLE = REPO / "example_project"
PY = sys.executable
HOOK_TABLE = re.compile(r"\n\[tool\.hatch\.build\.hooks\.shrinkray\][^\[]*", re.S)


def wheel_of(source: Path, out: Path) -> None:
    subprocess.run([PY, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(source)],
                   check=True, capture_output=True)


def variants(work: Path, before_ref: str) -> dict[str, tuple[Path, Path]]:
    """``name -> (project, wheelhouse)``."""
    before_src, before_house, after_house = work / "before-src", work / "before-house", work / "after-house"
    before_src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", before_ref], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(before_src)], input=archive.stdout, check=True)
    wheel_of(before_src, before_house)
    wheel_of(REPO, after_house)
    text = (EXAMPLE / "pyproject.toml").read_text()
    requires = re.search(r'requires = \[.*\]', text)
    assert requires is not None
    out = {}
    for name, house, req in (("before", before_house, '["hatchling>=1.21", "hatch-shrinkray==0.1.0"]'),
                             ("after", after_house, '["hatchling>=1.21", "hatch-shrinkray-core==0.1.0"]'),
                             ("no hook", after_house, '["hatchling>=1.21"]')):
        project = work / name.replace(" ", "-")
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("dist", "build", "__pycache__"))
        body = text.replace(requires.group(0), f"requires = {req}")
        if name == "no hook":
            body = HOOK_TABLE.sub("\n", body)
        (project / "pyproject.toml").write_text(body)
        out[name] = (project, house)
    return out


def installed(log: str) -> tuple[str, str]:
    """The packages pip installed for the sdist step and for the wheel-from-sdist step (``build -v``)."""
    sdist_step, _, wheel_step = log.partition("* Building wheel from sdist")

    def names(part: str) -> str:
        found: list[str] = []
        for block in re.findall(r"Installing collected packages:((?:.*\n)(?:  .*\n)*)", part):
            found += [n for n in re.split(r"[,\s]+", block) if n]
        return ", ".join(sorted(set(found), key=str.lower))

    return names(sdist_step), names(wheel_step)


def build_once(project: Path, house: Path, work: Path) -> tuple[float, float, str]:
    shutil.rmtree(project / "dist", ignore_errors=True)
    cache = Path(tempfile.mkdtemp(dir=work, prefix="cache-"))
    env = {**os.environ, "PIP_FIND_LINKS": str(house), "HATCH_SHRINKRAY_CACHE_DIR": str(cache)}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "HATCH_BUILD_NO_HOOKS"):
        env.pop(name, None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([PY, "-m", "build", "-v", "--outdir", "dist"], cwd=project, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(cache)
    if done.returncode != 0:
        raise SystemExit(f"build of {project} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + done.stderr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--before-ref", default="main")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "BUILD_ENV.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="build-env-bench-") as tmp:
        work = Path(tmp)
        projects = variants(work, args.before_ref)
        logs = {}
        for name, (project, house) in projects.items():  # warm-up: fills pip's cache, not measured
            logs[name] = build_once(project, house, work)[2]
        walls: dict[str, list[float]] = {n: [] for n in projects}
        cpus: dict[str, list[float]] = {n: [] for n in projects}
        names = list(projects)
        for r in range(args.repeats):
            for name in names[r % len(names):] + names[: r % len(names)]:
                wall, cpu, _ = build_once(*projects[name], work)
                walls[name].append(wall)
                cpus[name].append(cpu)
                print(f"repeat {r + 1} {name}: wall {wall:.1f} s, cpu {cpu:.1f} s", flush=True)
    rows = ["| variant | wall median (s) | CPU median (s) | wall runs (s) | sdist step installed | "
            "wheel-from-sdist step installed |", "|---|---|---|---|---|---|"]
    for name in projects:
        sdist_step, wheel_step = installed(logs[name])
        rows.append(f"| {name} | {statistics.median(walls[name]):.1f} | {statistics.median(cpus[name]):.1f} | "
                    f"{', '.join(f'{w:.1f}' for w in walls[name])} | {sdist_step} | {wheel_step} |")
    command = f"python benchmarks/build_env.py --repeats {args.repeats} --before-ref {args.before_ref}"
    text = (f"# Build environment: `python -m build` of example_project\n\n"
            f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, machine shared with "
            f"other jobs; pip cache warm, a fresh shrink cache per build).\n\n" + "\n".join(rows) + "\n")
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
