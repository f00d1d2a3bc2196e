"""Apps that ship models, frozen as their developers freeze them, with their models shrunk.

Two apps on PyPI packages that ship models (``benchmarks/apps``): an OCR tool on
rapidocr-onnxruntime 1.4.4 and a file-type tool on magika 1.0.3. Each is frozen three ways:

- PyInstaller onefile, with one line in the spec (``a.datas = shrink_datas(a.datas, ...)``);
- PyInstaller onedir, shrunk after the build (``hatch-shrinkray bundle dist/APP -o ...``);
- cx_Freeze (``build_exe``), shrunk after the build the same way.

Per app, the unfrozen app is recorded once on its calibration inputs (``hatch-shrinkray record -- python
app.py ...``: a frozen app cannot be recorded), and each frozen variant is built: the original, the
default flow (the recording as ``inputs``) and round-to-nearest int8 (``rounding = "nearest"``, the
do-no-harm floor) on the same recording. For each: the app's bytes on disk and zipped (deflate 9, as
a download), its models' bytes, start-up (one input, fresh process, median of interleaved runs), its
answers on held-out inputs against the original app's, and how long the shrink added to the build
(a cold cache); the default onefile is built twice more (a warm cache) and compared byte for byte.

    python -m benchmarks.bundles setup VENV        # the build venv: PyInstaller, cx_Freeze, the packages
    python -m benchmarks.bundles run VENV WORK [APP...]  # build (resumable: WORK/rows), measure: WORK/bundles-APPS.json
    python -m benchmarks.bundles table WORK/bundles-*.json
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"
PACKAGES = ["pyinstaller==6.22.3", "cx-Freeze==8.7.3", "rapidocr-onnxruntime==1.4.4", "magika==1.0.3", "Pillow"]
STARTS = 5
"""Start-up runs per variant (interleaved)."""

APP = {
    "ocr": {"script": "ocr_app.py", "package": "rapidocr_onnxruntime", "what": "pages read identically"},
    "filetype": {"script": "filetype_app.py", "package": "magika", "what": "files labelled identically"},
}
SPEC = '''\
# -*- mode: python ; coding: utf-8 -*-
from PyInstaller.utils.hooks import collect_data_files

a = Analysis([{script!r}], datas=collect_data_files({package!r}))
{shrink}
pyz = PYZ(a.pure)
'''
ONEFILE = "exe = EXE(pyz, a.scripts, a.binaries, a.datas, [], name={name!r}, upx=False, console=True)\n"
ONEDIR = ("exe = EXE(pyz, a.scripts, [], exclude_binaries=True, name={name!r}, upx=False, console=True)\n"
          "coll = COLLECT(exe, a.binaries, a.datas, upx=False, name={name!r})\n")
SHRINK = "from hatch_shrinkray import shrink_datas\na.datas = shrink_datas(a.datas, {options})"
CXFREEZE = '''\
from cx_Freeze import Executable, setup

setup(name={name!r}, version="1.0", executables=[Executable({script!r}, target_name={name!r})],
      options={{"build_exe": {{"packages": [{package!r}], "include_msvcr": False}}}})
'''


def setup_venv(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, *PACKAGES], check=True)
    subprocess.run([*pip, "-e", f"{REPO}[engine]"], check=True)


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run ``cmd``; its wall and CPU seconds (children included)."""
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def _bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*")
                                                          if p.is_file() and not p.is_symlink())


def _zipped(path: Path) -> int:
    """The bytes of ``path`` (a file or a folder) as a deflate-9 zip, as users download an app."""
    out = path.parent / f".{path.name}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for p in [path] if path.is_file() else sorted(path.rglob("*")):
            if p.is_file() and not p.is_symlink():
                zf.write(p, p.name if path.is_file() else p.relative_to(path).as_posix())
    size = out.stat().st_size
    out.unlink()
    return size


