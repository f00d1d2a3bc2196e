"""Fast paths through the console script (the rest: tests/unit/test_fast_paths.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hardening import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.process
def test_record_keeps_256_samples_by_default() -> None:
    out = cli("record", "--help")
    assert out.returncode == 0
    assert "(default 256)" in " ".join(out.stdout.split())

