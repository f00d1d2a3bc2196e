"""The harness's core on a tiny hand-built model, offline, in well under a minute: what the tests run.

    python -m benchmarks.smoke OUT_DIR      # prints one JSON object of measured facts

Compressed sizes and their cache, output diffs, interleaved latency and session creation, a shrink in
a subprocess (wall time, peak RSS, its cache), which hand-written notes a regenerated report keeps, and the
task helpers that need no corpus model. It states facts and does not judge them: the
test (``tests/test_benchmark_smoke.py``) does, so the tests never import ``benchmarks``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common, variants
from benchmarks.common import SizeCache


def tiny_model(path: Path, seed: int = 0) -> Path:
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


def fake_vad(path: Path) -> Path:
    """A model with silero_vad's interface (input, state, sr -> output, stateN): the L2 norm of the chunk."""
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
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def size_facts(tiny: Path, out: Path) -> dict[str, Any]:
    cache_file = out / "sizes.json"
    first = SizeCache(cache_file).sizes(tiny)
    again = SizeCache(cache_file).sizes(tiny, compute=False)  # a second cache object reads the file
    stored = json.loads(cache_file.read_text())[common.sha256_file(tiny)]
    return {"file_bytes": tiny.stat().st_size, "compressors": list(common.COMPRESSORS), "first": first,
            "again": again, "stored_brotli11": stored["brotli11"]}


def diff_facts() -> dict[str, Any]:
    a = [np.array([1.0, 2.0, 3.0])]
    same = common.output_diff(a, a)
    near = common.output_diff(a, [np.array([1.0, 2.0, 3.3])])
    return {"same_cosine": same.cosine, "same_rel_l2": same.rel_l2, "near_rel_l2": near.rel_l2,
            "nan_cosine": common.output_diff(a, [np.array([np.nan, 0.0, 0.0])]).cosine,
            "agreement": common.agreement([1, 2, 3, 4], [1, 2, 0, 4]),
            "agreement_of_unequal_lengths": common.agreement([1], [1, 2])}


def timing_facts(tiny: Path) -> dict[str, Any]:
    a, b = common.make_session(tiny), common.make_session(tiny)
    lat = common.interleaved_latency(a, b, {"x": np.ones((1, 128), np.float32)}, budget_s=0.2)
    ratio, ta, tb = common.interleaved_session_creation(tiny, tiny, reps=3)
    sess, err = common.try_session(tiny.with_name("missing.onnx"))
    return {"latency": {"runs": lat.runs, "base_ms": lat.base_ms, "ratio": lat.ratio},
            "session": {"ratio": ratio, "base_s": ta, "variant_s": tb},
            "missing": {"session": sess is not None, "error": err}}


def shrink_facts(tiny: Path) -> dict[str, Any]:
    first = variants.shrink_variant(variants.BY_NAME["ort-dynamic"], "tiny", tiny)
    again = variants.shrink_variant(variants.BY_NAME["ort-dynamic"], "tiny", tiny)  # served from its cache
    return {"first": asdict(first), "path_exists": first.path is not None and Path(first.path).exists(),
            "again": asdict(again)}


def notes_facts() -> dict[str, Any]:
    """``engine_notes`` for results of the engine the notes name, of another, and of both."""
    notes = "## Notes\n\nwritten about abcdef123456\n"
    return {"same": common.engine_notes(notes, ["abcdef123456"], ["git:abcdef123456"], "R.md"),
            "full_hash": common.engine_notes(notes, ["abcdef123456"], ["abcdef1234567890" + "0" * 24], "R.md"),
            "other": common.engine_notes(notes, ["abcdef123456"], ["git:0123456789ab"], "R.md"),
            "mixed": common.engine_notes(notes, ["abcdef123456"], ["git:abcdef123456", "fedcba654321"], "R.md"),
            "short": common.engine_notes(notes, ["abcdef123456"], ["abc"], "R.md"),
            "notes": notes}


def task_helper_facts(out: Path) -> dict[str, Any]:
    from benchmarks.tasks import ocr_det, ocr_rec, sentence, vad

    chars = ["<blank>", "a", "b", " "]
    probs = np.eye(4)[[1, 1, 0, 1, 2, 2, 3, 0, 2]]
    gt = [(0.0, 0.0, 10.0, 10.0), (20.0, 20.0, 30.0, 30.0)]
    audio = np.zeros(16000, dtype=np.float32)
    audio[8000:12000] = 0.5
    stream = vad.stream_probs(common.make_session(fake_vad(out / "fakevad.onnx")), audio)
    return {"ctc_decode": ocr_rec.ctc_decode(probs, chars), "edit_distance": ocr_rec.edit_distance("kitten", "sitting"),
            "cer": ocr_rec.cer(["abc"], ["abd"]),
            "match_counts": list(ocr_det.match_counts(gt, [(0.0, 0.0, 10.0, 11.0)], 0.5)),
            "f1_boxes": ocr_det.f1_boxes([gt], [gt], 0.7),
            "vad_f1": vad.f1(np.array([True, True, False, False]), np.array([True, False, False, True])),
            "stream_shape": list(stream.shape), "stream_first": float(stream[0]), "stream_speech": float(stream[20]),
            "ocr_det_seeds": [ocr_det.CALIB_SEED, ocr_det.TEST_SEED],
            "sentence_calibration": len(sentence.CALIB_SENTENCES),
            "sentence_calibration_in_test": sorted(set(sentence.CALIB_SENTENCES) & set(sentence.SentenceTask.pool()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("out", type=Path, help="an empty folder for the tiny model, its caches and the report")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    variants.SHRUNK_DIR = out / "shrunk"  # the smoke run's shrunk models and results stay in OUT_DIR
    tiny = tiny_model(out / "tiny.onnx")
    with contextlib.redirect_stdout(sys.stderr):  # the harness's progress lines; stdout is the JSON alone
        facts = {"sizes": size_facts(tiny, out), "diff": diff_facts(), "timing": timing_facts(tiny),
                 "shrink": shrink_facts(tiny), "notes": notes_facts(), "tasks": task_helper_facts(out)}
    json.dump(facts, sys.stdout, default=common.json_default)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
