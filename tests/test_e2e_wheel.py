"""End to end: projects on other backends, built with their own backend, rewritten by
``hatch-shrinkray wheel``, checked, installed in a fresh venv and run through their own API.

- setuptools with nudenet's layout (``setup.py`` + ``MANIFEST.in`` + ``package_data``) and the real
  ``320n.onnx`` from the pinned ``nudenet==3.4.2`` sdist (cached like the other real models);
- flit-core with example_project's digits classifier;
- the ``hatch-shrinkray wheel`` step of every cibuildwheel ``repair-wheel-command`` in docs/quickstart.md,
  run as written after cibuildwheel's ``{wheel}``/``{dest_dir}`` substitution.

The build environments (setuptools, flit-core) and the venvs (numpy, onnxruntime) come from the
package index, as in tests/test_e2e_build.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from hardening import cli
from test_e2e_build import EXAMPLE, REPO, venv_with

from realmodels import nudenet_320n

PY = sys.executable
CHECK_WHEEL_CONTENTS = Path(PY).parent / "check-wheel-contents"

NUDENET_SETUP = '''\
import os
from setuptools import find_packages, setup

# nudenet 3.4.2's setup.py, less its upload command and its OpenCV requirement.
here = os.path.abspath(os.path.dirname(__file__))
with open(os.path.join(here, "README.md"), encoding="utf-8") as f:
    long_description = "\\n" + f.read()

setup(
    name="nudenet-shrunk",
    version="3.4.2",
    description="Lightweight Nudity Detection",
    long_description=long_description,
    long_description_content_type="text/markdown",
    python_requires=">=3.6.0",
    packages=find_packages(exclude=("tests",)),
    install_requires=["numpy", "onnxruntime"],
    package_data={"nudenet": ["nudenet/320n.onnx"]},
    include_package_data=True,
    license="MIT",
)
'''

NUDENET_API = '''\
"""The detector's raw outputs for a batch of 320x320 RGB images in [0, 1], NCHW."""
import os

import numpy as np
import onnxruntime


class NudeDetector:
    def __init__(self):
        path = os.path.join(os.path.dirname(__file__), "320n.onnx")
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def raw(self, blob):
        return self.session.run(None, {self.input: blob.astype(np.float32)})[0]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    out = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "shrink-cache")}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "SOURCE_DATE_EPOCH"):
        out.pop(name, None)
    return out


