"""The engine is requested only to shrink, through a PEP 517 build (the rest: tests/unit/test_packaging.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from hardening import MODELS_DIR, write_project
from hatchling import build as backend

from onnx_builders import mlp, save

ENGINE_REQUIREMENTS = ["numpy>=1.24", "onnx>=1.16", "onnxruntime>=1.22", "threadpoolctl>=3.1"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write_project(tmp_path / "toymodel", models_glob="src/toymodel/models/*.onnx")
    save(mlp(), root / MODELS_DIR / "a.onnx")
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(root)
    return root


@pytest.mark.process  # a build through PEP 517 starts the reaper of its work directory (hatch/stopping.py)
def test_the_engine_is_requested_only_to_shrink(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hatchling's own PEP 517 functions, as a frontend calls them in the build environment."""
    assert backend.get_requires_for_build_sdist() == ENGINE_REQUIREMENTS
    assert backend.get_requires_for_build_wheel() == ENGINE_REQUIREMENTS
    assert not [r for r in backend.get_requires_for_build_editable() if "shrinkray" in r or "onnx" in r]

    sdist = tmp_path / backend.build_sdist(str(tmp_path))
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    monkeypatch.chdir(tmp_path / "unpacked/toymodel-0.1.0")
    assert backend.get_requires_for_build_wheel() == []  # every model is already shrunk (manifest)
