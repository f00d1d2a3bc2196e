"""Magika: content-type accuracy on real files of this machine, through Magika's own Python pipeline.

Files are collected (seeded) from system and site-packages directories; the expected label comes from
the file extension (or the ELF magic for extension-less binaries) via ``EXT_LABELS``; at most
``per_label`` files per label. The model is swapped by giving ``Magika(model_dir=...)`` a directory with
the variant's ``model.onnx`` next to the wheel's ``config.min.json``. Raw model outputs are recorded by
wrapping Magika's own onnxruntime session.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import CACHE_DIR, Feed, TaskOutput

EXT_LABELS = {
    ".py": "python", ".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".hpp": "cpp", ".sh": "shell",
    ".json": "json", ".xml": "xml", ".html": "html", ".htm": "html", ".css": "css", ".js": "javascript",
    ".png": "png", ".gif": "gif", ".jpg": "jpeg", ".jpeg": "jpeg", ".svg": "svg", ".gz": "gzip",
    ".zip": "zip", ".whl": "zip", ".pdf": "pdf", ".ttf": "ttf", ".md": "markdown", ".rst": "rst",
    ".pl": "perl", ".pm": "perl", ".rb": "ruby", ".go": "go", ".rs": "rust", ".java": "java",
    ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".ini": "ini", ".csv": "csv", ".so": "elf",
    ".txt": "txt", ".pyi": "python", ".tex": "latex", ".lua": "lua", ".bz2": "bzip", ".xz": "xz",
    ".tar": "tar", ".ico": "ico", ".bmp": "bmp", ".sql": "sql", ".ts": "typescript", ".php": "php",
    ".mk": "makefile", ".cmake": "cmake", ".el": "lisp", ".tcl": "tcl", ".awk": "awk", ".diff": "diff",
    ".patch": "diff", ".ps1": "powershell", ".bat": "batch", ".wasm": "wasm", ".jar": "jar",
}
SEARCH_DIRS = [
    "/usr/lib/python3", "/usr/lib/python3.11", "/usr/include", "/usr/share/doc", "/usr/share/perl5",
    "/usr/share/perl", "/usr/share/fonts", "/usr/share/icons", "/usr/share/pixmaps", "/usr/share/man",
    "/usr/share/vim", "/usr/share/javascript", "/usr/share/mime", "/usr/share/zoneinfo", "/usr/bin", "/etc",
    "/usr/lib/x86_64-linux-gnu", "/usr/local/lib", "/usr/share/espeak-ng-data", "/usr/share/ca-certificates",
    sys.prefix, str(Path.home() / ".cache" / "hatch-shrinkray-bench" / "wheels"),
]
MAX_SCAN = 200_000


def _label_for(p: Path) -> str | None:
    suf = p.suffix.lower()
    if suf in EXT_LABELS:
        return EXT_LABELS[suf]
    if suf == "" and os.access(p, os.X_OK):
        try:
            with open(p, "rb") as f:
                head = f.read(4)
        except OSError:
            return None
        if head == b"\x7fELF":
            return "elf"
    return None


def collect_files(per_label: int, seed: int) -> list[tuple[str, str]]:
    """[(path, expected label)], cached (the list, not the files: they are read live)."""
    cache = CACHE_DIR / "tasks" / f"magika_files_{per_label}_{seed}.json"
    if cache.exists():
        items: list[tuple[str, str]] = [tuple(x) for x in json.loads(cache.read_text())]  # type: ignore[misc]
        if all(Path(p).exists() for p, _ in items):
            return items
    by_label: dict[str, list[str]] = {}
    scanned = 0
    for d in SEARCH_DIRS:
        if not Path(d).is_dir():
            continue
        for root, dirs, files in os.walk(d):
            dirs.sort()
            for name in sorted(files):
                p = Path(root) / name
                scanned += 1
                if scanned > MAX_SCAN:
                    break
                if p.is_symlink() or not p.is_file():
                    continue
                try:
                    size = p.stat().st_size
                except OSError:
                    continue
                if size < 64 or size > 50_000_000:
                    continue
                lab = _label_for(p)
                if lab is not None:
                    by_label.setdefault(lab, []).append(str(p))
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for lab in sorted(by_label):
        paths = sorted(set(by_label[lab]))
        rng.shuffle(paths)
        out += [(p, lab) for p in paths[:per_label]]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(out))
    return out


def _import_magika() -> Any:
    root = corpus.extract_wheel(corpus.BY_KEY["magika"])
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import magika

    return magika


class _Recorder:
    """Wraps Magika's InferenceSession, keeping every raw output."""

    def __init__(self, sess: Any) -> None:
        self.sess = sess
        self.outputs: list[np.ndarray] = []
        self.inputs: list[Any] = []

    def run(self, names: Any, feed: dict[str, Any], *a: Any, **k: Any) -> list[Any]:
        res = self.sess.run(names, feed, *a, **k)
        self.outputs.append(np.asarray(res[0]))
        self.inputs.append(feed)
        return list(res)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sess, name)


