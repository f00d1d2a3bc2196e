"""Held-out acceptance check of issue 19 on real packages from PyPI, as a new user meets them.

    python -m benchmarks.packages [--only silero|ocr] [--variants int8,int8+rec,auto+rec] [--redo STEP]
    python -m benchmarks.packages --report-only          # rewrite PACKAGES.md from the cached results

Two packages, three variants each, everything through the installed console script and real builds:

* ``int8``     round-to-nearest int8, no recording (``method = "int8"``, no ``inputs``);
* ``int8+rec`` int8 with the recording (the README's flow: output-aware rounding where it pays);
* ``auto+rec`` ``method = "auto"`` with the recording.

**silero-vad 6.2.3** (hatchling, 6 ONNX models in ``src/silero_vad/data``): the sdist is copied, its
``pyproject.toml`` gets ``hatch-shrinkray-core`` in ``build-system.requires`` and a
``[tool.hatch.build.hooks.shrinkray]`` table for ``src/silero_vad/data/*.onnx``; inputs are recorded with
``hatch-shrinkray record --output tests/shrinkray-inputs -- sh -c 'python -m pytest tests; python
calibrate_vad.py calibrate'`` in a dev venv holding the original wheel (the package's own tests plus a
10-clip calibration script: ``benchmarks/packages_silero.py``); each variant is built with
``PIP_FIND_LINKS=<wheelhouse of this checkout> python -m build`` (sdist, then the wheel from it), the wheel
installed into a fresh venv, and judged by (a) the package's own test suite (per-test outcomes from
JUnit XML, compared with the original wheel's), (b) 24 held-out clips through four API paths
(speech timestamps identical to the original wheel's, per path), (c) build time and the build's lines.

**rapidocr-onnxruntime 1.4.4** (setuptools wheel, no sdist on PyPI: its upstream tests are those of the
``v1.4.4`` tag of its repository, taken with ``git archive`` from a local mirror, ``--rapidocr-git``):
recorded from those tests plus a 12-page calibration script (``benchmarks/packages_ocr.py``), configured in
``[tool.hatch-shrinkray]`` of a small project dir, rewritten with ``hatch-shrinkray wheel <PyPI wheel> -o
wheelhouse``, installed into a fresh venv, judged by the upstream tests and 60 held-out rendered pages
(full OCR result identical: boxes rounded to pixels + texts; and lines identical).

Heavy things live in ``benchmarks/.cache/packages/`` (gitignored): base venvs (torch 2.13.0 CPU for
silero-vad; opencv etc. for rapidocr) that each per-variant venv reaches through a ``.pth`` file (the
package under test is installed fresh, ``--no-deps``, into its own venv), audio and page caches, and per
engine commit (``git rev-parse HEAD``; ``-dirty`` when ``hatch_shrinkray/`` has changes) the wheelhouse,
projects, logs and results. Each step writes a JSON result and is skipped when it exists (``--redo STEP``
re-runs ``record``, ``build``, ``eval``). Commands run under ``nice``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from benchmarks.common import engine_notes

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CACHE = BENCH / ".cache" / "packages"
MD = BENCH / "PACKAGES.md"
VARIANTS = ["int8", "int8+rec", "auto+rec"]
PY = "python3"
PYTEST = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
RAPIDOCR_GIT = Path("/work/.mirror/RapidAI+RapidOCR/repo")

SILERO = {
    "key": "silero",
    "name": "silero-vad 6.2.3",
    "sdist": "silero-vad==6.2.3",
    "wheel": "silero-vad==6.2.3",
    "glob": "src/silero_vad/data/*.onnx",
    "inputs": "tests/shrinkray-inputs",
    "base": ["torch==2.13.0", "soundfile", "pytest==9.2.0", "numpy==2.4.6", "onnxruntime==1.32.0", "packaging"],
    "tests": ["tests"],
    "workload": "packages_silero.py",
    "calibrate": "calibrate_vad.py",
}
OCR = {
    "key": "ocr",
    "name": "rapidocr-onnxruntime 1.4.4",
    "wheel": "rapidocr-onnxruntime==1.4.4",
    "glob": "rapidocr_onnxruntime/models/*.onnx",
    "inputs": "shrinkray-inputs",
    "base": ["pyclipper", "opencv-python", "numpy==2.4.6", "six", "Shapely!=2.0.4", "PyYAML", "Pillow",
             "onnxruntime==1.32.0", "tqdm", "requests", "pytest==9.2.0"],
    "tests": ["tests/test_ort.py"],  # the onnxruntime package's tests (test_paddle/test_vino: other packages)
    "workload": "packages_ocr.py",
    "calibrate": "calibrate_pages.py",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def engine_rev() -> str:
    """The last commit that changed the engine or its packaging (benchmark-only commits keep the cache)."""
    rev = subprocess.run(["git", "log", "-1", "--format=%H", "--", "hatch_shrinkray", "pyproject.toml", "metapackage"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()[:12]
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "hatch_shrinkray", "pyproject.toml"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.strip()
    return rev + ("-dirty" if dirty else "")


def run(cmd: list[str], cwd: Path, logfile: Path, env: dict[str, str] | None = None,
        path_venv: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` (under nice) with stdout+stderr to ``logfile``, each line stamped with the seconds since
    the start: exit code, wall, the child's CPU time (``os.wait4``), and the longest silence between two
    lines of output (a step that says nothing for more than a minute is a finding)."""
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("PYTHONPATH", None)
    full_env.pop("VIRTUAL_ENV", None)
    if path_venv is not None:
        full_env["PATH"] = f"{path_venv / 'bin'}:{full_env['PATH']}"
        full_env["VIRTUAL_ENV"] = str(path_venv)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    last, gap, gap_after = t0, 0.0, ""
    prev = ""
    with open(logfile, "w") as out:
        out.write(f"$ (cd {cwd} && {' '.join(cmd)})\n")
        proc = subprocess.Popen(["nice", "-n", "10", *cmd], cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            if now - last > gap:
                gap, gap_after = now - last, prev
            last, prev = now, line.rstrip()[:200]
            out.write(f"{now - t0:8.1f} {line}")
            out.flush()
        _, status, usage = os.wait4(proc.pid, 0)
        end = time.perf_counter()
        if end - last > gap:
            gap, gap_after = end - last, prev
    return {"rc": os.waitstatus_to_exitcode(status), "wall": end - t0, "cpu": usage.ru_utime + usage.ru_stime,
            "max_silence": gap, "silence_after": gap_after, "log": str(logfile.relative_to(CACHE))}


def check(res: dict[str, Any], what: str) -> None:
    if res["rc"] != 0:
        raise SystemExit(f"{what} failed (exit {res['rc']}): see {CACHE / res['log']}")


# ----------------------------------------------------------------------------------------------- setup


def base_venv(pkg: dict[str, Any]) -> Path:
    """The heavy dependencies, once (engine-independent)."""
    venv = CACHE / f"venv-{pkg['key']}-base"
    if not (venv / ".ok").exists():
        log(f"creating {venv.name}")
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([PY, "-m", "venv", str(venv)], check=True)
        subprocess.run(["nice", str(venv / "bin" / "pip"), "install", "-q", *pkg["base"]], check=True)
        (venv / ".ok").write_text("")
    return venv


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def fresh_venv(path: Path, base: Path, install: list[str]) -> Path:
    """A new venv that sees ``base``'s packages through a .pth file, with ``install`` pip-installed into
    it (``--no-deps``: the package under test, fresh)."""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([PY, "-m", "venv", str(path)], check=True)
    (site_packages(path) / "zz_base.pth").write_text(f"{site_packages(base)}\n")
    subprocess.run(["nice", str(path / "bin" / "pip"), "install", "-q", "--no-deps", *install], check=True,
                   stdout=subprocess.DEVNULL)
    return path


def download(pkg: dict[str, Any]) -> tuple[Path | None, Path]:
    """The sdist (when the package publishes one) and the PyPI wheel."""
    dl = CACHE / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    name = pkg["wheel"].split("==")[0].replace("-", "_")
    wheels = sorted(dl.glob(f"{name}-*.whl"))
    if not wheels:
        subprocess.run(["pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(dl),
                        pkg["wheel"]], check=True)
        wheels = sorted(dl.glob(f"{name}-*.whl"))
    sdist = None
    if "sdist" in pkg:
        sdists = sorted(dl.glob(f"{name}-*.tar.gz"))
        if not sdists:
            subprocess.run(["pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(dl),
                            pkg["sdist"]], check=True)
            sdists = sorted(dl.glob(f"{name}-*.tar.gz"))
        sdist = sdists[0]
    return sdist, wheels[0]


def unpacked_sdist(sdist: Path) -> Path:
    src = CACHE / "src"
    top = src / sdist.name.removesuffix(".tar.gz")
    if not top.exists():
        src.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as tf:
            tf.extractall(src, filter="data")
        isolate_pytest(top)
    return top


def rapidocr_tests(git_dir: Path) -> Path:
    """``python/tests`` of the v1.4.4 tag (the tests of the release on PyPI), as ``tests/`` of a dir that
    holds nothing else (so the installed package is imported, not a source tree)."""
    top = CACHE / "src" / "rapidocr-v1.4.4-tests"
    if not (top / "tests").exists():
        if not git_dir.exists():
            raise SystemExit(f"no mirror of RapidAI/RapidOCR at {git_dir} (--rapidocr-git): its upstream tests "
                             "are not in the PyPI wheel")
        tmp = top.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "v1.4.4", "python/tests"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "python" / "tests").rename(tmp / "tests")
        (tmp / "python").rmdir()
        isolate_pytest(tmp)
        shutil.rmtree(top, ignore_errors=True)
        tmp.rename(top)
    return top


