"""Smoke test of the benchmark harness (benchmarks/): its core functions on a tiny hand-built model.

Fast (< 60 s), offline: no corpus download, no peer venv. The real benchmark is
``python benchmarks/run.py`` (not part of CI's default run).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import common, run, variants  # noqa: E402
from benchmarks.common import Feed, SizeCache, TaskOutput  # noqa: E402


def _tiny_model(path: Path, seed: int = 0) -> Path:
    """x[1,128] -> MatMul(128x128) -> Relu -> MatMul(128x8) -> Softmax; big enough to be quantized."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.normal(0, 0.1, (128, 128)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (128, 8)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], initializer=[w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


class TinyTask:
    """A task in the harness's shape: top-1 'accuracy' against the original's labels on 64 inputs."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.xs = [rng.normal(0, 1, (1, 128)).astype(np.float32) for _ in range(64)]
        self.ref: list[int] | None = None

    def latency_feed(self) -> Feed:
        return {"x": self.xs[0]}

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        outs = [sess.run(None, {"x": x})[0] for x in self.xs]
        top1 = [int(o.argmax()) for o in outs]
        if self.ref is None:
            self.ref = top1
        acc = sum(a == b for a, b in zip(top1, self.ref, strict=True)) / len(top1)
        return TaskOutput(metrics={"top1": acc}, decisions=top1, raw=outs)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return _tiny_model(tmp_path / "tiny.onnx")


def test_sizes_are_cached_by_sha(tiny: Path, tmp_path: Path) -> None:
    cache = SizeCache(tmp_path / "sizes.json")
    s = cache.sizes(tiny)
    assert s["raw"] == tiny.stat().st_size
    for algo in common.COMPRESSORS:
        v = s[algo]
        assert v is not None
        assert 0 < v < s["raw"] * 1.1
    # a second cache object reads the file; nothing is recomputed (compute=False still answers)
    again = SizeCache(tmp_path / "sizes.json").sizes(tiny, compute=False)
    assert again == s
    assert json.loads((tmp_path / "sizes.json").read_text())[common.sha256_file(tiny)]["brotli11"] == s["brotli11"]


def test_output_diff_and_agreement() -> None:
    a = [np.array([1.0, 2.0, 3.0])]
    d = common.output_diff(a, a)
    assert d.cosine == pytest.approx(1.0)
    assert d.rel_l2 == 0.0
    d2 = common.output_diff(a, [np.array([1.0, 2.0, 3.3])])
    assert 0 < d2.rel_l2 < 0.1
    assert math.isnan(common.output_diff(a, [np.array([np.nan, 0.0, 0.0])]).cosine)
    assert common.agreement([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    assert math.isnan(common.agreement([1], [1, 2]))


def test_latency_and_session_ratios(tiny: Path) -> None:
    a, b = common.make_session(tiny), common.make_session(tiny)
    lat = common.interleaved_latency(a, b, {"x": np.ones((1, 128), np.float32)}, budget_s=0.2)
    assert lat.runs >= 7
    assert lat.base_ms > 0
    assert 0 < lat.ratio < 1e3  # a timing on a shared machine: only sanity, no tight bound
    ratio, ta, tb = common.interleaved_session_creation(tiny, tiny, reps=3)
    assert ta > 0
    assert tb > 0
    assert 0 < ratio < 1e3
    sess, err = common.try_session(tiny.with_name("missing.onnx"))
    assert sess is None
    assert err


def test_shrink_subprocess_records_time_and_rss(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "SHRUNK_DIR", tmp_path / "shrunk")
    r = variants.shrink_variant(variants.BY_NAME["ort-dynamic"], "tiny", tiny)
    assert r.ok, r.error
    assert r.path is not None
    assert Path(r.path).exists()
    assert r.seconds > 0
    assert 10 < r.peak_rss_mb < 4000  # the child's own VmHWM, not the parent's
    # the cached result is reused for the same input
    r2 = variants.shrink_variant(variants.BY_NAME["ort-dynamic"], "tiny", tiny)
    assert r2.seconds == r.seconds


def test_measure_and_report_end_to_end(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variants, "SHRUNK_DIR", tmp_path / "shrunk")
    monkeypatch.setattr(run, "RESULTS_CACHE", tmp_path / "results")
    spec = run.TaskSpec("tiny", "top1", True, lambda p, q: TinyTask(), lambda q: "tiny-1")
    args = argparse.Namespace(force=False, force_shrink=False, skip_brotli=False, algos=common.COMPRESSORS,
                              threads=1, latency_budget=0.2, quick=True)
    sizes = SizeCache(tmp_path / "sizes.json")
    task = TinyTask()
    orig_out = task.run(common.make_session(tiny), tiny)
    names = ["original", "ort-dynamic"]
    try:
        import hatch_shrinkray

        assert hatch_shrinkray.shrink
        names.append("ours-int8")
    except Exception:  # the engine is developed in parallel; the harness must not depend on it
        pass
    rows = [run.measure("tiny", variants.BY_NAME[n], tiny, task=task, orig_out=orig_out, spec=spec, args=args,
                        sizes=sizes) for n in names]
    for row in rows:
        assert row.status == "ok", (row.variant, row.detail)
        assert row.metrics["top1"] >= 0.5
        assert row.latency_ratio is not None
        assert row.latency_ratio > 0
        assert row.sizes["brotli11"]
    assert rows[0].agreement == 1.0
    assert rows[0].rel_l2 == 0.0
    from dataclasses import asdict

    from benchmarks import report

    all_rows = {f"tiny/{r.variant}": asdict(r) for r in rows}
    md = report.write_report(all_rows, args, "now", ["--quick"], md_path=tmp_path / "R.md",
                             png_path=tmp_path / "R.png")
    text = md.read_text()
    assert "## tiny" in text
    assert "onnxruntime quantize_dynamic" in text
    assert "python benchmarks/run.py --quick" in text


def test_task_helpers_without_models() -> None:
    from benchmarks.tasks import ocr_det, ocr_rec, vad

    chars = ["<blank>", "a", "b", " "]
    probs = np.eye(4)[[1, 1, 0, 1, 2, 2, 3, 0, 2]]
    assert ocr_rec.ctc_decode(probs, chars) == "aab b"
    assert ocr_rec.edit_distance("kitten", "sitting") == 3
    assert ocr_rec.cer(["abc"], ["abd"]) == pytest.approx(1 / 3)
    gt = [(0.0, 0.0, 10.0, 10.0), (20.0, 20.0, 30.0, 30.0)]
    assert ocr_det.match_counts(gt, [(0.0, 0.0, 10.0, 11.0)], 0.5) == (1, 0, 1)
    assert ocr_det.f1_boxes([gt], [gt], 0.7) == 1.0
    lab = np.array([True, True, False, False])
    assert vad.f1(lab, np.array([True, False, False, True])) == pytest.approx(0.5)


def test_vad_streaming_on_a_silero_shaped_model(tmp_path: Path) -> None:
    """stream_probs feeds 64 context + 512 samples, state and sr like silero_vad's OnnxWrapper."""
    from benchmarks.tasks import vad

    nodes = [
        helper.make_node("ReduceL2", ["input"], ["e"], axes=[1], keepdims=1),
        helper.make_node("Sigmoid", ["e"], ["output"]),
        helper.make_node("Identity", ["state"], ["stateN"]),
    ]
    graph = helper.make_graph(
        nodes, "fakevad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, None]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, 128]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, 128])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    p = tmp_path / "fakevad.onnx"
    onnx.save(m, str(p))
    audio = np.zeros(16000, dtype=np.float32)
    audio[8000:12000] = 0.5
    probs = vad.stream_probs(common.make_session(p), audio)
    assert probs.shape == (16000 // 512,)
    assert probs[0] == pytest.approx(0.5)
    assert probs[20] > 0.99
