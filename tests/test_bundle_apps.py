"""Real apps on real model-shipping packages, frozen and installed as their developers do it.

- A file-type tool on magika 1.0.3, frozen by PyInstaller 6.22.3: onefile with the spec line of
  docs/bundles.md (built twice: the same bytes), onedir shrunk after the build by `bundle` with the
  app judging itself (`-- COMMAND`), and `record` through the frozen app (one line: record the
  unfrozen app instead).
- A venv with rapidocr-onnxruntime 1.4.4: `bundle --in-place` with an OCR smoke test judging the
  shrunk venv; `pip check`, every RECORD hash, `pip uninstall`.

The venvs install from PyPI (``network``); PyInstaller builds take minutes (``extended``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hardening import cli
from test_bundle import pip, record_mismatches
from test_e2e_build import REPO, venv_with

pytestmark = [pytest.mark.extended, pytest.mark.usefixtures("index")]  # index: marks it network

FILETYPE = '''\
import json, sys
from pathlib import Path
from magika import Magika

magika = Magika()
for path in sys.argv[1:]:
    print(json.dumps(magika.identify_path(Path(path)).output.label), flush=True)
'''
MAGIKA_MODEL = "magika/models/standard_v3_3/model.onnx"


def _files(n: int, skip: int = 0) -> list[str]:
    """Files of this repository, of many kinds (Python, Markdown, TOML, JSON, shell, images)."""
    found = sorted(str(p) for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts and ".venv" not in p.parts
                   and "__pycache__" not in p.parts and p.stat().st_size > 64)
    step = max(1, len(found) // (n + skip))
    return found[skip * step::step][:n]


@pytest.fixture(scope="module")
def freezer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A venv with PyInstaller, magika and hatch-shrinkray (with its engine) from this checkout."""
    tmp = tmp_path_factory.mktemp("freezer")
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp / "cache"), "PYTHONHASHSEED": "0"}  # as PyInstaller asks
    env.pop("SOURCE_DATE_EPOCH", None)
    python = venv_with(["pyinstaller==6.22.3", "magika==1.0.3", f"{REPO}[engine]"], tmp, env)
    return python, env


