"""``check`` judges what a build ships: a model that a build ships as its original (generated inputs
could not verify its shrunk version) has nothing to check. ``check`` says so in one line, swaps
nothing for it and does not count it as tested. Run as a user runs it (the console script, a
throw-away project, the command in a subprocess).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hardening import cli
from onnx import helper

from onnx_builders import init, model, save, vi

K, N = 256, 128
SCRIPT = textwrap.dedent('''
    from pathlib import Path

    import numpy as np
    import onnxruntime as ort

    ROOT = Path(__file__).resolve().parent
    x = np.ones((2, 256), np.float32)
    for name in ("a", "b"):
        s = ort.InferenceSession(str(ROOT / f"src/pkg/models/{name}.onnx"), providers=["CPUExecutionProvider"])
        s.run(None, {"x": x})
''')


pytestmark = pytest.mark.usefixtures("private_cache")


def make_project(root: Path, models: str = "src/pkg/models/*.onnx") -> Path:
    """Two models; ``b``'s output is judged as plain values to a tolerance no int8 model meets, so a
    build ships its original."""
    (root / "src/pkg/models").mkdir(parents=True)
    for i, name in enumerate("ab"):
        w = (np.random.default_rng(i).standard_normal((K, N)) * 0.1).astype(np.float32)
        save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", K])], [vi("y", ["batch", N])],
                   [init("W", w)]), root / f"src/pkg/models/{name}.onnx")
    (root / "check_models.py").write_text(SCRIPT)
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [project]
        name = "pkg"
        version = "0.1.0"

        [tool.hatch.build.hooks.shrinkray]
        models = ["{models}"]

        [[tool.hatch.build.hooks.shrinkray.overrides]]
        models = ["src/pkg/models/b.onnx"]
        max-rel-l2 = 1e-9
        judges = {{ y = "values" }}
    '''))
    return root


def test_a_model_the_build_ships_original_is_not_checked(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    checked = cli("check", "--json", "report.json", "--", sys.executable, "check_models.py", cwd=root)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert ("shrinkray: src/pkg/models/b.onnx: shipped its original (131.18 KB): int8 fails on 8 generated samples"
            in checked.stderr), checked.stderr
    out = checked.stdout.splitlines()
    assert ("not checked: a build ships the original bytes of src/pkg/models/b.onnx (generated inputs could not "
            "verify them): not counted as tested") in out, out
    models = out[out.index("models:") + 1:out.index("runs:")]
    assert [m.split(":")[0] for m in models] == ["  src/pkg/models/a.onnx"], models
    assert not any(line.startswith("not loaded") for line in out)
    report = json.loads((root / "report.json").read_text())
    swapped = {sha: seen["swapped"] for sha, seen in report["runs"]["shrunk"]["models"].items()}
    (b,) = [m for m in report["models"] if m["model"] == "src/pkg/models/b.onnx"]
    assert swapped.get(b["sha256"], 0) == 0 and sum(swapped.values()) == 1, swapped
    assert b["verification"] == "nothing to check (ships its original bytes, as generated inputs could not verify it)"


def test_nothing_to_check_when_every_model_ships_its_original(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj", models="src/pkg/models/b.onnx")
    checked = cli("check", "--fix", "--", sys.executable, "check_models.py", cwd=root)
    assert checked.returncode == 1
    (line,) = [ln for ln in checked.stderr.splitlines() if ln.startswith("error: ")]
    assert line.startswith("error: nothing to check: no configured model ships shrunk (src/pkg/models/b.onnx: (ships "
                           "its original bytes, as generated inputs could not verify it))"), line
    assert "a build verifies them on real inputs: record real inputs: `hatch-shrinkray record -o " in checked.stderr
    assert "Traceback" not in checked.stderr
