"""The experiment behind ``auto``'s classifier heads (``hatch_shrinkray/fitting/heads.py``): fewer int8
levels for the rows of a CTC classifier whose class never competes on the calibration lines.

    python -m benchmarks.classifier_rows

PP-OCRv6 rec's last MatMul weight (``linear_8.w_0``, 120 x 18710: 42% of the model's weights) maps
120 features to one logit per character. ``auto`` keeps it at 127 levels per class. Here every other
weight stays float32 and only this one changes: per class (output channel) int8 codes with
output-aware rounding (GPTQ on the 64 recorded calibration lines' activations, seed 777), at one
level count for the classes that are top-1 or top-2 at some time step of those lines and another for
the rest. Judged on the 100 validation lines of seed 555 (neither recorded nor test lines; the same
lines ``fitting.budget.SPEND`` was chosen on): lines read exactly as the original reads them. Size: the
codes deflated at level 6 plus float32 scales. Writes ``benchmarks/CLASSIFIER_ROWS.md``.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.tasks.ocr_rec import CALIB_SEED, build_lines, ctc_decode, load_charset, normalize_text, preprocess
from hatch_shrinkray.bench import code_bounds, gptq

NAME = "linear_8.w_0"
VALIDATION = (100, 555)
VARIANTS = ((255, 255), (127, 127), (127, 63), (127, 31), (127, 15), (127, 7), (127, 3), (63, 63), (31, 31),
            (15, 15), (255, 15))


def _session(model: onnx.ModelProto) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _with_weight(model: onnx.ModelProto, w: np.ndarray) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in out.graph.initializer:
        if t.name == NAME:
            t.CopyFrom(numpy_helper.from_array(w.astype(np.float32), NAME))
    return out


def _read(sess: Any, inputs: list[np.ndarray], chars: list[str]) -> list[str]:
    name = sess.get_inputs()[0].name
    return [normalize_text(ctc_decode(sess.run(None, {name: x})[0][0], chars)) for x in inputs]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.classifier_rows",
                            description=(__doc__ or "").split("\n\n")[0]).parse_args(argv)
    path = corpus.model_path("ppocrv6_rec")
    model = onnx.load(str(path))
    chars = load_charset(path)
    w = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == NAME).astype(np.float64)
    node = next(n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] == NAME)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(helper.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, None))
    sess = _session(probe)
    name = sess.get_inputs()[0].name
    h = np.zeros((w.shape[0], w.shape[0]))
    used: set[int] = set()
    for _, img in build_lines(path, 64, CALIB_SEED):
        probs, act = sess.run(None, {name: preprocess(img)})
        a = act.reshape(-1, w.shape[0]).astype(np.float64)
        h += a.T @ a
        top2 = np.argsort(-probs[0], axis=1)[:, :2]
        used.update(int(c) for c in top2.reshape(-1))
    rows = np.ascontiguousarray(w.T)  # one row per class
    inputs = [preprocess(img) for _, img in build_lines(path, *VALIDATION)]
    reference = _read(_session(model), inputs, chars)
    mask = np.zeros(rows.shape[0], dtype=bool)
    mask[sorted(used)] = True
    unseen = sum(any(chars.index(c) not in used for c in t if c in chars) for t in reference)
    lines = ["# Fewer levels for the classes that never compete (an experiment for issue 20)", "",
             __doc__.split("\n\n", 2)[2].strip(), "", "```sh", "python -m benchmarks.classifier_rows", "```", "",
             f"`{NAME}` {tuple(w.shape)}: {int(mask.sum())} of {rows.shape[0]} classes are top-1 or top-2 at some step "
             f"of the 64 calibration lines; {unseen} of the 100 validation lines, as the original reads them, hold a "
             "character outside them.", "",
             "| levels (competing / other classes) | codes + scales deflated | lines as the original (of 100) |",
             "|---|---|---|"]
    for hot, cold in VARIANTS:
        codes = np.zeros_like(rows)
        scales = np.zeros(rows.shape[0])
        for levels, sel in ((hot, mask), (cold, ~mask)):
            part = rows[sel]
            half = (levels - 1) // 2
            scale = np.maximum(np.abs(part).max(axis=1), 1e-12) / half
            bounds = code_bounds(part.min(axis=1), part.max(axis=1), levels)
            r = gptq.round_rows(part, scale, h, 8, bounds)
            codes[sel], scales[sel] = r.codes, r.scale
        decoded = (codes.astype(np.float32) * scales.astype(np.float32)[:, None]).T
        q = codes.T.astype(np.int8)
        size = len(zlib.compress(q.tobytes(), 6)) + 4 * scales.size
        same = sum(a == b for a, b in zip(reference, _read(_session(_with_weight(model, decoded)), inputs, chars),
                                          strict=True))
        lines.append(f"| {hot} / {cold} | {size / 1e6:.3f} MB | {same} |")
        print(lines[-1])
    out = Path(__file__).resolve().parent / "CLASSIFIER_ROWS.md"
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
