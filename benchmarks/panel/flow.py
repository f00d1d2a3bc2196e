"""The default flow of one package with one tool, as a new user runs it from a stub project on the
wheel path: ``record`` -> ``wheel`` -> ``check --fix`` (where the package has tests) -> ``wheel``, and
round-to-nearest int8 (``--rounding nearest``) with the same recording.

    python flow.py TOOL_NAME TOOL_BIN PKG [STEP...]     # steps: record build fix build2 rtn auto int8v

Everything goes to /tmp/p8/flow/TOOL_NAME/PKG/ (one JSON per step, skipped when it exists). The package
table below says how each package is driven: its venv (the original wheel installed), its tests (the
sdist's tests/ copied out of the sdist, so that they import the installed package) and its calibration
command (disjoint from the held-out data of ``heldout.py``)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
W = Path("/tmp/p8")
sys.path.insert(0, str(HERE))
from pkgs import PACKAGES  # noqa: E402

PYTEST = "python -m pytest -q -p no:cacheprovider"
CFG: dict[str, dict[str, object]] = {
    "akiki": {"tests": f"cd {W}/ut/akiki && {PYTEST} tests", "toml": 'pins = "rewrite"\n',
              "calib": f"python {HERE}/akiki_workload.py {W}/data/akiki-calib"},
    "arabic": {"tests": f"cd {W}/ut/arabic && {PYTEST} --continue-on-collection-errors tests",
               "calib": f"python {HERE}/arabic_workload.py calib"},
    "occular": {"calib": f"python {HERE}/occular_workload.py {W}/data/occ-calib"},
    "isbnx": {"calib": f"python {HERE}/isbnx_workload.py {W}/data/isbn-calib"},
    "nsfw": {"tests": f"cd {W}/ut/nsfw && {PYTEST} tests", "toml": 'pins = "rewrite"\n',
             "calib": f"python {HERE}/nsfw_workload.py calib"},
    "silero": {"tests": f"cd {W}/ut/silero && {PYTEST} tests",
               "calib": f"python {HERE.parent}/packages_silero.py calibrate {W}/data/silero"},
    "magika": {"tests": f"cd {W}/ut/magika/python && {PYTEST} tests",
               "calib": f"python {HERE}/magika_workload.py calib"},
    "ocr": {"tests": f"cd {W}/ut/ocr && {PYTEST} tests/test_ort.py",
            "calib": f"python {HERE.parent}/packages_ocr.py calibrate {W}/data/ocr 40"},
    "fsmn": {"calib": f"python {HERE}/fsmn_run.py /work/measure-judges/fsmn-orig /work/measure-judges/fsmn_data/cal {W}/data/fsmn-cal.json"},
    "captcha": {"tests": f"cd {W}/ut/captcha && {PYTEST} tests", "calib": f"python {HERE}/capt_run.py 1 120 {W}/data/capt-cal.json"},
}
VENV = {"fsmn": Path("/work/measure-judges/fsmn"), "captcha": Path("/work/measure-judges/capt")}


def venv(pkg: str) -> Path:
    return VENV.get(pkg, W / "venv" / pkg)


def site(pkg: str) -> Path:
    return next((venv(pkg) / "lib").glob("python3*/site-packages"))


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> dict[str, object]:
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as f:
        p = subprocess.run(["nice", "-n", "5", *cmd], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cmd": " ".join(cmd), "rc": p.returncode, "wall": round(time.perf_counter() - t0, 1),
            "cpu": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1), "log": str(log)}


def main() -> None:
    name, tool, pkg = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    steps = sys.argv[4:] or ["record", "build", "fix", "build2", "rtn"]
    cfg = CFG[pkg]
    wheel_name, glob = PACKAGES[pkg]
    wheel = W / "dl" / wheel_name
    proj = W / "flow" / name / pkg
    proj.mkdir(parents=True, exist_ok=True)
    toml = f'[tool.hatch-shrinkray]\nmodels = ["{glob}"]\ninputs = "rec"\n{cfg.get("toml", "")}'
    (proj / "pyproject.toml").write_text(toml)
    env = dict(os.environ, PATH=f"{venv(pkg)}/bin:{tool}:{os.environ['PATH']}",
               HATCH_SHRINKRAY_CACHE_DIR=str(proj / ".cache"))
    env.pop("PYTHONPATH", None)
    command = "; ".join(c for c in [cfg.get("tests"), cfg["calib"]] if c)
    hs = str(tool / "hatch-shrinkray")
    for step in steps:
        out = proj / f"{step}.json"
        if out.exists():
            continue
        print(f"[{time.strftime('%H:%M:%S')}] {name} {pkg} {step}", flush=True)
        if step == "record":
            res = run([hs, "record", "--output", "rec", "--", "sh", "-c", command], proj, env, proj / "record.log")
        elif step in ("build", "build2", "rtn", "auto", "int8v", "autov"):
            extra = {"build": [], "build2": [], "rtn": ["--rounding", "nearest"], "auto": ["--method", "auto"],
                     "int8v": ["-v"], "autov": ["-v", "--method", "auto"]}[step]
            if step in ("rtn", "auto", "int8v", "autov") and (proj / "shrinkray-plan.json").exists():
                # these judge the engine with the recording alone: the plan file would override the choice
                (proj / "shrinkray-plan.json").rename(proj / "plan.hold")
            subprocess.run([sys.executable, str(HERE / "build.py"), str(tool), str(proj), str(wheel), str(out),
                            "--", *extra], env=env, check=False)
            if (proj / "plan.hold").exists():
                (proj / "plan.hold").rename(proj / "shrinkray-plan.json")
            continue
        elif step == "fix":
            if "tests" not in cfg:
                res = {"skipped": "no tests"}
            else:
                models = sorted(str(p) for p in site(pkg).glob(glob.replace("**/", "**/")))
                if "**" in glob:
                    models = sorted(str(p) for p in site(pkg).glob(glob))
                res = run([hs, "check", "--fix", *models, "--", "sh", "-c", str(cfg["tests"])], proj, env,
                          proj / "fix.log")
        else:
            raise SystemExit(f"unknown step {step}")
        out.write_text(json.dumps(res, indent=1))
        print(f"  -> rc {res.get('rc')}, {res.get('wall')} s wall, {res.get('cpu')} s CPU", flush=True)


if __name__ == "__main__":
    main()
