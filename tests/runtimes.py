"""Other runtimes than the project's own onnxruntime, created once and cached beside the real-model
wheels: onnxruntime releases in their own venvs, onnxruntime-node and onnxruntime-web from npm.

Every helper raises ``Unavailable`` (a ``pytest.skip`` in the tests) only when the registry cannot
be reached; anything else that goes wrong is an error.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from realmodels import CACHE

ROOT = CACHE / "runtimes"
NPM_VERSION = "1.30.0"
OPENVINO_VERSION = "2026.4.1"
RUNNER = Path(__file__).resolve().parent / "runtimes" / "run_model.cjs"
NUMPY_1 = {"1.16.3", "1.17.0", "1.18.0", "1.18.1"}
"""Releases built against numpy 1.x."""


class Unavailable(Exception):
    """The runtime cannot be installed here (registry unreachable, no node)."""


UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "No matching distribution", "Could not find a version",
               "Failed to establish a new connection", "Temporary failure in name resolution")


def _failed(cmd: list[str], proc: subprocess.CompletedProcess[str]) -> None:
    """``Unavailable`` when the registry could not be reached, else an error: only an unreachable
    registry may skip the tier."""
    tail = (proc.stderr or proc.stdout).strip()[-300:]
    if any(s in tail for s in UNREACHABLE):
        raise Unavailable(f"{' '.join(cmd[:6])}: {tail}")
    raise RuntimeError(f"{' '.join(cmd)} failed: {tail}")


def _install(target: Path, create: list[list[str]]) -> Path:
    """Run ``create`` into a temporary sibling of ``target`` and rename it into place (atomic)."""
    if target.exists():
        return target
    ROOT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"tmp-{target.name}-", dir=ROOT))
    try:
        for cmd in create:
            proc = subprocess.run([c.replace("{dir}", str(tmp)) for c in cmd], capture_output=True, text=True,
                                  timeout=900, check=False, cwd=tmp)
            if proc.returncode != 0:
                _failed(cmd, proc)
        if target.exists():  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _venv(name: str, installs: list[list[str]]) -> Path:
    """The python of venv ``name`` after ``pip install`` of each argument list, created once. Its
    scripts hard-code its path, so it is built where it lives, behind a marker file written last."""
    venv = ROOT / name
    marker = venv / ".complete"
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        ROOT.mkdir(parents=True, exist_ok=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        for cmd in ([sys.executable, "-m", "venv", str(venv)], *([*pip, *args] for args in installs)):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
            if proc.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                _failed(cmd, proc)
        marker.touch()
    return venv / "bin" / "python"


def python_runtime(version: str, engine: Path | None = None) -> Path:
    """The python of a venv with ``onnxruntime==version`` (and numpy); with ``engine`` (this
    repository) also onnx, onnx-ir, hatchling and the engine itself, editable, without letting pip
    pick another onnxruntime for it."""
    installs = [[f"onnxruntime=={version}", "numpy<2" if version in NUMPY_1 else "numpy"]]
    if engine is None:
        return _venv(f"onnxruntime-{version}", installs)
    return _venv(f"engine-onnxruntime-{version}",
                 [*installs, ["onnx", "onnx-ir", "hatchling", "threadpoolctl"], ["--no-deps", "-e", str(engine)]])


def node_modules() -> Path:
    """``node_modules`` with onnxruntime-node and onnxruntime-web (their install scripts, which
    fetch GPU binaries from elsewhere, are skipped: the CPU binding ships in the npm package)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise Unavailable("node/npm not installed")
    target = ROOT / f"npm-{NPM_VERSION}"
    _install(target, [["npm", "init", "-y"],
                      ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts",
                       f"onnxruntime-node@{NPM_VERSION}", f"onnxruntime-web@{NPM_VERSION}"]])
    return target / "node_modules"


def _encode(a: np.ndarray) -> dict[str, Any]:
    return {"type": str(a.dtype), "dims": list(a.shape), "data": base64.b64encode(np.ascontiguousarray(a)).decode()}


def kernels(profile: str, runs: int) -> dict[str, float]:
    """Op types executed per inference, from onnxruntime's profile (one JSON event per line; its
    writer does not escape node names, so a line that does not parse is skipped)."""
    counts: dict[str, float] = {}
    for line in _events(profile):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            op = e["args"]["op_name"]
            counts[op] = counts.get(op, 0.0) + 1 / runs
    return counts


def profiled_runs(profile: str) -> int:
    """How many ``run()`` calls a profile covers (a profile cut short covers fewer)."""
    return sum(bool(re.search(r'"name"\s*:\s*"model_run"', line)) for line in _events(profile))


def _events(profile: str) -> list[str]:
    """The profile's event lines, each once: every event has its own timestamp, so a line seen twice
    is the same event printed twice (wasm's stdout can repeat a chunk)."""
    return list(dict.fromkeys(line.strip().rstrip(",") for line in profile.splitlines() if line.strip()))


