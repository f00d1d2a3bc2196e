"""What docs/recording.md shows, run (the rest: tests/unit/test_docs_consistency.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _block_after(text: str, words: str) -> list[str]:
    """The lines of the first code block after ``words``."""
    return text.split(words, 1)[1].split("```\n", 1)[1].split("```", 1)[0].splitlines()


@pytest.mark.process
@pytest.mark.extended
def test_recording_md_shows_what_record_and_the_build_print(tmp_path: Path) -> None:
    """docs/recording.md's example, run again: `record` of example_project's tests prints its table
    and next step, and `hatch -v build` with that recording prints its lines (times aside)."""
    import os
    import shutil
    import subprocess
    import sys

    from hardening import cli

    root = tmp_path / "example_project"
    shutil.copytree(REPO / "example_project", root, ignore=shutil.ignore_patterns("dist", "build", "*.egg-info"))
    shutil.rmtree(root / "data" / "shrinkray-inputs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HATCH_BUILD")}
    env |= {"HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "HATCH_VERBOSE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    text = (DOCS / "recording.md").read_text(encoding="utf-8")

    recorded = cli("record", "--output", "data/shrinkray-inputs", "--", "python", "-m", "pytest", "-q", "tests",
                   cwd=root, env=env)
    assert recorded.returncode == 0, recorded.stderr
    printed = (recorded.stdout + recorded.stderr).splitlines()
    for line in _block_after(text, "step 1 printed:"):
        assert line in printed, f"docs/recording.md quotes a line record no longer prints:\n{line}\n\n{printed}"

    built = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
                           cwd=root, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stderr

    def timeless(line: str) -> str:
        return re.sub(r", \d+\.\d s$", "", line)

    printed = [timeless(line) for line in (built.stdout + built.stderr).splitlines()]
    for line in _block_after(text, "`hatch -v build` printed (among its other lines):"):
        assert timeless(line) in printed, f"docs/recording.md quotes a line the build no longer prints:\n{line}\n\n" \
                                          + "\n".join(printed)
