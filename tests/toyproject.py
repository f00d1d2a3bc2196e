"""The toy project of the hook's in-process tests (an MLP with a 256x256 float weight as its one model,
so a build takes well under a second) and what they read back from its archives: shared by
tests/unit/test_hook_inprocess.py and the cases beside it that start a process (tests/test_hook_inprocess.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import hardening
import onnx
import pytest
from hardening import MODEL, build

import hatch_shrinkray.engine

from onnx_builders import mlp, save

IN_WHEEL = "toymodel/models/a.onnx"
IN_SDIST = f"toymodel-0.1.0/{MODEL}"


def write_project(root: Path, hook_table: str = "", *, onnx_model: onnx.ModelProto | None = None) -> Path:
    """The shared toy project with ``onnx_model`` (an MLP unless given) as its one model."""
    hardening.write_project(root, hook_table, models_glob="src/toymodel/models/*.onnx")
    save(onnx_model or mlp(), root / MODEL)
    return root


def forbid_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, a build that runs the engine fails the test (a pass-through or a cache hit must not)."""
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the engine must not run")

    monkeypatch.setattr(hatch_shrinkray.engine, "shrink", fail)


def sdist_members(path: Path) -> dict[str, bytes]:
    """The files of the sdist at ``path`` by member name (a name twice fails the test)."""
    with tarfile.open(path) as tar:
        names = tar.getnames()
        assert len(names) == len(set(names)), "duplicate entries in the sdist"
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def unpacked_sdist(project: Path, tmp_path: Path) -> Path:
    """``project``'s sdist, built in this process and unpacked under ``tmp_path``: its root."""
    with tarfile.open(build(project, "sdist")) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    return tmp_path / "unpacked/toymodel-0.1.0"