def _models(path: Path, shrunk: Path | None = None) -> int:
    """Bytes of the .onnx files an app folder holds (a onefile's: those its build packed)."""
    root = shrunk if shrunk is not None else path
    return sum(p.stat().st_size for p in root.rglob("*.onnx") if p.is_file())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for p in [path] if path.is_file() else sorted(path.rglob("*")):
        if p.is_file() and not p.is_symlink():
            digest.update(p.relative_to(path.parent).as_posix().encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()


def _answers(program: list[str], inputs: list[str], cwd: Path) -> list[Any]:
    done = subprocess.run([*program, *inputs], cwd=cwd, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _inputs(app: str, python: Path, work: Path) -> tuple[list[str], list[str]]:
    """Calibration and held-out inputs, disjoint: rendered pages (OCR) or files of this machine (Magika)."""
    if app == "ocr":
        code = ("import json, sys; from pathlib import Path; from benchmarks.packages_ocr import pages, CALIB, HELDOUT;"
                "c = Path(sys.argv[1]); print(json.dumps([[str(p) for p in pages(CALIB, c)], "
                "[str(p) for p in pages(HELDOUT, c)]]))")
        done = subprocess.run([str(python), "-c", code, str(work / "pages")], cwd=REPO, capture_output=True, text=True,
                              check=True)
        calib, held = json.loads(done.stdout)
        return calib, held
    from benchmarks.rate_data import HELD_OUT
    from benchmarks.tasks.magika_task import calibration_files, collect_files

    calib = [str(p) for p in calibration_files()]
    held = [p for p, _ in collect_files(*HELD_OUT) if p not in set(calib)]
    return calib, held


def _variants(recording: Path) -> dict[str, str]:
    """Variant -> shrink_datas options (None: the original)."""
    return {"default": f"inputs={str(recording)!r}", "nearest": f"inputs={str(recording)!r}, rounding='nearest'"}


def _built(work: Path, name: str, build: Any) -> dict[str, Any]:
    """The row of a build made before (``WORK/rows/NAME.json``: a run can be resumed), else made now."""
    saved = work / "rows" / f"{name}.json"
    if saved.is_file():
        return dict(json.loads(saved.read_text()))
    row = build()
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(row, indent=1))
    return dict(row)


def _shrink_seconds(cache: Path) -> float:
    """What shrinking took, from the records of a cache that build filled from empty (each model's
    engine time, as measured by the build itself)."""
    return sum(float(json.loads(p.read_text()).get("seconds", 0.0)) for p in cache.glob("*.json"))


def _pyinstaller(app: str, work: Path, python: Path, env: dict[str, str], recording: Path) -> list[dict[str, Any]]:
    spec = APP[app]
    build = work / f"{app}-pyinstaller"
    build.mkdir(parents=True, exist_ok=True)
    shutil.copy(APPS / spec["script"], build / spec["script"])
    pyinstaller = [str(python), "-m", "PyInstaller", "--noconfirm", "--clean"]
    builds = [("original", "", "onefile"), *((v, SHRINK.format(options=o), "onefile")
                                             for v, o in _variants(recording).items())]
    builds += [("original", "", "onedir")]
    rows = []
    for variant, shrink, kind in builds:
        name = f"{app}-{kind}-{variant}"
        text = SPEC.format(script=spec["script"], package=spec["package"], shrink=shrink)
        text += (ONEFILE if kind == "onefile" else ONEDIR).format(name=name)
        (build / f"{name}.spec").write_text(text)
        out = build / "dist" / name

        def make(name: str = name, kind: str = kind, shrink: str = shrink, out: Path = out) -> dict[str, Any]:
            cache = work / f"cache-{name}"
            shutil.rmtree(cache, ignore_errors=True)  # a cold cache: the shrink is timed
            wall, cpu = _timed([*pyinstaller, f"{name}.spec"], build, {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(cache)})
            return {"build_s": wall, "build_cpu_s": cpu, "shrink_s": _shrink_seconds(cache) if shrink else 0.0,
                    "models": _models(out) if kind == "onedir" else
                    _packed_models(python, spec["package"], build / "build" / name / "shrinkray")}

        row = _built(work, name, make)
        row.update({"app": app, "freezer": f"PyInstaller {kind}", "variant": variant, "path": str(out),
                    "program": [str(out if kind == "onefile" else out / name)],
                    "how": "spec line" if shrink else "pyinstaller"})
        if variant == "default" and kind == "onefile":
            row.update(_built(work, f"{name}-twice", lambda name=name: _twice(pyinstaller, build, name, work, env)))
        rows.append(row)
    rows += _bundled(app, "PyInstaller onedir", build / "dist" / f"{app}-onedir-original",
                     lambda root: [str(root / f"{app}-onedir-original")], work=work, env=env,
                     recording=recording)
    return rows


def _twice(pyinstaller: list[str], build: Path, name: str, work: Path, env: dict[str, str]) -> dict[str, Any]:
    """The spec built from an empty cache and again from the cache it filled: the same bytes?"""
    cache = {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(work / f"cache-{name}-twice")}
    shutil.rmtree(work / f"cache-{name}-twice", ignore_errors=True)
    _timed([*pyinstaller, f"{name}.spec"], build, cache)
    first = _sha256(build / "dist" / name)
    again_s, _ = _timed([*pyinstaller, f"{name}.spec"], build, cache)
    return {"again_s": again_s, "identical": _sha256(build / "dist" / name) == first, "sha256_first": first}


def _packed_models(python: Path, package: str, shrinkray: Path) -> int:
    """Bytes of the models a onefile build packed: the package's, each in its shrunk copy where
    ``shrink_datas`` made one (``build/NAME/shrinkray/collected``)."""
    code = (f"import importlib.util, pathlib; p = pathlib.Path(importlib.util.find_spec({package!r}).origin).parent;"
            "print('\\n'.join(f.relative_to(p.parent).as_posix() + ' ' + str(f) for f in sorted(p.rglob('*.onnx'))))")
    listed = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    total = 0
    for line in listed:
        rel, path = line.split(" ", 1)
        shrunk = shrinkray / "collected" / rel
        total += shrunk.stat().st_size if shrunk.is_file() else os.path.getsize(path)
    return total


def _cxfreeze(app: str, work: Path, python: Path, env: dict[str, str], recording: Path) -> list[dict[str, Any]]:
    spec = APP[app]
    build = work / f"{app}-cxfreeze"

    def make() -> dict[str, Any]:
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir(parents=True)
        shutil.copy(APPS / spec["script"], build / spec["script"])
        (build / "setup.py").write_text(CXFREEZE.format(name=app, script=spec["script"], package=spec["package"]))
        wall, cpu = _timed([str(python), "setup.py", "build_exe", "--silent"], build, env)
        (out,) = list((build / "build").glob("exe.*"))
        return {"path": str(out), "build_s": wall, "build_cpu_s": cpu, "shrink_s": 0.0, "models": _models(out)}

    row = _built(work, f"{app}-cxfreeze-original", make)
    out = Path(row["path"])
    row.update({"app": app, "freezer": "cx_Freeze", "variant": "original", "program": [str(out / app)],
                "how": "build_exe"})
    return [row, *_bundled(app, "cx_Freeze", out, lambda root: [str(root / app)], work=work, env=env,
                           recording=recording)]


def _bundled(app: str, freezer: str, original: Path, program: Any, *, work: Path, env: dict[str, str],
             recording: Path) -> list[dict[str, Any]]:
    """The frozen folder shrunk after the build with `hatch-shrinkray bundle`, each variant into a copy."""
    rows = []
    script = shutil.which("hatch-shrinkray", path=str(Path(sys.executable).parent)) or "hatch-shrinkray"
    for variant, extra in (("default", []), ("nearest", ["--rounding", "nearest"])):
        out = original.with_name(f"{original.name}-{variant}")
        cache = work / f"cache-{app}-{freezer}-{variant}".replace(" ", "-")

        def make(out: Path = out, cache: Path = cache, extra: list[str] = extra) -> dict[str, Any]:
            shutil.rmtree(cache, ignore_errors=True)  # a cold cache: the shrink is timed
            wall, cpu = _timed([script, "bundle", str(original), "-o", str(out), "--force", "--inputs", str(recording),
                                *extra], work, {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(cache)})
            return {"build_s": wall, "build_cpu_s": cpu, "shrink_s": _shrink_seconds(cache), "models": _models(out),
                    "bundle_s": wall}

        row = _built(work, f"{app}-{freezer}-{variant}".replace(" ", "-"), make)
        row.update({"app": app, "freezer": freezer, "variant": variant, "path": str(out), "program": program(out),
                    "how": "bundle -o"})
        rows.append(row)
    return rows


def run(venv: Path, work: Path, apps: list[str]) -> dict[str, Any]:
    python = venv / "bin/python"
    # PyInstaller's own bytecode is the same from build to build only with a fixed hash seed (its docs say so)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PYTHONHASHSEED": "0"}
    env.pop("SOURCE_DATE_EPOCH", None)
    rows: list[dict[str, Any]] = []
    notes: dict[str, Any] = {}
    for app in apps:
        spec = APP[app]
        calib, held = _inputs(app, python, work)
        recording = work / f"{app}-recording"
        script = shutil.which("hatch-shrinkray", path=str(Path(sys.executable).parent)) or "hatch-shrinkray"
        if not recording.is_dir():
            _timed([script, "record", "-o", str(recording), "--", str(python), str(APPS / spec["script"]), *calib],
                   work, env)
        notes[app] = {"calibration": len(calib), "held_out": len(held)}
        app_rows = _pyinstaller(app, work, python, env, recording) if app == "ocr" else \
            [*_pyinstaller(app, work, python, env, recording), *_cxfreeze(app, work, python, env, recording)]
        _measure(app_rows, held, work)
        rows += app_rows
    result = {"rows": rows, "inputs": notes}
    (work / f"bundles-{'-'.join(apps)}.json").write_text(json.dumps(result, indent=1))
    return result


def _measure(rows: list[dict[str, Any]], held: list[str], work: Path) -> None:
    """Sizes, answers against each freezer's original, start-up (interleaved, medians)."""
    for row in rows:
        path = Path(row["path"])
        row["bytes"], row["zipped"] = _bytes(path), _zipped(path)
        row["answers"] = _answers(row["program"], held, work)
    for row in rows:
        base = next(r for r in rows if r["freezer"] == row["freezer"] and r["variant"] == "original")
        row["same"] = sum(a == b for a, b in zip(row["answers"], base["answers"], strict=True))
        row["of"] = len(base["answers"])
    starts: dict[int, list[float]] = {i: [] for i in range(len(rows))}
    for _ in range(STARTS):
        for i, row in enumerate(rows):
            start = time.perf_counter()
            _answers(row["program"], held[:1], work)
            starts[i].append(time.perf_counter() - start)
    for i, row in enumerate(rows):
        row["start_s"] = statistics.median(starts[i])
        row["sha256"] = _sha256(Path(row["path"]))
        del row["answers"]


def table(result: dict[str, Any]) -> str:
    lines = ["| app | frozen with | variant | how | bytes | zipped | models | same answers | start-up | shrink adds |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        base = next(b for b in result["rows"] if b["freezer"] == r["freezer"] and b["app"] == r["app"]
                    and b["variant"] == "original")
        models = f"{r['models'] / 1e6:.2f} MB ({100 * r['models'] / base['models']:.1f}%)" if base["models"] else "-"
        adds = "" if r["variant"] == "original" else f"{r['shrink_s']:.1f} s"
        lines.append(f"| {r['app']} | {r['freezer']} | {r['variant']} | {r['how']} | {r['bytes'] / 1e6:.1f} MB | "
                     f"{r['zipped'] / 1e6:.1f} MB | {models} | {r['same']}/{r['of']} | {r['start_s']:.2f} s | {adds} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["setup"] and len(argv) == 2:
        setup_venv(Path(argv[1]))
        return 0
    if argv[:1] == ["run"] and len(argv) >= 3:
        work = Path(argv[2]).resolve()
        work.mkdir(parents=True, exist_ok=True)
        print(table(run(Path(argv[1]).resolve(), work, argv[3:] or list(APP))))
        return 0
    if argv[:1] == ["table"] and len(argv) >= 2:
        rows = [r for f in argv[1:] for r in json.loads(Path(f).read_text())["rows"]]
        print(table({"rows": rows}))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