def _labels(program: list[str], files: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run([*program, *files], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def _spec(name: str) -> str:
    """The spec of docs/bundles.md, for the file-type app."""
    page = (REPO / "docs/bundles.md").read_text(encoding="utf-8")
    spec = page.split("<!-- pyinstaller-spec -->\n```python\n", 1)[1].split("```", 1)[0]
    return ("from PyInstaller.utils.hooks import collect_data_files\n" + spec) \
        .replace("myapp", name).replace("rapidocr_onnxruntime", "magika")


def test_pyinstaller_onefile_with_the_spec_line(freezer: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Recorded unfrozen, built with the docs' spec line: the model ships shrunk (verified on the
    recording), the app labels held-out files as the unfrozen original does, and a second build
    with the same inputs is the same bytes."""
    python, env = freezer
    (tmp_path / "filetype.py").write_text(FILETYPE)
    recorded = cli("record", "-o", str(tmp_path / "shrinkray-inputs"), "--", str(python), "filetype.py", *_files(24),
                   cwd=tmp_path, env=env)
    assert recorded.returncode == 0, recorded.stderr
    (tmp_path / "filetype.spec").write_text(_spec("filetype"))
    build = subprocess.run([str(python), "-m", "PyInstaller", "--noconfirm", "filetype.spec"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    shipped = f"shrinkray: {MAGIKA_MODEL}: shipped shrunk, 3.16 MB -> "
    line = next(ln for ln in build.stderr.splitlines() if shipped in ln)
    assert "generated" not in line and ("recorded" in line or " calls" in line), line  # verified on the recording
    packed = tmp_path / "build/filetype/shrinkray/collected" / MAGIKA_MODEL
    assert packed.stat().st_size < 0.35 * 3163737
    held = _files(40, skip=1)
    unfrozen = _labels([str(python), "filetype.py"], held, tmp_path, env)
    frozen = _labels([str(tmp_path / "dist/filetype")], held, tmp_path, env)
    assert sum(a == b for a, b in zip(frozen, unfrozen, strict=True)) >= len(held) - 1, (frozen, unfrozen)
    first = hashlib.sha256((tmp_path / "dist/filetype").read_bytes()).hexdigest()
    again = subprocess.run([str(python), "-m", "PyInstaller", "--noconfirm", "filetype.spec"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "cached" in next(ln for ln in again.stderr.splitlines() if shipped in ln)
    assert hashlib.sha256((tmp_path / "dist/filetype").read_bytes()).hexdigest() == first


def test_pyinstaller_onedir_shrunk_after_the_build_and_judged_by_the_app(freezer: tuple[Path, dict[str, str]],
                                                                          tmp_path: Path) -> None:
    """A plain onedir build, then `bundle --in-place -- dist/filetype/filetype FILES`: the app runs on
    the original folder and on the shrunk one; `record` through the frozen app says what to do."""
    python, env = freezer
    (tmp_path / "filetype.py").write_text(FILETYPE)
    build = subprocess.run([str(python), "-m", "PyInstaller", "--noconfirm", "--onedir", "--collect-data", "magika",
                            "filetype.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    app = tmp_path / "dist/filetype"
    frozen = cli("record", "-o", str(tmp_path / "rec"), "--", str(app / "filetype"), *_files(4), cwd=tmp_path, env=env)
    assert f"{app / 'filetype'} is a frozen app (PyInstaller): its interpreter takes nothing from the environment, " \
           "so it cannot be recorded; record the unfrozen app (`python app.py ...`): same model bytes" in frozen.stdout
    done = cli("bundle", str(app), "--in-place", "--", str(app / "filetype"), *_files(12), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "check: passed: every test and the exit status held" in done.stdout, done.stdout
    (model,) = list(app.rglob("model.onnx"))
    assert model.stat().st_size < 0.35 * 3163737
    assert (app / ".shrinkray-manifest.json").is_file()


SMOKE = '''\
import sys
import cv2, numpy as np
from rapidocr_onnxruntime import RapidOCR

page = np.full((120, 640, 3), 255, np.uint8)
cv2.putText(page, "Invoice 2024 total 315.40", (10, 70), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 2)
result, _ = RapidOCR()(page)
text = " ".join(line[1] for line in result or [])
print(text)
sys.exit(0 if "2024" in text and "315" in text else 1)
'''


def test_a_venv_with_rapidocr_in_place(tmp_path: Path) -> None:
    """The container recipe's venv: bundle --in-place with an OCR smoke test judging it; every RECORD
    matches, pip check passes, pip uninstall removes everything the distribution installed."""
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache")}
    python = venv_with(["rapidocr-onnxruntime==1.4.4"], tmp_path, env)
    venv = python.parent.parent
    (tmp_path / "smoke.py").write_text(SMOKE)
    site = next(venv.glob("lib/python*/site-packages"))
    originals = sum(p.stat().st_size for p in (site / "rapidocr_onnxruntime/models").glob("*.onnx"))
    done = cli("bundle", str(venv), "--in-place", "--models", "lib/*/site-packages/rapidocr_onnxruntime/**/*.onnx",
               "--", str(python), str(tmp_path / "smoke.py"), env=env)
    assert done.returncode == 0, done.stderr
    assert "check: passed" in done.stdout, done.stdout
    shrunk = sum(p.stat().st_size for p in (site / "rapidocr_onnxruntime/models").glob("*.onnx"))
    assert shrunk < 0.8 * originals
    assert record_mismatches(site) == []
    files = "import json, importlib.metadata as m; print(json.dumps([str(f) for f in m.distribution('{}').files]))"
    listed = json.loads(subprocess.run([str(python), "-c", files.format("rapidocr_onnxruntime")],
                                       capture_output=True, text=True, check=True).stdout)
    pip(venv, "check")
    pip(venv, "uninstall", "--yes", "rapidocr-onnxruntime")
    assert not [f for f in listed if (site / f).exists() and "__pycache__" not in f]
    assert not (site / "rapidocr_onnxruntime").exists() or not any((site / "rapidocr_onnxruntime").rglob("*.onnx"))
    shutil.rmtree(venv, ignore_errors=True)