def isolate_pytest(top: Path) -> None:
    """An empty ``pytest.ini`` at the top of the package's tree: pytest would otherwise take this
    repository's ``pyproject.toml`` (its options, plugins, timeouts) as the configuration of a tree that
    lies inside it, here in ``benchmarks/.cache``. In the package's own checkout nothing is above it."""
    (top / "pytest.ini").write_text("[pytest]\n")


def wheelhouse(work: Path) -> Path:
    """This checkout's wheels (hatch-shrinkray-core and the metapackage), as the README's frontend recipe."""
    wh = work / "wheelhouse"
    if not (wh / ".ok").exists():
        shutil.rmtree(wh, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wh), str(REPO),
                        str(REPO / "metapackage")], check=True)
        (wh / ".ok").write_text("")
    return wh


def dev_venv(pkg: dict[str, Any], work: Path, wheel: Path) -> Path:
    """The user's dev environment: the original wheel, hatch-shrinkray (from the wheelhouse), build."""
    venv = work / f"venv-{pkg['key']}-dev"
    if not (venv / ".ok").exists():
        log(f"creating {venv.name}")
        fresh_venv(venv, base_venv(pkg), ["--no-deps", str(wheel)])
        subprocess.run(["nice", str(venv / "bin" / "pip"), "install", "-q", "--find-links", str(wheelhouse(work)),
                        "hatch-shrinkray==0.1.0", "build"], check=True, stdout=subprocess.DEVNULL)
        (venv / ".ok").write_text("")
    return venv


