"""OCR detection: box F1 at IoU 0.5 and 0.7 on synthetic pages (DB post-processing, axis-aligned boxes).

Pages are 640x640, 5-10 text lines each in DejaVu fonts (half clean, half degraded); ground truth = each
line's box (ink extent +-0.08 em, the font's ascender-to-descender height). Preprocessing follows
rapidocr (BGR, ImageNet mean/std); post-processing is DB's: probability > 0.3, connected components,
mean-probability box score > 0.5, unclip ratio 1.6.
Agreement with the original = box F1 between the variant's and the original's boxes at IoU 0.8.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import CACHE_DIR, Feed, TaskOutput

PAGE = 640
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
RAW_PAGES = 4
TEST_SEED = 777
CALIB_SEED = 2024
Box = tuple[float, float, float, float]  # x0, y0, x1, y1


def _overlaps(b: Box, boxes: list[Box], margin: float) -> bool:
    return any(
        not (b[2] + margin < o[0] or o[2] + margin < b[0] or b[3] + margin < o[1] or o[3] + margin < b[1])
        for o in boxes
    )


def build_pages(n: int, seed: int) -> list[tuple[np.ndarray, list[Box]]]:
    cache = CACHE_DIR / "tasks" / f"ocr_det_{n}_{seed}.pkl"
    if cache.exists():
        with open(cache, "rb") as f:
            cached: list[tuple[np.ndarray, list[Box]]] = pickle.load(f)
        return cached
    from PIL import Image, ImageDraw, ImageFont

    from benchmarks.tasks.render import WORDS, degrade, font_paths

    rng = random.Random(seed)
    fonts = font_paths()
    pages: list[tuple[np.ndarray, list[Box]]] = []
    for i in range(n):
        bg = tuple(rng.randint(215, 255) for _ in range(3))
        img = Image.new("RGB", (PAGE, PAGE), bg)
        draw = ImageDraw.Draw(img)
        boxes: list[Box] = []
        for _ in range(rng.randint(5, 10)):
            for _attempt in range(30):
                size = rng.randint(16, 36)
                font = ImageFont.truetype(str(rng.choice(fonts)), size)
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
                left, _, right, _ = font.getbbox(text)
                # ground truth = annotation-style line box: ink extent +-0.08 em horizontally, the font's
                # full ascender-to-descender height vertically (independent of which letters occur)
                _, line_top, _, line_bottom = font.getbbox("ÁÉgjpqy|")
                w = right - left
                if w >= PAGE - 60:
                    continue
                x = rng.randint(25, PAGE - 25 - w)
                y = rng.randint(15, PAGE - 15 - (line_bottom - line_top))
                pad = 0.08 * size
                box = (x - pad, float(y), x + w + pad, float(y + line_bottom - line_top))
                if _overlaps(box, boxes, margin=(line_bottom - line_top) * 0.6):
                    continue
                fg = tuple(rng.randint(0, 90) for _ in range(3))
                draw.text((x - left, y - line_top), text, font=font, fill=fg)
                boxes.append(box)
                break
        if i >= n // 2:
            img = degrade(img, rng)
        pages.append((np.asarray(img), boxes))
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache, "wb") as f:
        pickle.dump(pages, f)
    return pages


def preprocess(img_rgb: np.ndarray) -> np.ndarray:
    a = img_rgb[:, :, ::-1].astype(np.float32) / 255.0
    a = (a - MEAN) / STD
    return np.ascontiguousarray(a.transpose(2, 0, 1)[None])


def db_boxes(prob: np.ndarray, thresh: float = 0.3, box_thresh: float = 0.5, unclip: float = 1.6) -> list[Box]:
    from scipy import ndimage

    lab, n = ndimage.label(prob > thresh)
    out: list[Box] = []
    if n == 0:
        return out
    for i, sl in enumerate(ndimage.find_objects(lab), start=1):
        if sl is None:
            continue
        ys, xs = sl
        h, w = ys.stop - ys.start, xs.stop - xs.start
        if min(h, w) < 3:
            continue
        region = lab[sl] == i
        if float(prob[sl][region].mean()) < box_thresh:
            continue
        d = w * h * unclip / (2 * (w + h))
        out.append((max(0.0, xs.start - d), max(0.0, ys.start - d), min(prob.shape[1], xs.stop + d),
                    min(prob.shape[0], ys.stop + d)))
    return out


def iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match_counts(gt: list[Box], pred: list[Box], thr: float) -> tuple[int, int, int]:
    """(tp, fp, fn) with greedy one-to-one matching by descending IoU."""
    pairs = sorted(((iou(g, p), gi, pi) for gi, g in enumerate(gt) for pi, p in enumerate(pred)), reverse=True)
    used_g: set[int] = set()
    used_p: set[int] = set()
    tp = 0
    for v, gi, pi in pairs:
        if v < thr:
            break
        if gi in used_g or pi in used_p:
            continue
        used_g.add(gi)
        used_p.add(pi)
        tp += 1
    return tp, len(pred) - tp, len(gt) - tp


def f1_boxes(gts: list[list[Box]], preds: list[list[Box]], thr: float) -> float:
    tp = fp = fn = 0
    for g, p in zip(gts, preds, strict=True):
        a, b, c = match_counts(g, p, thr)
        tp, fp, fn = tp + a, fp + b, fn + c
    return 2 * tp / max(1, 2 * tp + fp + fn)


class OcrDetTask:
    def __init__(self, n_pages: int = 30, seed: int = TEST_SEED) -> None:
        self.pages = build_pages(n_pages, seed)
        self.inputs = [preprocess(img) for img, _ in self.pages]
        self.gts = [boxes for _, boxes in self.pages]

    def latency_feed(self) -> Feed:
        return {"x": self.inputs[0]}

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        name = sess.get_inputs()[0].name
        preds: list[list[Box]] = []
        raw: list[np.ndarray] = []
        for i, x in enumerate(self.inputs):
            prob = sess.run(None, {name: x})[0][0, 0]
            preds.append(db_boxes(prob))
            if i < RAW_PAGES:
                raw.append(prob)
        half = len(self.gts) // 2
        metrics = {
            "f1_iou50": f1_boxes(self.gts, preds, 0.5),
            "f1_iou70": f1_boxes(self.gts, preds, 0.7),
            "f1_iou70_clean": f1_boxes(self.gts[:half], preds[:half], 0.7),
            "f1_iou70_degraded": f1_boxes(self.gts[half:], preds[half:], 0.7),
        }
        return TaskOutput(metrics=metrics, decisions=preds, raw=raw)

    @staticmethod
    def agreement(ref: TaskOutput, new: TaskOutput) -> float:
        return f1_boxes(ref.decisions, new.decisions, 0.8)


def use(model_path: Path, n_pages: int = 16, seed: int = CALIB_SEED) -> int:
    """Find the text lines of ``n_pages`` rendered pages of ``seed`` (half clean, half degraded; not the
    test pages' seed) with the task's own pipeline, one page per call: the workload ``hatch-shrinkray
    record`` watches."""
    import onnxruntime as ort

    assert seed != TEST_SEED, "calibration pages would be the test pages"
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    pages = build_pages(n_pages, seed)
    for img, _ in pages:
        db_boxes(sess.run(None, {name: preprocess(img)})[0][0, 0])
    return len(pages)
