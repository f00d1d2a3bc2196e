"""Every line the tool prints at the default verbosity fits in 160 characters, a path counted as 40
(decision 7): collected across a corpus of runs as a newcomer meets them, each through the installed
console script or a real hatchling build in a fresh process: every command, a build that follows a
plan ``check --fix`` wrote, a model that fails and falls back, a build that fails (``strict``),
``check`` with a regression, ``--fix``'s progress, usage slips and the hints they print.
"""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hardening import MODEL, cli, hook_build, write_project
from hatchling.builders.wheel import WheelBuilder

from onnx_builders import mlp, save

LIMIT = 160
PATH_ROOM = 40
PATHS = re.compile(r"\S*/\S*")
"""A token with a slash: a path, a glob or a command quoting one (counted as at most ``PATH_ROOM``;
the product's own ``verdict.counted`` is the same rule, written apart so that one checks the other)."""

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("private_cache")]


def counted(line: str) -> int:
    """The line's length with every path counted as at most ``PATH_ROOM`` characters (the punctuation after
    it as itself)."""
    total = len(line)
    for m in PATHS.finditer(line):
        path = re.sub(r"[:;,.)`'\"]+$", "", m.group(0))
        total -= max(0, len(path) - PATH_ROOM)
    return total


TESTS = """\
import numpy as np
import onnxruntime as ort
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
X = np.random.default_rng(7).standard_normal((16, 256)).astype(np.float32)


def test_the_labels_are_the_goldens():
    s = ort.InferenceSession(str(ROOT / "src/toymodel/models/a.onnx"), providers=["CPUExecutionProvider"])
    got = s.run(None, {"x": X})[0]
    assert np.abs(got - np.load(ROOT / "tests/golden.npy")).max() < 1e-6


def test_it_runs():
    s = ort.InferenceSession(str(ROOT / "src/toymodel/models/a.onnx"), providers=["CPUExecutionProvider"])
    assert s.run(None, {"x": X})[0].shape == (16, 10)
"""


def _project(root: Path, table: str = 'inputs = "tests/inputs.npz"\n') -> Path:
    write_project(root, table)
    model = save(mlp(), root / MODEL)
    (root / "tests").mkdir()
    (root / "tests/test_model.py").write_text(TESTS)
    from onnx_builders import run

    x = np.random.default_rng(7).standard_normal((16, 256)).astype(np.float32)
    np.save(root / "tests/golden.npy", run(model, {"x": x})[0])
    rng = np.random.default_rng(1)
    np.savez(root / "tests/inputs.npz", x=rng.standard_normal((24, 4, 256)).astype(np.float32))
    return root


def _corpus(tmp: Path) -> Iterator[tuple[str, str]]:
    """(what ran, what it printed) for each run of the corpus."""
    root = _project(tmp / "proj")
    # the tests' own output is theirs, not the tool's: kept short
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "--tb=no", "--no-header", "-p", "no:cacheprovider", "tests"]
    runs: list[tuple[str, tuple[str, ...], Path]] = [
        ("info", ("info", MODEL), root),
        ("shrink", ("shrink", MODEL, "-o", str(tmp / "out")), root),
        ("shrink int4", ("shrink", MODEL, "-o", str(tmp / "int4"), "--method", "int4"), root),
        ("shrink strict", ("shrink", MODEL, "-o", str(tmp / "strict"), "--method", "int4", "--max-rel-l2", "0.001",
                           "--strict"), root),
        ("compare", ("compare", MODEL, str(tmp / "out/a.onnx")), root),
        ("record", ("record", "-o", str(tmp / "rec"), "--", *pytest_cmd), root),
        ("record, a model never loaded", ("record", "-o", str(tmp / "rec2"), "--", sys.executable, "-c", "0"), root),
        ("check", ("check", "--", *pytest_cmd), root),
        ("check --fix", ("check", "--fix", "--", *pytest_cmd), root),
        ("missing --", ("check", *pytest_cmd), root),
        ("command typo", ("shrik", MODEL), root),
        ("flag typo", ("shrink", MODEL, "-o", str(tmp / "x"), "--methd", "int8"), root),
    ]
    for what, args, cwd in runs:
        proc = cli(*args, cwd=cwd, timeout=600)
        yield what, proc.stdout + proc.stderr
    (tmp / "plan-build").mkdir()
    built = hook_build(root, tmp / "plan-build")  # after --fix: the plan file's choice
    yield "build with a plan", built.stdout + built.stderr
    failing = _project(tmp / "failing", 'inputs = "tests/inputs.npz"\nmethod = "int4"\nmax-rel-l2 = 0.001\n'
                                         "strict = true\n")
    (tmp / "failed-build").mkdir()
    failed = hook_build(failing, tmp / "failed-build")
    assert failed.returncode != 0, failed.stdout + failed.stderr
    yield "failed build", failed.stdout + failed.stderr
    smoke = _project(tmp / "smoke", "")  # no recording: generated inputs, and the record command to run
    (tmp / "smoke-build").mkdir()
    smoked = hook_build(smoke, tmp / "smoke-build")
    yield "generated inputs", smoked.stdout + smoked.stderr
    noise = _project(tmp / "noise", "max-rel-l2 = 0.001\n")
    (tmp / "kept-build").mkdir()
    kept = hook_build(noise, tmp / "kept-build")
    yield "original kept", kept.stdout + kept.stderr
    wheel = Path(next(WheelBuilder(str(noise)).build(directory=str(tmp / "plain"), versions=["standard"])))
    shutil.rmtree(tmp / "plain-out", ignore_errors=True)
    rewrote = cli("wheel", str(wheel), "-o", str(tmp / "plain-out"), "--models", "toymodel/models/*.onnx", cwd=noise)
    with zipfile.ZipFile(wheel) as zf:
        assert "toymodel/models/a.onnx" in zf.namelist()
    yield "wheel", rewrote.stdout + rewrote.stderr


@pytest.mark.extended
def test_every_line_of_a_corpus_of_runs_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The budget is the tool's; ``check`` passes the user's own test output through as it is. Under a CI
    # variable pytest prints each failure's whole message in its summary (hundreds of characters of
    # arrays), which is the user's line, not ours: the corpus runs as on a developer's machine.
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    printed = dict(_corpus(tmp_path))
    (tmp_path / "printed.txt").write_text("\n".join(f"== {w}\n{o}" for w, o in printed.items()))
    assert all(out.strip() for out in printed.values()), printed
    long = [(what, counted(line), line) for what, out in printed.items() for line in out.splitlines()
            if counted(line) > LIMIT and "Traceback" not in out]
    assert long == [], "\n".join(f"{what} ({n}): {line}" for what, n, line in long)
    assert not any("Traceback" in out for out in printed.values()), printed