# --------------------------------------------------------------------------------------------- configs


def hook_table(pkg: dict[str, Any], variant: str) -> str:
    lines = [f'models = ["{pkg["glob"]}"]', f'method = "{variant.split("+", maxsplit=1)[0]}"']
    if variant.endswith("+rec"):
        lines.append(f'inputs = "{pkg["inputs"]}"')
    return "\n".join(lines) + "\n"


def silero_pyproject(original: str, variant: str) -> str:
    text = original.replace('requires = ["hatchling"]', 'requires = ["hatchling", "hatch-shrinkray-core==0.1.0"]')
    assert text != original, "silero-vad's build-system.requires changed"
    return text.rstrip() + "\n\n[tool.hatch.build.hooks.shrinkray]\n" + hook_table(SILERO, variant)


def ocr_pyproject(variant: str) -> str:
    return ('[project]\nname = "rapidocr-shrunk"\nversion = "0"\n\n[tool.hatch-shrinkray]\n'
            + hook_table(OCR, variant))


# ------------------------------------------------------------------------------------------- recording


def record(pkg: dict[str, Any], work: Path, dev: Path, project: Path, redo: bool) -> dict[str, Any]:
    out = work / pkg["key"] / "record.json"
    if out.exists() and not redo:
        cached = dict(json.loads(out.read_text()))
        text = (CACHE / cached["log"]).read_text()
        cached["never_ran"] = re.findall(r"note: (\S+) is configured but the command never ran it", text)
        cached["coverage"] = coverage(text)
        return cached
    log(f"{pkg['key']}: recording")
    rec = project / pkg["inputs"]
    shutil.rmtree(rec, ignore_errors=True)
    copy_scripts(pkg, project, pkg["calibrate"])
    script = f"{' '.join([*PYTEST, *pkg['tests']])}; python {pkg['calibrate']} calibrate {CACHE / 'data'}"
    cmd = ["hatch-shrinkray", "record", "--output", pkg["inputs"], "--", "sh", "-c", script]
    res = run(cmd, project, work / pkg["key"] / "record.log", path_venv=dev)
    check(res, "record")
    res["command"] = f"hatch-shrinkray record --output {pkg['inputs']} -- sh -c '{script}'"
    res["files"] = {p.name: p.stat().st_size for p in sorted(rec.glob("*.npz"))}
    text = (CACHE / res["log"]).read_text()
    res["never_ran"] = re.findall(r"note: (\S+) is configured but the command never ran it", text)
    res["coverage"] = coverage(text)
    out.write_text(json.dumps(res, indent=1))
    return res


def coverage(text: str) -> list[str]:
    """The coverage table ``record`` ends with, and the lines after it."""
    lines = [ln[9:] for ln in text.splitlines()[1:]]
    start = max((i for i, ln in enumerate(lines) if ln.startswith("model ") and "recording" in ln), default=0)
    return lines[start:]


