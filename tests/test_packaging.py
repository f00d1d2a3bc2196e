"""The light build environment: hatch-shrinkray-core carries the code without the engine, the
``hatch-shrinkray`` metapackage adds it, and the hook asks for the engine only when it must shrink."""

from __future__ import annotations

import email
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from hardening import MODELS_DIR, write_project
from hatchling import build as backend
from hatchling.builders.wheel import WheelBuilder
from packaging.requirements import Requirement

import hatch_shrinkray

from onnx_builders import mlp, save

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
ENGINE = f"hatch-shrinkray-core[engine]=={hatch_shrinkray.__version__}"
ENGINE_REQUIREMENTS = ["numpy>=1.24", "onnx>=1.16", "onnxruntime>=1.22", "threadpoolctl>=3.1"]
"""What a build shrinking with int8 installs: not rich (the CLI's), not onnx-ir (int4 and auto's)."""


def pyproject(path: Path) -> dict:  # type: ignore[type-arg]
    return tomllib.loads(path.read_text())


def test_versions_and_pins_agree() -> None:
    core = pyproject(REPO / "pyproject.toml")["project"]
    meta = pyproject(REPO / "metapackage/pyproject.toml")["project"]
    assert core["name"] == "hatch-shrinkray-core" and meta["name"] == "hatch-shrinkray"
    assert core["version"] == meta["version"] == hatch_shrinkray.__version__
    assert meta["dependencies"] == [ENGINE]
    light = {Requirement(r).name for r in core["dependencies"]}
    assert light == {"hatchling", "packaging", "tomli"}
    assert {"onnx", "onnxruntime", "numpy"} <= {Requirement(r).name for r in core["optional-dependencies"]["engine"]}


def test_metapackage_wheel_has_no_code(tmp_path: Path) -> None:
    wheel = next(WheelBuilder(str(REPO / "metapackage")).build(directory=str(tmp_path), versions=["standard"]))
    with zipfile.ZipFile(wheel) as zf:
        assert all(n.startswith("hatch_shrinkray-0.1.0.dist-info/") for n in zf.namelist()), zf.namelist()
        metadata = email.message_from_bytes(zf.read("hatch_shrinkray-0.1.0.dist-info/METADATA"))
    assert metadata.get_all("Requires-Dist") == [ENGINE]


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
