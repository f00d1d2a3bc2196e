"""Smoke test of the benchmark harness (benchmarks/): ``python -m benchmarks.smoke`` on a tiny hand-built
model, run as a subprocess (the tests never import ``benchmarks``), and its facts judged here.

Fast (a few seconds), offline: no corpus download, no peer venv. The real benchmarks are the drivers
benchmarks/README.md lists (not part of CI's default run).
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("smoke")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.smoke", str(out)], capture_output=True, text=True,
                          check=False, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), out


def test_sizes_are_cached_by_sha(smoke: tuple[dict[str, Any], Path]) -> None:
    s = smoke[0]["sizes"]
    first = s["first"]
    assert first["raw"] == s["file_bytes"]
    assert s["compressors"]
    for algo in s["compressors"]:
        assert first[algo] is not None
        assert 0 < first[algo] < first["raw"] * 1.1
    # a second cache object reads the file; nothing is recomputed (compute=False still answers)
    assert s["again"] == first
    assert s["stored_brotli11"] == first["brotli11"]


def test_output_diff_and_agreement(smoke: tuple[dict[str, Any], Path]) -> None:
    d = smoke[0]["diff"]
    assert d["same_cosine"] == pytest.approx(1.0)
    assert d["same_rel_l2"] == 0.0
    assert 0 < d["near_rel_l2"] < 0.1
    assert math.isnan(d["nan_cosine"])
    assert d["agreement"] == 0.75
    assert math.isnan(d["agreement_of_unequal_lengths"])


def test_latency_and_session_ratios(smoke: tuple[dict[str, Any], Path]) -> None:
    t = smoke[0]["timing"]
    assert t["latency"]["runs"] >= 7
    assert t["latency"]["base_ms"] > 0
    assert 0 < t["latency"]["ratio"] < 1e3  # a timing on a shared machine: only sanity, no tight bound
    assert t["session"]["base_s"] > 0
    assert t["session"]["variant_s"] > 0
    assert 0 < t["session"]["ratio"] < 1e3
    assert t["missing"]["session"] is False
    assert t["missing"]["error"]


def test_shrink_subprocess_records_time_and_rss(smoke: tuple[dict[str, Any], Path]) -> None:
    s = smoke[0]["shrink"]
    first = s["first"]
    assert first["ok"], first["error"]
    assert s["path_exists"]
    assert first["seconds"] > 0
    assert 10 < first["peak_rss_mb"] < 4000  # the child's own VmHWM, not the parent's
    assert s["again"]["seconds"] == first["seconds"]  # the cached result is reused for the same input


def test_hand_written_notes_only_for_the_engine_they_were_written_about(smoke: tuple[dict[str, Any], Path]) -> None:
    """A driver appends its notes to a regenerated report only where every result comes from their engine."""
    n = smoke[0]["notes"]
    assert n["same"] == n["notes"] and n["full_hash"] == n["notes"]
    for case in ("other", "mixed", "short"):
        assert n["notes"] not in n[case] and "written about abcdef123456" not in n[case], case
        assert "left out" in n[case] and "git log -p -- benchmarks/R.md" in n[case], case


def test_task_helpers_without_models(smoke: tuple[dict[str, Any], Path]) -> None:
    t = smoke[0]["tasks"]
    assert t["ctc_decode"] == "aab b"
    assert t["edit_distance"] == 3
    assert t["cer"] == pytest.approx(1 / 3)
    assert t["match_counts"] == [1, 0, 1]
    assert t["f1_boxes"] == 1.0
    assert t["vad_f1"] == pytest.approx(0.5)


def test_recording_workloads_are_disjoint_from_the_test_data(smoke: tuple[dict[str, Any], Path]) -> None:
    """What ``record_task`` records for PP-OCRv4 det and the sentence embedder is none of their test data."""
    t = smoke[0]["tasks"]
    calib, test = t["ocr_det_seeds"]
    assert calib != test
    assert t["sentence_calibration"] >= 64 and t["sentence_calibration_in_test"] == []


def test_vad_streaming_on_a_silero_shaped_model(smoke: tuple[dict[str, Any], Path]) -> None:
    """stream_probs feeds 64 context + 512 samples, state and sr like silero_vad's OnnxWrapper."""
    t = smoke[0]["tasks"]
    assert t["stream_shape"] == [16000 // 512]
    assert t["stream_first"] == pytest.approx(0.5)
    assert t["stream_speech"] > 0.99


def test_no_test_imports_the_benchmarks() -> None:
    """The tests run benchmarks/ as subprocesses, so neither needs the other on ``sys.path``."""
    importers = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            importers += [f"{path.name}:{node.lineno}" for n in names if n.split(".")[0] == "benchmarks"]
    assert importers == []


def test_the_kernels_driver_measures_every_form_on_a_tiny_shape(tmp_path: Path) -> None:
    """``benchmarks.kernels`` on one 64x64 MatMul and a tiny Conv stack: a row per input and form, each form
    written as it claims (the driver checks the nodes' attributes), and a report naming every form."""
    run = [sys.executable, "-m", "benchmarks.kernels", "run", "--tiny", "--seconds", "0.2", "--rounds", "1",
           "--out", str(tmp_path)]
    for argv in (run, [sys.executable, "-m", "benchmarks.kernels", "report", "--out", str(tmp_path),
                       "--report", str(tmp_path / "KERNELS.md")]):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    rows = {(r["group"], r["feed"], r["form"]): r for r in results["rows"]}
    forms = {form for _, _, form in rows}
    assert len(forms) == 7 and "ConvInteger (quantize_dynamic)" in forms
    assert {(g, f) for g, f, _ in rows} == {("MatMul 64x64", "1 token"), ("MatMul 64x64", "16 tokens"),
                                           ("Conv 3x3 stack", "1 image")}
    for r in rows.values():
        assert r["time"] > 0 and r["memory"] > 0 and r["runs"] >= 7, r
        assert (r["rel_l2"] == 0) == (r["form"] == "float32"), r
    eight = rows[("MatMul 64x64", "1 token", "MatMulNBits 8-bit float activations, blocks of 32")]
    four = rows[("MatMul 64x64", "1 token", "MatMulNBits 4-bit float activations, blocks of 32")]
    assert eight["rel_l2"] < four["rel_l2"] < 0.5  # 16 times the levels: an error of another order
    report = (tmp_path / "KERNELS.md").read_text()
    assert report.startswith("# Kernels") and "python -m benchmarks.kernels run --tiny" in report
    assert all(f"| {form} |" in report for form in forms - {"float32"})