def short(test: str) -> str:
    """A test id without the directories of its parameters."""
    return re.sub(r"[^\[\]\s]*/", "", test.split("::", 1)[-1])


# ---------------------------------------------------------------------------------------------- builds


def build_silero(work: Path, dev: Path, sdist_dir: Path, recorded: Path, *, variant: str, redo: bool,
                 never_ran: list[str]) -> dict[str, Any]:
    vdir = work / "silero" / variant
    out = vdir / "build.json"
    if out.exists() and not redo:
        return dict(json.loads(out.read_text()))
    log(f"silero: building {variant}")
    proj = vdir / "project"
    shutil.rmtree(proj, ignore_errors=True)
    shutil.copytree(sdist_dir, proj)
    (proj / "pyproject.toml").write_text(silero_pyproject((sdist_dir / "pyproject.toml").read_text(), variant))
    if variant.endswith("+rec"):
        shutil.copytree(recorded, proj / SILERO["inputs"])
    cache_dir = vdir / "shrinkray-cache"  # an empty shrink cache: the build does the work
    shutil.rmtree(cache_dir, ignore_errors=True)
    env = {"PIP_FIND_LINKS": str(wheelhouse(work)), "HATCH_SHRINKRAY_CACHE_DIR": str(cache_dir)}
    res = run(["python", "-m", "build", "--outdir", "dist"], proj, vdir / "build.log", env=env, path_venv=dev)
    res["command"] = f"PIP_FIND_LINKS={{wheelhouse}} python -m build  # {hook_table(SILERO, variant)!r}"
    res["lines"] = shrinkray_lines(CACHE / res["log"])
    if res["rc"] != 0:  # what a user does next (README): see fallback()
        first = res
        with open(proj / "pyproject.toml", "a") as f:
            f.write(fallback(SILERO, variant, never_ran))
        shutil.rmtree(proj / "dist", ignore_errors=True)
        shutil.rmtree(cache_dir, ignore_errors=True)
        res = run(["python", "-m", "build", "--outdir", "dist"], proj, vdir / "build-fallback.log", env=env,
                  path_venv=dev)
        res["command"] = first["command"] + f" then again with {fallback(SILERO, variant, never_ran)!r}"
        res["lines"] = shrinkray_lines(CACHE / res["log"])
        res["first_attempt"] = first
    wheels = sorted((proj / "dist").glob("*.whl"))
    res["wheel"] = str(wheels[0]) if wheels and res["rc"] == 0 else None
    out.write_text(json.dumps(res, indent=1))
    return res


def rewrite_ocr(work: Path, dev: Path, wheel: Path, recorded: Path, *, variant: str, redo: bool,
                never_ran: list[str]) -> dict[str, Any]:
    vdir = work / "ocr" / variant
    out = vdir / "build.json"
    if out.exists() and not redo:
        return dict(json.loads(out.read_text()))
    log(f"ocr: rewriting the wheel, {variant}")
    proj = vdir / "project"
    shutil.rmtree(proj, ignore_errors=True)
    proj.mkdir(parents=True)
    (proj / "pyproject.toml").write_text(ocr_pyproject(variant))
    if variant.endswith("+rec"):
        shutil.copytree(recorded, proj / OCR["inputs"])
    cache_dir = vdir / "shrinkray-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.rmtree(proj / "wheelhouse", ignore_errors=True)
    res = run(["hatch-shrinkray", "wheel", str(wheel), "-o", "wheelhouse"], proj, vdir / "build.log",
              env={"HATCH_SHRINKRAY_CACHE_DIR": str(cache_dir)}, path_venv=dev)
    res["command"] = f"hatch-shrinkray wheel {wheel.name} -o wheelhouse  # {hook_table(OCR, variant)!r}"
    res["lines"] = shrinkray_lines(CACHE / res["log"])
    if res["rc"] != 0:
        first = res
        with open(proj / "pyproject.toml", "a") as f:
            f.write(fallback(OCR, variant, never_ran))
        shutil.rmtree(cache_dir, ignore_errors=True)
        res = run(["hatch-shrinkray", "wheel", str(wheel), "-o", "wheelhouse"], proj, vdir / "build-fallback.log",
                  env={"HATCH_SHRINKRAY_CACHE_DIR": str(cache_dir)}, path_venv=dev)
        res["command"] = first["command"] + f" then again with {fallback(OCR, variant, never_ran)!r}"
        res["lines"] = shrinkray_lines(CACHE / res["log"])
        res["first_attempt"] = first
    wheels = sorted((proj / "wheelhouse").glob("*.whl"))
    res["wheel"] = str(wheels[0]) if wheels and res["rc"] == 0 else None
    out.write_text(json.dumps(res, indent=1))
    return res


