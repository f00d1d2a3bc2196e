"""Fast paths through the console script and the benchmark drivers (the rest: tests/unit/test_fast_paths.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hardening import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.process
def test_record_keeps_256_samples_by_default() -> None:
    out = cli("record", "--help")
    assert out.returncode == 0
    assert "(default 256)" in " ".join(out.stdout.split())


@pytest.mark.process
def test_real_inputs_report_states_the_issue_minimums(tmp_path: Path) -> None:
    """benchmarks/real_inputs.py's report, on made-up results: verdicts computed, not written by hand."""
    def variant(cpu: float) -> dict[str, Any]:
        return {"rc": [0], "cpu": [cpu], "wall": [cpu], "report": None, "stderr": "", "output": "x"}

    def task(identical: float, size: int) -> dict[str, Any]:
        return {"identical": identical, "same": int(200 * identical), "n": 200, "bytes": size,
                "metrics": {"cer": 0.07}, "primary": "cer"}

    result = {
        "key": "ppocrv6_rec", "engine": "abc", "model_bytes": 1000, "load": 1.0, "repeats": 3,
        "recording": {"files": ["r.npz"], "bytes": 10, "summary": ""},
        "variants": {"int8 (no inputs)": variant(1.0), "int8 + recording": variant(2.0),
                     "auto + recording": variant(30.0), "int8 asymmetric + recording": variant(1.5)},
        "task": {"original": {"metrics": {"cer": 0.07}, "identical": 1.0, "n": 200, "bytes": 1000},
                 "int8 (no inputs)": task(0.855, 282), "int8 + recording": task(0.965, 282),
                 "auto + recording": task(0.88, 300)},
        "no_inputs": {"rc": 1, "stderr": "error: method auto fits its choices to real inputs", "lines": 1,
                      "output_written": False},
    }
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ppocrv6_rec.json").write_text(json.dumps(result))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.real_inputs", "ppocrv6_rec", "--report-only",
                           "--results-dir", str(tmp_path / "results"), "--out", str(tmp_path / "R.md")],
                          capture_output=True, text=True, check=False, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "R.md").read_text()
    assert "int8 + recording keeps +11.0 points" in text and "(minimum +5): **met**" in text
    assert "keeps 88.0% at 30.0% of the file (minimum >= 90% at <= 35%): **missed**" in text
    assert "| 2.00x / 2.00x |" in text and "| 1.33x / 1.33x |" in text
    assert "python -m benchmarks.real_inputs ppocrv6_rec --repeats 3" in text
