"""The configuration's errors as a build in a fresh interpreter prints them (the rest: tests/unit/test_config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hardening import PY, cli, one_error


@pytest.mark.process
def test_a_pyproject_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = one_error(cli("check", "--", PY, "-c", "pass", cwd=tmp_path))
    assert line == f"error: {tmp_path / 'pyproject.toml'}: invalid TOML: nested too deeply", line