def fallback(pkg: dict[str, Any], variant: str, never_ran: list[str]) -> str:
    """When the configuration as the README gives it fails to build, what is appended to the table for a
    second build: the round-to-nearest baseline (no recording) gets ``verify = false`` (generated inputs
    can fail a recurrent model that real inputs pass; the bytes are the same); with a recording, the
    configured models that the recorded command never ran get an override to round-to-nearest int8
    without verification, the same bytes as in the baseline, so only the recorded models differ."""
    if not variant.endswith("+rec"):
        return "verify = false\n"
    table = "tool.hatch.build.hooks.shrinkray" if pkg["key"] == "silero" else "tool.hatch-shrinkray"
    models = ", ".join(f'"{m}"' for m in never_ran)
    return f'\n[[{table}.overrides]]\nmodels = [{models}]\nmethod = "int8"\nverify = false\n'


def shrinkray_lines(logfile: Path) -> list[str]:
    """What the build said about the models (the lines that name a model, warnings, errors), in order,
    without repeats (the wheel-from-sdist step repeats the manifest matches)."""
    keep: list[str] = []
    for raw in logfile.read_text().splitlines()[1:]:
        line = raw[9:]
        wanted = re.search(r"\.onnx|shrinkray|warning|error", line, re.I) and "Location 'file" not in line
        if wanted and line not in keep:
            keep.append(line)
    return keep


def wheel_models(wheel: Path) -> dict[str, dict[str, int]]:
    with zipfile.ZipFile(wheel) as zf:
        return {Path(i.filename).name: {"raw": i.file_size, "wheel": i.compress_size}
                for i in zf.infolist() if i.filename.endswith(".onnx")}


# ---------------------------------------------------------------------------------------------- judges


def copy_scripts(pkg: dict[str, Any], dest: Path, name: str) -> Path:
    """The workload script as ``dest/name`` (with ``render.py`` beside it for the OCR pages): run from there,
    not from ``benchmarks/``, whose modules must not shadow anything in the package's venv."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(BENCH / pkg["workload"], dest / name)
    if pkg["key"] == "ocr":
        shutil.copy(BENCH / "tasks" / "render.py", dest / "render.py")
    return dest / name


def evaluate(pkg: dict[str, Any], work: Path, label: str, wheel: Path, tests_dir: Path, *,
             redo: bool) -> dict[str, Any]:
    """Install ``wheel`` into a fresh venv; run the package's tests (JUnit XML) and the held-out workload."""
    vdir = (CACHE / "original" / pkg["key"]) if label == "original" else work / pkg["key"] / label
    out = vdir / "eval.json"
    if out.exists() and not redo:
        return dict(json.loads(out.read_text()))
    log(f"{pkg['key']}: evaluating {label}")
    venv = fresh_venv(vdir / "venv", base_venv(pkg), [str(wheel)])
    junit = vdir / "tests.xml"
    tests = run([*PYTEST, *pkg["tests"], f"--junitxml={junit}"], tests_dir, vdir / "tests.log", path_venv=venv)
    tests["outcomes"] = junit_outcomes(junit)
    heldout_json = vdir / "heldout.json"
    script = copy_scripts(pkg, vdir, "heldout_" + pkg["workload"])
    held = run(["python", str(script), "heldout", str(CACHE / "data"), str(heldout_json)],
               tests_dir, vdir / "heldout.log", path_venv=venv)
    check(held, f"{pkg['key']} held-out workload ({label})")
    res = {"wheel": str(wheel), "models": wheel_models(wheel), "tests": tests,
           "heldout": json.loads(heldout_json.read_text()), "heldout_run": held}
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False))
    return res


