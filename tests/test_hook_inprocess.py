"""The hook driven through hatchling's real builders where a process starts too: a build in this process
whose original's bytes onnxruntime loads in a process of its own (nothing to shrink), and what a fresh
interpreter imports (the rest: tests/unit/test_hook_inprocess.py, on the same toy project).
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from hardening import MODEL, build
from toyproject import IN_SDIST, IN_WHEEL, forbid_engine, sdist_members, unpacked_sdist, write_project

from onnx_builders import mlp


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "toymodel")


pytestmark = pytest.mark.usefixtures("isolated")


@pytest.mark.process
def test_nothing_to_shrink_ships_the_original_and_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", onnx_model=mlp(16, 16))
    original = (root / MODEL).read_bytes()
    sdist = build(root, "sdist")
    assert sdist_members(sdist)[IN_SDIST] == original
    err = capsys.readouterr().err
    assert "shipped its original (1.82 KB): nothing to shrink: no weight has min-elements (16384) elements" in err
    assert "shrinkray: total 1 model: no model shrunk, 1 shipped its original (1.82 KB) in " in err
    forbid_engine(monkeypatch)
    with zipfile.ZipFile(build(root)) as zf:
        assert zf.read(IN_WHEEL) == original
    assert "no model shrunk, 1 shipped its original" in capsys.readouterr().err
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    with zipfile.ZipFile(build(tmp_path / "unpacked/toymodel-0.1.0", out=tmp_path / "again")) as zf:
        assert zf.read(IN_WHEEL) == original
    assert "no model shrunk, 1 shipped its original" in capsys.readouterr().err


@pytest.mark.process
def test_loading_the_hook_does_not_start_onnxruntime() -> None:
    """hatchling imports the hook just to ask for ``dependencies()``; that must stay cheap."""
    code = "import sys, hatch_shrinkray.hatch.hooks; print('onnxruntime' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "False"


PASS_THROUGH = """
import sys
from hatchling.builders.wheel import WheelBuilder
wheel = next(WheelBuilder(sys.argv[1]).build(directory=sys.argv[2], versions=["standard"]))
print(wheel)
print(sorted(m for m in ("onnx", "onnxruntime", "numpy") if m in sys.modules))
"""


@pytest.mark.process
def test_pass_through_checks_stay_light(project: Path, tmp_path: Path) -> None:
    """hatchling runs the wheel build of an sdist without onnx installed: the pass-through
    checks (sha256, ONNX framing, manifest sanity) must not import onnx, onnxruntime or numpy."""
    root = unpacked_sdist(project, tmp_path)
    proc = subprocess.run([sys.executable, "-c", PASS_THROUGH, str(root), str(tmp_path / "wheel-dist")],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout
    assert "already shrunk (its manifest names these bytes)" in proc.stderr
