"""What the hook costs a build environment (benchmarks/BUILD_TIME.md): it asks for the engine only
when it shrinks, then only for what the configured methods import, and an environment without the
engine (an isolated build) ships what the shrink cache holds instead of installing it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hardening import MODEL, REPO, write_project
from hatchling.builders.wheel import WheelBuilder
from packaging.requirements import Requirement

from hatch_shrinkray.shipping.requirements import engine_requirements

from realmodels import silero_vad

REQUIRES = "import hatchling.build as b; print(b.get_requires_for_build_wheel())"


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name for r in requirements}


def test_the_hook_asks_only_for_what_its_methods_import() -> None:
    assert names(engine_requirements({"fp16"})) == {"onnx", "onnxruntime", "numpy"}
    assert names(engine_requirements({"int8"})) == {"onnx", "onnxruntime", "numpy", "threadpoolctl"}
    assert {"onnx-ir", "threadpoolctl"} <= names(engine_requirements({"auto"}))
    assert "onnx-ir" in names(engine_requirements({"fp16", "int4"}))
    assert "rich" not in names(engine_requirements(None))  # the CLI's live display, never a build's


def _light_python(tmp_path: Path) -> Path:
    """A virtual environment with hatchling and hatch-shrinkray-core only: what an isolated build
    environment holds before the hook asks for anything."""
    core = next(WheelBuilder(str(REPO)).build(directory=str(tmp_path / "house"), versions=["standard"]))
    venv = tmp_path / "light"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", str(venv)], check=True, capture_output=True)
    python = venv / "bin/python"
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(python), "hatchling", core],
                   check=True, capture_output=True)
    return python


def _build(python: Path, root: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)], cwd=root,
                          env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.network
@pytest.mark.usefixtures("index")
def test_a_build_without_the_engine_asks_for_it_even_where_the_cache_holds_the_model(tmp_path: Path) -> None:
    """A cache hit ships only once its outputs agree with the original's (``shipping.recheck``: a
    forged entry never reaches a wheel), which takes the engine: a warm cache still asks for it, and a
    build environment without it stops with one line instead of shipping the cached bytes unchecked."""
    light = _light_python(tmp_path)
    root = write_project(tmp_path / "proj", 'method = "fp16"\n')
    shutil.copyfile(silero_vad(), root / MODEL)
    env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)

    asked = subprocess.run([str(light), "-c", REQUIRES], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert "onnxruntime" in asked.stdout  # nothing cached yet: the engine must come
    cold = _build(light, root, tmp_path / "cold", env)
    assert cold.returncode != 0 and "the shrinking engine is not installed" in cold.stderr, cold.stderr

    engine = _build(Path(sys.executable), root, tmp_path / "engine", env)  # shrinks, fills the cache
    assert engine.returncode == 0, engine.stderr

    asked = subprocess.run([str(light), "-c", REQUIRES], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert "onnxruntime" in asked.stdout  # the cache hit is checked against the original: the engine comes
    warm = _build(light, root, tmp_path / "warm", env)
    assert warm.returncode != 0 and "the shrinking engine is not installed" in warm.stderr, warm.stderr
    assert not list((tmp_path / "warm").glob("*.whl"))
    again = _build(Path(sys.executable), root, tmp_path / "again", env)
    assert again.returncode == 0 and ", cached" in again.stderr, again.stderr
    member = MODEL.removeprefix("src/")
    (a,), (b,) = (tmp_path / "engine").glob("*.whl"), (tmp_path / "again").glob("*.whl")
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        assert za.read(member) == zb.read(member)
        assert len(zb.read(member)) < 0.6 * silero_vad().stat().st_size


@pytest.mark.network
@pytest.mark.usefixtures("index")
def test_a_cached_model_onnxruntime_loaded_is_not_loaded_again(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The load check of a cache hit is a second Python importing onnxruntime (1-2 s per model and
    target); the cache remembers which bytes this onnxruntime loaded (after verifying them), so only
    other bytes are checked again (tests/test_cache_manifest.py: an entry rewritten with bytes that do not
    load is still refused)."""
    from importlib import metadata

    from hardening import build

    from hatch_shrinkray.files import file_sha256

    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    root = write_project(tmp_path / "proj", 'method = "fp16"\n')
    shutil.copyfile(silero_vad(), root / MODEL)
    build(root, out=tmp_path / "one")
    (record,) = (tmp_path / "cache").glob("*.json")
    shrunk = file_sha256(record.with_suffix(".onnx"))
    marker = tmp_path / "cache" / f"{shrunk}.loads"
    assert marker.read_text() == f"{shrunk} loads in onnxruntime {metadata.version('onnxruntime')}\n"
    marker.unlink()
    build(root, out=tmp_path / "two")  # a hit without the note: checked, and noted again
    assert marker.read_text() == f"{shrunk} loads in onnxruntime {metadata.version('onnxruntime')}\n"