class MagikaTask:
    def __init__(self, per_label: int = 15, seed: int = 99) -> None:
        self.files = collect_files(per_label, seed)
        self.paths = [Path(p) for p, _ in self.files]
        self.labels = [lab for _, lab in self.files]
        root = corpus.extract_wheel(corpus.BY_KEY["magika"])
        self.config = root / "magika" / "models" / "standard_v3_3" / "config.min.json"
        self._feed: Feed | None = None

    def _magika_for(self, model_path: Path, tmp: Path) -> Any:
        magika = _import_magika()
        shutil.copy(self.config, tmp / "config.min.json")
        os.symlink(model_path, tmp / "model.onnx")
        return magika.Magika(model_dir=tmp)

    def latency_feed(self) -> Feed:
        if self._feed is None:
            raise RuntimeError("run() the original first")
        return self._feed

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        if path is None:
            raise ValueError("MagikaTask needs the model path (it runs Magika's own pipeline)")
        with tempfile.TemporaryDirectory() as td:
            m = self._magika_for(path, Path(td))
            rec = _Recorder(m._onnx_session)
            m._onnx_session = rec
            results = m.identify_paths(self.paths)
        outs = [str(r.output.label) if r.ok else "error" for r in results]
        dls = [str(r.prediction.dl.label) if r.ok else "error" for r in results]
        n = len(self.labels)
        metrics = {
            "accuracy": sum(o == e for o, e in zip(outs, self.labels, strict=True)) / n,
            "dl_accuracy": sum(o == e for o, e in zip(dls, self.labels, strict=True)) / n,
            "n_files": float(n),
            "n_labels": float(len(set(self.labels))),
        }
        raw = rec.outputs
        if self._feed is None and rec.inputs:
            b = np.asarray(rec.inputs[0]["bytes"], dtype=np.int32)
            self._feed = {"bytes": b[:1].copy()}
        return TaskOutput(metrics=metrics, decisions=dls, raw=raw)


TEST_PER_LABEL, TEST_SEED = 15, 99
"""``MagikaTask``'s defaults: its files are never calibration files."""


def calibration_files(seed: int = 2024, per_label: int = 4) -> list[Path]:
    """Up to ``per_label`` files per label that are not in the task's file list, label by label in turn."""
    test = {p for p, _ in collect_files(TEST_PER_LABEL, TEST_SEED)}
    by_label: dict[str, list[str]] = {}
    for p, lab in collect_files(40, seed):
        if p not in test:
            by_label.setdefault(lab, []).append(p)
    return [Path(p) for k in range(per_label) for lab in sorted(by_label) for p in by_label[lab][k:k + 1]]


def use(model_path: Path, batch: int = 4) -> int:
    """Identify the calibration files with Magika's own pipeline, ``batch`` files per call (as
    ``magika`` does for a list of paths), with ``model_path`` as its model: the workload
    ``hatch-shrinkray record`` watches."""
    files = calibration_files()
    root = corpus.extract_wheel(corpus.BY_KEY["magika"])
    with tempfile.TemporaryDirectory() as td:
        shutil.copy(root / "magika" / "models" / "standard_v3_3" / "config.min.json", Path(td) / "config.min.json")
        os.symlink(model_path, Path(td) / "model.onnx")
        m = _import_magika().Magika(model_dir=Path(td))
        for i in range(0, len(files), batch):
            m.identify_paths(files[i:i + batch])
    return len(files)