def build_wheel(project: Path, env: dict[str, str]) -> Path:
    """``python -m build --wheel`` in an isolated environment: the project's own backend."""
    done = subprocess.run([PY, "-m", "build", "--wheel", "--outdir", "dist"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (project / "dist").glob("*.whl")
    return wheel


def check(wheel: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """RECORD and contents checked by check-wheel-contents; installed in a fresh venv; ``pip check``."""
    checked = subprocess.run([str(CHECK_WHEEL_CONTENTS), "--no-config", str(wheel)], capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    python = venv_with([str(wheel)], tmp_path, env)
    pip_check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, check=False)
    if "No module named pip" not in pip_check.stderr:  # uv's venvs have no pip: check with uv instead
        assert pip_check.returncode == 0, pip_check.stdout + pip_check.stderr
    else:
        uv = subprocess.run([PY, "-m", "uv", "pip", "check", "--python", str(python)], capture_output=True,
                            text=True, check=False, env=env)
        assert uv.returncode == 0, uv.stdout + uv.stderr
    return python


def images(count: int = 2) -> np.ndarray:
    """Smooth image-like inputs (gradients and blobs), deterministic."""
    y, x = np.mgrid[0:320, 0:320] / 320.0
    out = []
    for i in range(count):
        channels = [np.sin(3 * x + i) * 0.5 + 0.5, np.cos(4 * y - i) * 0.5 + 0.5,
                    np.exp(-((x - 0.5) ** 2 + (y - 0.3 * (i + 1)) ** 2) * 8)]
        out.append(np.stack(channels))
    return np.asarray(out, dtype=np.float32)


@pytest.mark.network
@pytest.mark.usefixtures("index")
@pytest.mark.extended
def test_setuptools_project_with_a_real_model(tmp_path: Path, env: dict[str, str]) -> None:
    model = nudenet_320n()
    project = tmp_path / "nudenet"
    (project / "nudenet").mkdir(parents=True)
    shutil.copyfile(model, project / "nudenet/320n.onnx")
    (project / "nudenet/__init__.py").write_text("from .nudenet import NudeDetector\n")
    (project / "nudenet/nudenet.py").write_text(NUDENET_API)
    (project / "setup.py").write_text(NUDENET_SETUP)
    (project / "MANIFEST.in").write_text("include nudenet/320n.onnx")
    (project / "README.md").write_text("nudenet's layout, shrunk after the build\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.hatch-shrinkray]\nmodels = ["nudenet/*.onnx"]\n')
    wheel = build_wheel(project, env)

    done = cli("wheel", str(wheel), "--in-place", cwd=project, env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "shrinkray: nudenet/320n.onnx: shipped shrunk, 12.15 -> " in done.stderr, done.stderr
    with zipfile.ZipFile(wheel) as zf:
        shipped = len(zf.read("nudenet/320n.onnx"))
    assert shipped < 0.3 * model.stat().st_size

    python = check(wheel, tmp_path, env)
    blob = images()
    np.save(tmp_path / "blob.npy", blob)
    script = ("import sys, numpy as np, nudenet\n"
              "out = nudenet.NudeDetector().raw(np.load(sys.argv[1]))\n"
              "np.save(sys.argv[2], out); print(nudenet.__file__)\n")
    run = subprocess.run([str(python), "-c", script, str(tmp_path / "blob.npy"), str(tmp_path / "out.npy")],
                         capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert run.returncode == 0, run.stderr
    assert "site-packages" in run.stdout
    got = np.load(tmp_path / "out.npy")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: blob})[0]
    assert got.shape == want.shape
    rel_l2 = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    cosine = float(np.dot(got.ravel(), want.ravel()) / (np.linalg.norm(got) * np.linalg.norm(want)))
    assert rel_l2 <= 0.1 and cosine >= 0.995, (rel_l2, cosine)  # the verification's default tolerances


FLIT_PYPROJECT = '''\
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "digits_classifier"
version = "1.0.0"
description = "example_project's classifier, built with flit-core"
dependencies = ["numpy>=1.24", "onnxruntime>=1.16"]

[tool.hatch-shrinkray]
models = ["digits_classifier/models/*.onnx"]
inputs = "data/verify_inputs.npz"
'''


@pytest.mark.usefixtures("index")
@pytest.mark.extended
def test_flit_project(tmp_path: Path, env: dict[str, str]) -> None:
    project = tmp_path / "flit"
    shutil.copytree(EXAMPLE / "src/digits_classifier", project / "digits_classifier",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXAMPLE / "data", project / "data")
    (project / "pyproject.toml").write_text(FLIT_PYPROJECT)
    wheel = build_wheel(project, env)
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "wheelhouse"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert "shrinkray: digits_classifier/models/digits_mlp.onnx: shipped shrunk, 6.59 -> " in done.stderr, done.stderr
    python = check(tmp_path / "wheelhouse" / wheel.name, tmp_path, env)
    script = ("import json, numpy as np, digits_classifier as d\n"
              f"t = np.load({str(EXAMPLE / 'data/digits_test.npz')!r})\n"
              "print(json.dumps(float((d.predict(t['pixels'].astype(np.float32)) == t['labels']).mean())))\n")
    run = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                         check=False)
    assert run.returncode == 0, run.stderr
    baseline = json.loads((EXAMPLE / "training_report.json").read_text())["test_accuracy"]
    assert float(run.stdout) >= baseline - 0.005


def repair_commands() -> dict[str, str]:
    """platform -> repair-wheel-command, from the cibuildwheel block of the docs' quick start."""
    text = (REPO / "docs" / "quickstart.md").read_text()
    block = text.split("<!-- cibuildwheel -->", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    return dict(re.findall(r'\[tool\.cibuildwheel\.(\w+)\]\nrepair-wheel-command = "([^"]+)"', block))


@pytest.mark.extended
def test_documented_repair_commands(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command as cibuildwheel runs it (``sh -c`` after substitution). The repair tool before
    ``&&`` is replaced by what it does to a wheel without native libraries: a copy into {dest_dir}."""
    commands = repair_commands()
    assert set(commands) == {"linux", "macos", "windows"}
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("dist", "build", "__pycache__"))
    (project / "pyproject.toml").write_text(
        (project / "pyproject.toml").read_text()
        + '\n[tool.hatch-shrinkray]\nmodels = ["digits_classifier/models/*.onnx"]\ninputs = "data/verify_inputs.npz"\n')
    from hatchling.builders.wheel import WheelBuilder

    monkeypatch.setenv("HATCH_BUILD_NO_HOOKS", "1")  # the wheel another backend would build: original model
    built = Path(next(WheelBuilder(str(project)).build(directory=str(tmp_path / "built"), versions=["standard"])))
    shutil.rmtree(project / "dist", ignore_errors=True)
    path = f"{Path(PY).parent}:{env.get('PATH', '')}"
    for platform, command in commands.items():
        dest = tmp_path / platform
        dest.mkdir()
        steps = command.split(" && ")
        ours = steps[-1]
        assert ours.startswith("hatch-shrinkray wheel "), command
        if len(steps) > 1:
            assert steps[0].split()[0] in ("auditwheel", "delocate-wheel"), command
            shutil.copy(built, dest)
        line = ours.replace("{wheel}", str(built)).replace("{dest_dir}", str(dest))
        done = subprocess.run(["sh", "-c", line], cwd=project, env={**env, "PATH": path}, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, (platform, done.stderr)
        (out,) = dest.glob("*.whl")
        with zipfile.ZipFile(out) as zf:
            assert len(zf.read("digits_classifier/models/digits_mlp.onnx")) < 2_000_000, platform