def node_run(backend: str, model: Path, feeds: list[dict[str, np.ndarray]] | None, level: str = "all",
             warmup: Path | None = None, *, profile: bool = True) -> dict[str, Any]:
    """Load ``model`` in onnxruntime-node (``node``) or onnxruntime-web (``web``) and run ``feeds``
    (None: load only): ``{"outputs": [[arrays] per feed], "kernels", "load_cpu", "first_cpu", "peak_kb",
    "version"}`` or ``{"error": ...}``. ``profile=False`` runs without onnxruntime's profiler (no
    ``kernels``), for timing."""
    modules = node_modules()
    with tempfile.TemporaryDirectory(prefix="shrinkray-node-") as tmp:
        feeds_arg, out_path = "-", Path(tmp) / "out.json"
        if feeds is not None:
            feeds_arg = str(Path(tmp) / "feeds.json")
            Path(feeds_arg).write_text(json.dumps([{k: _encode(v) for k, v in f.items()} for f in feeds]))
        env = {**os.environ, "NODE_PATH": str(modules), "SHRINKRAY_NO_PROFILE": "0" if profile else "1"}
        cmd = ["node", str(RUNNER), backend, str(model), feeds_arg, str(out_path), level]
        if warmup is not None:
            cmd.append(str(warmup))
        for _ in range(3):  # a profile that reaches stdout cut short (a loaded machine) is taken again
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
            if not out_path.exists():
                raise RuntimeError(f"node runner failed: {proc.stderr.strip()[-500:]}")
            events = proc.stdout.partition("\nPROFILE\n")[2].partition("\nEND-PROFILE\n")[0]
            if not feeds or not profile or profiled_runs(events) == len(feeds):
                break
        else:
            raise RuntimeError(f"{backend}: the profile covered {profiled_runs(events)} of {len(feeds)} runs 3 times")
        got: dict[str, Any] = json.loads(out_path.read_text())
    if "outputs" in got:
        got["outputs"] = [[np.frombuffer(base64.b64decode(o["data"]), dtype=o["type"]).reshape(o["dims"])
                           for o in sample] for sample in got["outputs"]]
        if profile:
            got["kernels"] = kernels(events, max(len(feeds or []), 1))
    return got


def warmup_model() -> Path:
    """A one-node model whose session starts the wasm runtime before a measured one."""
    path = ROOT / "warmup.onnx"
    if not path.exists():
        import onnx
        from onnx import helper

        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "warmup",
                                  [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        ROOT.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(path))
    return path


def node_load(backend: str, model: Path) -> dict[str, Any]:
    """Session creation only (``load_cpu``, ``peak_kb``), after a warm-up session, for the benchmark."""
    return node_run(backend, model, None, warmup=warmup_model())


PY_RUNNER = Path(__file__).resolve().parent / "runtimes" / "run_model.py"


def python_run(python: Path | str, kind: str, model: Path, feeds: list[dict[str, np.ndarray]],
               level: str = "all") -> dict[str, Any]:
    """Run ``model`` on ``feeds`` with ``python``'s onnxruntime (``kind="ort"``; ``level="disable"``:
    ``ORT_DISABLE_ALL``) or OpenVINO (``"openvino"``): ``{"outputs", "kernels", "version"}`` or ``{"error": ...}``."""
    with tempfile.TemporaryDirectory(prefix="shrinkray-run-") as tmp:
        feeds_path, out_path = Path(tmp) / "feeds.npz", Path(tmp) / "out.npz"
        np.savez(feeds_path, **{f"{i}/{k}": v for i, f in enumerate(feeds) for k, v in f.items()})
        proc = subprocess.run([str(python), str(PY_RUNNER), kind, str(model), str(feeds_path), str(out_path), level],
                              capture_output=True, text=True, timeout=900, check=False)
        if not out_path.exists():
            raise RuntimeError(f"{python} runner failed: {proc.stderr.strip()[-500:]}")
        with np.load(out_path) as z:
            got: dict[str, Any] = json.loads(str(z["meta"]))
            if "profile" in got:
                got["kernels"] = kernels(got.pop("profile"), len(feeds))
            if "error" not in got:
                count = 1 + max(int(k.split("/")[1]) for k in z.files if k != "meta")
                got["outputs"] = [[z[f"{i}/{k}"] for k in range(count)] for i in range(len(feeds))]
    return got


def openvino_python() -> Path:
    """The python of a venv with OpenVINO, created once."""
    return _venv("openvino", [[f"openvino=={OPENVINO_VERSION}", "numpy"]])


def deviation(got: list[list[np.ndarray]], ref: list[list[np.ndarray]]) -> tuple[float, float]:
    """Relative L2 and cosine of every output of every feed, taken together, from ``ref``'s."""
    a = np.concatenate([o.astype(np.float64).ravel() for s in got for o in s])
    b = np.concatenate([o.astype(np.float64).ravel() for s in ref for o in s])
    rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))
    return rel, cos
