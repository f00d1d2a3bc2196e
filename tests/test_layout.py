"""What a user meets first: every module imports on its own in a fresh interpreter, and the
layering that keeps it so (import-linter's contracts in pyproject.toml, also run by CI)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hatch_shrinkray"
MODULES = sorted(
    ".".join(("hatch_shrinkray", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


def test_the_module_list_is_complete() -> None:
    assert {"hatch_shrinkray", "hatch_shrinkray.cli", "hatch_shrinkray.hatch.hooks",
            "hatch_shrinkray.onnxgraph.modelio", "hatch_shrinkray.methods.auto"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, f"import {module} failed:\n{proc.stderr}"


def test_public_names_resolve_in_a_fresh_interpreter() -> None:
    code = ("import hatch_shrinkray as h; "
            "[getattr(h, n) for n in h.__all__]; "
            "assert callable(h.verify) and callable(h.shrink), (h.verify, h.shrink)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_no_import_cycles_and_layers_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    proc = subprocess.run([lint, "--no-cache"], capture_output=True, text=True, check=False, timeout=300,
                          cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
