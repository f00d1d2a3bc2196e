"""The light build environment: hatch-shrinkray-core carries the code without the engine, the
``hatch-shrinkray`` metapackage adds it, and the hook asks for the engine only when it must shrink."""

from __future__ import annotations

import email
import sys
import zipfile
from pathlib import Path

from hatchling.builders.wheel import WheelBuilder
from packaging.requirements import Requirement

import hatch_shrinkray

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
ENGINE = f"hatch-shrinkray-core[engine]=={hatch_shrinkray.__version__}"
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




