"""Magika's fitting and held-out data for the rate-aware encodings (``benchmarks/rate.py``).

Three disjoint sets of real files of this machine (``tasks/magika_task.collect_files``):

* **fit**: ``magika_task.calibration_files()``, 4 per label, the files ``record_task`` records;
  the encodings are fitted on these (the moments ``H``), in feeds of 4 files as recorded;
* **tune**: up to 20 per label (seed 555), disjoint from fit and from the task's test files;
  the operating point of each encoding is chosen here;
* **held-out**: up to 40 per label (seed 777), disjoint from all of the above; only reported.

Each file goes through Magika's own feature extraction once (the original model's pipeline); files
that Magika answers without its model (empty, tiny) are left out: no encoding changes them. The
features and the original's scores are cached under ``benchmarks/.cache/rate``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import CACHE_DIR
from benchmarks.tasks import magika_task

RATE_DIR = CACHE_DIR / "rate"
TUNE = (20, 555)
HELD_OUT = (40, 777)


@dataclass(frozen=True)
class FileSet:
    name: str
    x: np.ndarray
    """``[files, features]`` int32: what Magika feeds its model."""
    paths: list[str]


def _magika(model_path: Path, tmp: Path) -> Any:
    magika = magika_task._import_magika()
    root = corpus.extract_wheel(corpus.BY_KEY["magika"])
    shutil.copy(root / "magika" / "models" / "standard_v3_3" / "config.min.json", tmp / "config.min.json")
    os.symlink(model_path, tmp / "model.onnx")
    return magika.Magika(model_dir=tmp)


class Labeller:
    """Magika's own post-processing (overwrite map, per-label thresholds) of raw scores."""

    def __init__(self) -> None:
        self._tmp = tempfile.mkdtemp(prefix="rate-magika-")
        self.m = _magika(corpus.model_path("magika"), Path(self._tmp))

    def labels(self, scores: np.ndarray) -> tuple[list[str], list[str]]:
        """(model labels, output labels) per file."""
        space = self.m._target_labels_space
        top = scores.argmax(axis=1)
        dl = [str(space[i]) for i in top]
        out = [str(self.m._get_output_label_from_dl_label_and_score(space[i], float(scores[k, i]))[0])
               for k, i in enumerate(top)]
        return dl, out


def _features(paths: list[Path]) -> tuple[np.ndarray, list[str]]:
    with tempfile.TemporaryDirectory() as td:
        m = _magika(corpus.model_path("magika"), Path(td))
        cfg = m._model_config
        rows, kept = [], []
        for p in paths:
            out, fs = m._get_result_or_features_from_path(p)
            if out is not None or fs is None:
                continue
            sample: list[int] = []
            if cfg.beg_size > 0:
                sample.extend(fs.beg[: cfg.beg_size])
            if cfg.mid_size > 0:
                sample.extend(fs.mid[: cfg.mid_size])
            if cfg.end_size > 0:
                sample.extend(fs.end[-cfg.end_size:])
            rows.append(sample)
            kept.append(str(p))
    return np.asarray(rows, dtype=np.int32), kept


def file_sets() -> dict[str, FileSet]:
    """The fit, tune and held-out sets (cached)."""
    RATE_DIR.mkdir(parents=True, exist_ok=True)
    cache = RATE_DIR / "magika_sets.npz"
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        names = json.loads(str(z["names"]))
        return {n: FileSet(n, z[f"x_{n}"], list(names[n])) for n in ("fit", "tune", "held_out")}
    fit = [str(p) for p in magika_task.calibration_files()]
    test = {p for p, _ in magika_task.collect_files(magika_task.TEST_PER_LABEL, magika_task.TEST_SEED)}
    seen = set(fit) | test
    chosen: dict[str, list[str]] = {"fit": fit}
    for name, (per_label, seed) in (("tune", TUNE), ("held_out", HELD_OUT)):
        picked = [p for p, _ in magika_task.collect_files(per_label, seed) if p not in seen]
        seen |= set(picked)
        chosen[name] = picked
    sets, arrays, names = {}, {}, {}
    for name, paths in chosen.items():
        x, kept = _features([Path(p) for p in paths])
        sets[name] = FileSet(name, x, kept)
        arrays[f"x_{name}"] = x
        names[name] = kept
    np.savez(cache, names=json.dumps(names), **arrays)
    return sets


def fit_feeds(sets: dict[str, FileSet], per_call: int = 4) -> list[dict[str, np.ndarray]]:
    """The fit set as the recording feeds it: ``per_call`` files per call."""
    x = sets["fit"].x
    return [{"bytes": x[i:i + per_call]} for i in range(0, len(x), per_call)]


if __name__ == "__main__":
    for s in file_sets().values():
        print(s.name, s.x.shape, len({Path(p).suffix for p in s.paths}), "suffixes")