def junit_outcomes(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    out = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return out


def regressions(orig: dict[str, str], new: dict[str, str]) -> list[str]:
    return sorted(t for t, o in orig.items() if o == "passed" and new.get(t) != "passed")


def silero_identical(orig: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[int, int]]:
    from benchmarks.packages_silero import PATHS

    return {p: (sum(orig[c][p] == new[c][p] for c in orig), len(orig)) for p in PATHS}


def ocr_identical(orig: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[int, int]]:
    pages = sum(orig[p] == new[p] for p in orig)
    lines = total = texts = 0
    for p, lines_o in orig.items():
        have = Counter(json.dumps(x) for x in new[p])
        have_t = Counter(x[1] for x in new[p])
        for x in lines_o:
            total += 1
            key = json.dumps(x)
            if have[key] > 0:
                have[key] -= 1
                lines += 1
            if have_t[x[1]] > 0:
                have_t[x[1]] -= 1
                texts += 1
    return {"pages": (pages, len(orig)), "lines (box + text)": (lines, total), "line texts": (texts, total)}


# --------------------------------------------------------------------------------------------- drivers


def do_package(pkg: dict[str, Any], work: Path, variants: list[str], redo: set[str], git_dir: Path) -> None:
    sdist, wheel = download(pkg)
    dev = dev_venv(pkg, work, wheel)
    project = work / pkg["key"] / "record-project"
    if pkg["key"] == "silero":
        assert sdist is not None
        sdist_dir = unpacked_sdist(sdist)
        tests_dir = sdist_dir
        if not project.exists() or "record" in redo:
            shutil.rmtree(project, ignore_errors=True)
            shutil.copytree(sdist_dir, project)
            (project / "pyproject.toml").write_text(
                silero_pyproject((sdist_dir / "pyproject.toml").read_text(), "int8+rec"))
    else:
        tests_dir = rapidocr_tests(git_dir)
        if not project.exists() or "record" in redo:
            shutil.rmtree(project, ignore_errors=True)
            shutil.copytree(tests_dir, project)
            (project / "pyproject.toml").write_text(ocr_pyproject("int8+rec"))
    base_venv(pkg)
    evaluate(pkg, work, "original", wheel, tests_dir, redo="eval-original" in redo)
    rec = record(pkg, work, dev, project, "record" in redo)
    recorded = project / pkg["inputs"]
    for variant in variants:
        if pkg["key"] == "silero":
            built = build_silero(work, dev, sdist_dir, recorded, variant=variant, redo="build" in redo,
                                     never_ran=rec["never_ran"])
        else:
            built = rewrite_ocr(work, dev, wheel, recorded, variant=variant, redo="build" in redo,
                                     never_ran=rec["never_ran"])
        if built["wheel"] is None:
            log(f"{pkg['key']} {variant}: no wheel (exit {built['rc']}), see {CACHE / built['log']}")
            continue
        evaluate(pkg, work, variant, Path(built["wheel"]), tests_dir, redo="eval" in redo)


# ---------------------------------------------------------------------------------------------- report


def fmt_size(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{n / 1e3:.1f} KB"


def load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


FOLLOW_UP_ENGINES = ("a43786320f1a",)
"""The engine whose run the follow-up below was written after (``engine_notes``)."""
FOLLOW_UP = """## Follow-up, after the run above (2026-11-26, engine `7128cb8`+)

**Why int8 with the recording fails 4 upstream tests of rapidocr and round-to-nearest 1.** The four
(`test_det_cls_rec`, `test_input_bytes`, `test_input_path`, `test_input_str`) are one image
(`ch_en_num.jpg`) and one assertion (`result[0][1] == "正品促销"`): one independent unit, as
round-to-nearest's one (`test_word_ocr`, `见` for `見`). Swapping models in the int8+rec wheel: with
the round-to-nearest detector every upstream test passes (output-aware rounding of the recogniser
fixes `test_word_ocr`); the detector's output-aware rounding is the cause. What it changes: the
headline's box moves by one pixel at two corners (`[[6,2],[322,9],[320,104],[4,97]]` ->
`[[6,2],[322,9],[319,104],[4,96]]`); with the angle classifier on, the recogniser then reads `""`
(score 0) there and the line is dropped; with `use_cls=False` the same box reads `正品促销` at 0.999.
No judge of the detector's map can see a one-pixel shift (IoU ~0.99); the guard compared the
detector on the recording's 17 pages with the map judge (2 maps changed against round-to-nearest's
3, 2287 against 3795 flipped pixels) and kept it, and on 60 held-out pages the int8+rec wheel keeps
20 pages identical against round-to-nearest's 7. `hatch-shrinkray check -- python -m pytest tests`
is the tool that judges as the package's tests do, and names this regression.

**silero-vad's first build after `record`** (the int8+rec project above without its `overrides`
table, built with hatchling in-process): it used to stop on `silero_vad_half.onnx`, which the tests
never ran (int8 on generated noise drifts past the limits). It now ships that model's original and
`silero_vad_op18_ifless.onnx`'s, each with a line saying why and the `record` command that lets the
next build shrink them, shrinks the other four as before, and the build succeeds (10.28 MB -> 6.11 MB
of models, 18 s).

**The switch `check` now names, tried on rapidocr (2026-11-27, engine `e60f52f`).** The int8+rec
project above with one override, `rounding = "nearest"` for `ch_PP-OCRv4_det_infer.onnx` (what the
hint of `hatch-shrinkray check` now says for a model whose fitted codes a regressing run used), the
same recording, rewritten with `hatch-shrinkray wheel` (194 s; the detector's line says
`round-to-nearest, as configured (rounding = "nearest"): the inputs only verify`, the recogniser's
`output-aware rounding kept`), installed into a fresh venv beside the base packages, judged by the
upstream tests and the same 60 held-out pages (`heldout_packages_ocr.py heldout`):

| wheel | upstream passed / failed | regressions | held-out pages same | lines (box + text) | pages, boxes same |
|---|---|---|---|---|---|
| int8 (round-to-nearest) | 26 / 2 | 1 | 7/60 | 230/352 | 13/60 |
| int8+rec | 23 / 5 | 4 | 20/60 | 296/352 | 28/60 |
| int8+rec, detector `rounding = "nearest"` | 27 / 1 | **0** | 10/60 | 268/352 | 14/60 |

(The one failure left, `test_long_img`, fails with the original wheel too: it downloads an image
from github.com. The first two rows are the run above; "pages with identical boxes" counts pages
whose box lists equal the original's, from the same `heldout.json` files.) So the package's own tests
and its unseen pages disagree about the detector: the fitted one keeps 28 of 60 unseen pages' boxes
against 13 for round-to-nearest, and breaks one upstream image. The guard decides on held-out
recorded units and keeps it; the tests are the maintainer's to weigh, and `check` now says which
switch trades one for the other.
"""
"""Findings from after the run (hand-written: ``report`` appends them so a re-run keeps them)."""


def report(work: Path, rev: str) -> str:
    from benchmarks.packages_silero import PATHS

    md = ["# Held-out acceptance check on real packages (issue 19)", "",
          f"Engine `{rev}` (this checkout, installed from its own wheels: `hatch-shrinkray-core` + the "
          f"`hatch-shrinkray` metapackage in a local wheelhouse, `PIP_FIND_LINKS` for the build frontends). "
          f"Python {platform.python_version()}, onnxruntime 1.32.0, numpy 2.4.6, on the shared 2-core VM "
          f"(other agents' jobs ran at the same time: times are indicative). Written "
          f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `python -m benchmarks.packages`.", ""]
    md += ["```sh", "apt-get install -y espeak-ng fonts-dejavu-core",
           ".venv/bin/python -m benchmarks.packages            # everything, cached per engine commit",
           ".venv/bin/python -m benchmarks.packages --report-only", "```", ""]
    for pkg in (SILERO, OCR):
        md += package_report(pkg, work, PATHS)
    return "\n".join(md) + "\n\n" + engine_notes(FOLLOW_UP, FOLLOW_UP_ENGINES, [rev], "PACKAGES.md")


def package_report(pkg: dict[str, Any], work: Path, paths: dict[str, str]) -> list[str]:
    md = [f"## {pkg['name']}", ""]
    orig = load(CACHE / "original" / pkg["key"] / "eval.json")
    rec = load(work / pkg["key"] / "record.json")
    if orig is None or rec is None:
        return [*md, "(not run yet)", ""]
    rec["coverage"] = coverage((CACHE / rec["log"]).read_text())
    oc = Counter(orig["tests"]["outcomes"].values())
    md += [f"Original wheel: tests {dict(sorted(oc.items()))} ({orig['tests']['wall']:.0f} s).", ""]
    md += ["### Recording", "", "```sh", rec["command"], "```", "",
           f"{rec['wall']:.0f} s wall, {rec['cpu']:.0f} s CPU (the command itself included); "
           f"files: " + ", ".join(f"`{k}` {fmt_size(v)}" for k, v in rec["files"].items()) + ".", "",
           "```", *rec["coverage"], "```", ""]
    results: dict[str, Any] = {"original": orig}
    builds: dict[str, Any] = {}
    for v in VARIANTS:
        b = load(work / pkg["key"] / v / "build.json")
        if b is not None:
            builds[v] = b
            e = load(work / pkg["key"] / v / "eval.json")
            if e is not None:
                results[v] = e
    md += ["### Results", ""]
    heads = (["path (model)"] if pkg["key"] == "silero" else ["measure"])
    md += ["| variant | " + " | ".join(["tests passed / failed / skipped", "regressions vs original",
                                          "build/rewrite wall / CPU s", "longest silence s"]) + " |",
           "|---|---|---|---|---|"]
    for v, b in builds.items():
        e = results.get(v)
        if e is None:
            md.append(f"| {v} | build failed (exit {b['rc']}) | - | {b['wall']:.0f} / {b['cpu']:.0f} | "
                      f"{b['max_silence']:.0f} |")
            continue
        c = Counter(e["tests"]["outcomes"].values())
        reg = regressions(orig["tests"]["outcomes"], e["tests"]["outcomes"])
        md.append(f"| {v} | {c['passed']} / {c['failed']} / {c['skipped']} | {len(reg)} "
                  f"{'(' + ', '.join(short(r) for r in reg) + ')' if reg else ''} | "
                  f"{b['wall']:.0f} / {b['cpu']:.0f} | {b['max_silence']:.0f} |")
    md += ["", "Held-out items identical to the original wheel's:", ""]
    md += ["| " + heads[0] + " | " + " | ".join(v for v in results if v != "original") + " |",
           "|---|" + "---|" * (len(results) - 1)]
    ident = {v: (silero_identical if pkg["key"] == "silero" else ocr_identical)(orig["heldout"], e["heldout"])
             for v, e in results.items() if v != "original"}
    rows = list(paths) if pkg["key"] == "silero" else ["pages", "lines (box + text)", "line texts"]
    for r in rows:
        label = f"{r} (`{paths[r]}`)" if pkg["key"] == "silero" else r
        md.append(f"| {label} | " + " | ".join(f"{ident[v][r][0]}/{ident[v][r][1]}" for v in ident) + " |")
    md += ["", *verdict(pkg, orig, results, ident)]
    md += ["", "Sizes per model (raw bytes in the wheel / compressed in the wheel):", "",
           "| model | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for m in sorted(orig["models"]):
        cells = []
        for e in results.values():
            s = e["models"].get(m)
            cells.append(f"{fmt_size(s['raw'])} / {fmt_size(s['wheel'])}" if s else "-")
        md.append(f"| `{m}` | " + " | ".join(cells) + " |")
    md += ["", "What each build/rewrite said (its lines naming a model, warnings and errors):", ""]
    for v, b in builds.items():
        first = b.get("first_attempt")
        if first is not None:
            md += [f"**{v}, as configured** (exit {first['rc']}, {first['wall']:.0f} s):", "", "```",
                   *first["lines"], "```", ""]
        md += [f"**{v}{', second build' if first else ''}** (`{b['command']}`; exit {b['rc']}; longest silence "
               f"{b['max_silence']:.0f} s after `{b['silence_after'][:120]}`):", "", "```", *b["lines"], "```", ""]
    return md


def verdict(pkg: dict[str, Any], orig: dict[str, Any], results: dict[str, Any],
            ident: dict[str, dict[str, tuple[int, int]]]) -> list[str]:
    """Issue 19's bar, checked on the tables above: against round-to-nearest int8 (``int8``), no more test
    regressions and at least as many identical held-out items; the OCR package's upstream tests all pass
    with the default flow (``int8+rec``); ``auto`` no larger than int8 with the recording, model by model."""
    if "int8" not in results:
        return ["Bar: the round-to-nearest baseline is missing."]
    out = ["Issue 19's bar (against `int8`, round-to-nearest without a recording):", ""]
    base_reg = len(regressions(orig["tests"]["outcomes"], results["int8"]["tests"]["outcomes"]))
    for v in ("int8+rec", "auto+rec"):
        if v not in results:
            out.append(f"* {v}: no wheel.")
            continue
        reg = len(regressions(orig["tests"]["outcomes"], results[v]["tests"]["outcomes"]))
        worse = [f"{k} {ident[v][k][0]} < {ident['int8'][k][0]}" for k in ident[v]
                 if ident[v][k][0] < ident["int8"][k][0]]
        ok = reg <= base_reg and not worse
        out.append(f"* {v}: {reg} test regressions vs {base_reg} for int8; held-out "
                   + (f"worse: {', '.join(worse)}" if worse else "at least as many identical everywhere")
                   + f": **{'met' if ok else 'missed'}**.")
    if pkg["key"] == "ocr" and "int8+rec" in results:
        reg = regressions(orig["tests"]["outcomes"], results["int8+rec"]["tests"]["outcomes"])
        out.append(f"* upstream tests with the default flow (int8 + recording): {len(reg)} regressed: "
                   f"**{'met' if not reg else 'missed'}**.")
    if "auto+rec" in results and "int8+rec" in results:
        bigger = [f"`{m}` {fmt_size(s['raw'])} > {fmt_size(results['int8+rec']['models'][m]['raw'])}"
                  for m, s in results["auto+rec"]["models"].items()
                  if s["raw"] > results["int8+rec"]["models"][m]["raw"]]
        out.append("* auto no larger than int8 + recording: " + (f"larger for {', '.join(bigger)}" if bigger
                   else "never larger") + f": **{'missed' if bigger else 'met'}**.")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["silero", "ocr"])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--redo", action="append", default=[], choices=["record", "build", "eval", "eval-original"])
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--rapidocr-git", type=Path, default=RAPIDOCR_GIT)
    args = ap.parse_args()
    rev = engine_rev()
    work = CACHE / rev
    if not args.report_only:
        for pkg in (SILERO, OCR):
            if args.only in (None, pkg["key"]):
                do_package(pkg, work, args.variants.split(","), set(args.redo), args.rapidocr_git)
    MD.write_text(report(work, rev))
    log(f"wrote {MD}")


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(REPO))
    main()
