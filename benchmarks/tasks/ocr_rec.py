"""OCR recognition: CER and exact-line accuracy on rendered text lines (half clean, half degraded).

Preprocessing and CTC decoding follow rapidocr: BGR, height 48, width ceil(48 * aspect) padded with
zeros (after normalisation) to at least 320, ``(x/255 - 0.5) / 0.5``; greedy CTC with index 0 = blank,
1.. = the model's ``character`` metadata lines, last = " ".
"""

from __future__ import annotations

import math
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from benchmarks.common import CACHE_DIR, Feed, TaskOutput

REC_H = 48
MIN_W = 320
MAX_W = 960
RAW_LINES = 16  # full probability matrices kept for cosine / rel-L2 (memory)
TEST_SEED = 1234
CALIB_SEED = 777
"""Lines of another seed, for recording calibration inputs (``record_task``): none of their texts is a test line's."""


def load_charset(model_path: Path) -> list[str]:
    m = onnx.load(str(model_path), load_external_data=False)
    for p in m.metadata_props:
        if p.key == "character":
            return ["<blank>", *p.value.splitlines(), " "]
    raise ValueError(f"{model_path} has no 'character' metadata")


def build_lines(model_path: Path, n: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """``n`` (text, RGB uint8 image) pairs; first half clean, second half degraded. Cached."""
    from benchmarks.tasks.render import random_line, render_line

    chars = load_charset(model_path)
    charset = set(chars[1:-1])
    key = f"ocr_rec_{model_path.stem}_{n}_{seed}.pkl"
    cache = CACHE_DIR / "tasks" / key
    if cache.exists():
        with open(cache, "rb") as f:
            cached: list[tuple[str, np.ndarray]] = pickle.load(f)
        return cached
    rng = random.Random(seed)
    out: list[tuple[str, np.ndarray]] = []
    for i in range(n):
        text = random_line(rng, charset)
        img = render_line(text, rng, degraded=i >= n // 2)
        out.append((text, np.asarray(img)))
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache, "wb") as f:
        pickle.dump(out, f)
    return out


def preprocess(img_rgb: np.ndarray) -> np.ndarray:
    from PIL import Image

    h, w = img_rgb.shape[:2]
    new_w = min(MAX_W, math.ceil(REC_H * w / h))
    im = Image.fromarray(img_rgb).resize((new_w, REC_H), Image.Resampling.BILINEAR)
    a = np.asarray(im, dtype=np.float32)[:, :, ::-1]  # RGB -> BGR
    a = (a / 255.0 - 0.5) / 0.5
    width = max(MIN_W, new_w)
    width = int(math.ceil(width / 8) * 8)
    x = np.zeros((1, 3, REC_H, width), dtype=np.float32)
    x[0, :, :, :new_w] = a.transpose(2, 0, 1)
    return x


def ctc_decode(probs: np.ndarray, chars: list[str]) -> str:
    idx = probs.argmax(axis=-1)
    out: list[str] = []
    prev = -1
    for i in idx.tolist():
        if i not in (prev, 0):
            out.append(chars[i] if i < len(chars) else "")
        prev = i
    return "".join(out)


def normalize_text(s: str) -> str:
    return " ".join(s.split())


def edit_distance(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def cer(refs: list[str], hyps: list[str]) -> float:
    errs = sum(edit_distance(r, h) for r, h in zip(refs, hyps, strict=False))
    return errs / max(1, sum(len(r) for r in refs))


class OcrRecTask:
    def __init__(self, model_path: Path, n_lines: int = 200, seed: int = TEST_SEED) -> None:
        self.chars = load_charset(model_path)
        self.lines = build_lines(model_path, n_lines, seed)
        self.inputs = [preprocess(img) for _, img in self.lines]
        self.refs = [normalize_text(t) for t, _ in self.lines]
        self._orig: list[str] | None = None  # the first run's lines (the harness runs the original first)

    def latency_feed(self) -> Feed:
        # a typical line (the first clean one), width >= 320
        return {"x": self.inputs[0]}

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        name = sess.get_inputs()[0].name
        hyps: list[str] = []
        raw: list[np.ndarray] = []
        for i, x in enumerate(self.inputs):
            probs = sess.run(None, {name: x})[0]
            hyps.append(normalize_text(ctc_decode(probs[0], self.chars)))
            if i < RAW_LINES:
                raw.append(probs)
        n = len(self.refs)
        half = n // 2
        metrics = {
            "cer": cer(self.refs, hyps),
            "exact": sum(r == h for r, h in zip(self.refs, hyps, strict=False)) / n,
            "cer_clean": cer(self.refs[:half], hyps[:half]),
            "cer_degraded": cer(self.refs[half:], hyps[half:]),
        }
        if self._orig is None:
            self._orig = hyps
        metrics["agree_clean"] = sum(a == b for a, b in zip(self._orig[:half], hyps[:half], strict=True)) / half
        metrics["agree_degraded"] = sum(
            a == b for a, b in zip(self._orig[half:], hyps[half:], strict=True)) / (n - half)
        return TaskOutput(metrics=metrics, decisions=hyps, raw=raw)


def use(model_path: Path, n_lines: int = 64, seed: int = CALIB_SEED) -> int:
    """Read ``n_lines`` lines of ``seed`` (half clean, half degraded) with the model as rapidocr does: one
    session, one line per call at its own width. The workload ``hatch-shrinkray record`` watches."""
    import onnxruntime as ort

    lines = build_lines(model_path, n_lines, seed)
    test = {t for t, _ in build_lines(model_path, 200, TEST_SEED)}
    assert not test & {t for t, _ in lines}, "calibration lines overlap the test lines"
    chars = load_charset(model_path)
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    for _, img in lines:
        ctc_decode(sess.run(None, {name: preprocess(img)})[0][0], chars)
    return len(lines)
