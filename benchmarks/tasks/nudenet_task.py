"""NudeNet (YOLOv8n 320): detection agreement with the original on real photos of this machine.

No labelled data can be fetched offline, so the task metric is agreement: detections (score >= 0.2,
class-wise NMS at IoU 0.45) of each variant vs the original's, F1 at IoU 0.5 with equal class.
Images: the photos shipped in matplotlib's and scikit-learn's sample data, plus seeded random crops,
flips and rescales of them (the model mostly fires its FACE_* / FEET / ARMPITS classes on them).
Preprocessing: RGB, letterbox to 320x320 (grey 114), pixel/255.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from benchmarks.common import Feed, TaskOutput
from benchmarks.tasks.ocr_det import iou

SIZE = 320
CONF = 0.2
Det = tuple[int, float, tuple[float, float, float, float]]  # class, score, box


def _photo_paths() -> list[Path]:
    import matplotlib
    import sklearn

    cands = [
        Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg",
        Path(sklearn.__file__).parent / "datasets" / "images" / "china.jpg",
        Path(sklearn.__file__).parent / "datasets" / "images" / "flower.jpg",
    ]
    return [p for p in cands if p.exists()]


def build_images(n: int, seed: int) -> list[np.ndarray]:
    rng = random.Random(seed)
    photos = [Image.open(p).convert("RGB") for p in _photo_paths()]
    out = [np.asarray(p) for p in photos]
    while len(out) < n:
        im = rng.choice(photos)
        w, h = im.size
        f = rng.uniform(0.35, 0.9)
        cw, ch = int(w * f), int(h * rng.uniform(0.35, 0.9))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = im.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            crop = ImageOps.mirror(crop)
        out.append(np.asarray(crop))
    return out[:n]


def letterbox(img: np.ndarray) -> tuple[np.ndarray, float]:
    h, w = img.shape[:2]
    r = SIZE / max(h, w)
    nw, nh = round(w * r), round(h * r)
    im = Image.fromarray(img).resize((nw, nh), Image.Resampling.BILINEAR)
    canvas = Image.new("RGB", (SIZE, SIZE), (114, 114, 114))
    canvas.paste(im, ((SIZE - nw) // 2, (SIZE - nh) // 2))
    x = np.asarray(canvas, dtype=np.float32).transpose(2, 0, 1)[None] / 255.0
    return np.ascontiguousarray(x), r


def postprocess(out: np.ndarray) -> list[Det]:
    p = out[0].T  # [anchors, 4 + classes]
    scores = p[:, 4:]
    cls = scores.argmax(axis=1)
    conf = scores.max(axis=1)
    keep = conf >= CONF
    dets: list[Det] = []
    for c in np.unique(cls[keep]):
        idx = np.flatnonzero(keep & (cls == c))
        idx = idx[np.argsort(-conf[idx])]
        boxes = [(float(p[i, 0] - p[i, 2] / 2), float(p[i, 1] - p[i, 3] / 2), float(p[i, 0] + p[i, 2] / 2),
                  float(p[i, 1] + p[i, 3] / 2)) for i in idx]
        chosen: list[int] = []
        for k in range(len(idx)):
            if all(iou(boxes[k], boxes[j]) < 0.45 for j in chosen):
                chosen.append(k)
        dets += [(int(c), float(conf[idx[k]]), boxes[k]) for k in chosen]
    return dets


def det_f1(ref: list[list[Det]], new: list[list[Det]], thr: float = 0.5) -> float:
    tp = fp = fn = 0
    for r, n in zip(ref, new, strict=True):
        used: set[int] = set()
        for c, _, b in r:
            best, bi = 0.0, -1
            for j, (c2, _, b2) in enumerate(n):
                if c2 == c and j not in used:
                    v = iou(b, b2)
                    if v > best:
                        best, bi = v, j
            if best >= thr:
                used.add(bi)
                tp += 1
            else:
                fn += 1
        fp += len(n) - len(used)
    return 2 * tp / max(1, 2 * tp + fp + fn) if (tp + fp + fn) else 1.0


class NudeNetTask:
    def __init__(self, n_images: int = 40, seed: int = 5) -> None:
        self.images = build_images(n_images, seed)
        self.inputs = [letterbox(im)[0] for im in self.images]
        self._ref: list[list[Det]] | None = None

    def latency_feed(self) -> Feed:
        return {"images": self.inputs[0]}

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        dets: list[list[Det]] = []
        raw: list[np.ndarray] = []
        for x in self.inputs:
            out = sess.run(None, {"images": x})[0]
            dets.append(postprocess(out))
            raw.append(out)
        if self._ref is None:
            self._ref = dets  # the first run is the original model's
        metrics = {
            "det_f1_vs_original": det_f1(self._ref, dets),
            "detections": float(sum(len(d) for d in dets)),
        }
        return TaskOutput(metrics=metrics, decisions=dets, raw=raw)

    @staticmethod
    def agreement(ref: TaskOutput, new: TaskOutput) -> float:
        return det_f1(ref.decisions, new.decisions)
