"""Shared helpers of the benchmark harness: sizes, sessions, latency, output comparison, caching, and
the command line of the drivers that measure, then report."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
OUT_DIR = BENCH_DIR / "out"

Feed = dict[str, np.ndarray]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- compressed sizes

COMPRESSORS = ("gzip9", "brotli9", "brotli11", "zstd19")
FAST_COMPRESSORS = ("gzip9", "brotli9", "zstd19")  # brotli-11 is slow: only where a driver asks for it


def _compress_size(data: bytes, algo: str) -> int:
    if algo == "gzip9":
        return len(gzip.compress(data, compresslevel=9, mtime=0))
    if algo in ("brotli11", "brotli9"):
        import brotli

        return len(brotli.compress(data, quality=11 if algo == "brotli11" else 9, lgwin=24))
    if algo == "zstd19":
        import zstandard

        return len(zstandard.ZstdCompressor(level=19).compress(data))
    raise ValueError(algo)


class SizeCache:
    """Compressed sizes keyed by (sha256 of the file, compressor): brotli-11 runs at ~0.2 MB/s."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or CACHE_DIR / "sizes.json"
        self.data: dict[str, dict[str, int]] = {}
        if self.path.exists():
            self.data = json.loads(self.path.read_text())

    def _reload_merge(self) -> None:
        # Another process (e.g. a background brotli filler) may have written entries meanwhile.
        if self.path.exists():
            for k, v in json.loads(self.path.read_text()).items():
                self.data.setdefault(k, {}).update(v)

    def save(self) -> None:
        self._reload_merge()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=0, sort_keys=True))
        tmp.replace(self.path)

    def get(self, sha: str, algo: str) -> int | None:
        return self.data.get(sha, {}).get(algo)

    def sizes(self, path: Path, algos: Sequence[str] = COMPRESSORS, compute: bool = True) -> dict[str, int | None]:
        sha = sha256_file(path)
        out: dict[str, int | None] = {"raw": path.stat().st_size}
        data: bytes | None = None
        dirty = False
        for algo in algos:
            val = self.get(sha, algo)
            if val is None and compute:
                if data is None:
                    data = path.read_bytes()
                val = _compress_size(data, algo)
                self.data.setdefault(sha, {})[algo] = val
                dirty = True
            out[algo] = val
        if dirty:
            self.save()
        return out


# ---------------------------------------------------------------- sessions / latency


def make_session(path: Path | str, threads: int = 1, level: str = "all") -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


def try_session(path: Path | str, threads: int = 1) -> tuple[Any | None, str | None]:
    """(session, None) or (None, one-line error) - shrunk models from peers may not load."""
    try:
        return make_session(path, threads), None
    except Exception as exc:
        msg = " ".join(str(exc).split())
        return None, msg[:300]


@dataclass
class LatencyResult:
    ratio: float  # median over interleaved pairs of thread-CPU time per inference, variant / base
    base_ms: float
    variant_ms: float
    runs: int
    wall_ratio: float = float("nan")  # the same with wall-clock time (sensitive to other load on the machine)


def interleaved_latency(
    sess_a: Any, sess_b: Any, feed: Feed, *, budget_s: float = 4.0, min_runs: int = 7, max_runs: int = 200
) -> LatencyResult:
    """Median per-inference latency of B / A, runs alternating A, B in one process (warm-up excluded).

    With ``intra_op_num_threads=1`` onnxruntime computes on the calling thread, so the calling thread's
    CPU time (``time.thread_time``) is the inference cost, unaffected by other processes competing
    for the cores; the wall-clock ratio is kept too.
    """
    for _ in range(2):
        sess_a.run(None, feed)
        sess_b.run(None, feed)
    # tiny models (silero: ~0.2 ms per call): time blocks of calls so each sample lasts >= ~5 ms
    t0 = time.thread_time()
    sess_a.run(None, feed)
    one = max(time.thread_time() - t0, 1e-6)
    inner = max(1, min(200, int(0.005 / one)))
    ca: list[float] = []
    cb: list[float] = []
    wa: list[float] = []
    wb: list[float] = []
    start = time.perf_counter()
    i = 0
    while i < max_runs and (i < min_runs or time.perf_counter() - start < budget_s):
        order = (sess_a, sess_b) if i % 2 == 0 else (sess_b, sess_a)
        for s in order:
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(inner):
                s.run(None, feed)
            c1, t1 = time.thread_time(), time.perf_counter()
            (ca if s is sess_a else cb).append((c1 - c0) / inner)
            (wa if s is sess_a else wb).append((t1 - t0) / inner)
        i += 1
    ma, mb = statistics.median(ca), statistics.median(cb)
    # median of per-pair ratios: the two runs of a pair are adjacent in time and see the same contention
    # (the 2 vCPUs may be hyperthreads of one core, so even thread CPU time depends on the neighbour's load)
    pair_ratio = statistics.median(b / a for a, b in zip(ca, cb, strict=True) if a > 0)
    wall_ratio = statistics.median(b / a for a, b in zip(wa, wb, strict=True) if a > 0)
    return LatencyResult(ratio=pair_ratio, base_ms=ma * 1e3, variant_ms=mb * 1e3, runs=i, wall_ratio=wall_ratio)


def interleaved_session_creation(path_a: Path, path_b: Path, reps: int = 5) -> tuple[float, float, float]:
    """(ratio B/A, median seconds A, median seconds B) of InferenceSession creation, alternating.

    Thread-CPU time of the creating thread (graph loading, optimization and constant folding run there).
    """
    ta: list[float] = []
    tb: list[float] = []
    for i in range(reps):
        for p, acc in ((path_a, ta), (path_b, tb)) if i % 2 == 0 else ((path_b, tb), (path_a, ta)):
            c0 = time.thread_time()
            make_session(p)
            acc.append(time.thread_time() - c0)
    ma, mb = statistics.median(ta), statistics.median(tb)
    return mb / ma, ma, mb


# ---------------------------------------------------------------- output comparison


@dataclass
class OutputDiff:
    cosine: float
    rel_l2: float


def output_diff(ref: Sequence[np.ndarray], new: Sequence[np.ndarray]) -> OutputDiff:
    """Cosine similarity and relative L2 error of all float outputs, flattened and concatenated."""
    a = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in ref]) if ref else np.zeros(1)
    b = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in new]) if new else np.zeros(1)
    if a.shape != b.shape:
        return OutputDiff(cosine=float("nan"), rel_l2=float("nan"))
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if not (np.isfinite(na) and np.isfinite(nb)):
        return OutputDiff(cosine=float("nan"), rel_l2=float("nan"))
    cos = float(a @ b / (na * nb)) if na > 0 and nb > 0 else float(na == nb)
    rel = float(np.linalg.norm(a - b) / na) if na > 0 else float(nb)
    return OutputDiff(cosine=cos, rel_l2=rel)


def agreement(ref: Sequence[Any], new: Sequence[Any]) -> float:
    """Fraction of discrete decisions (lines, labels, frames) identical to the original's."""
    if len(ref) != len(new) or not ref:
        return float("nan")
    return sum(1 for x, y in zip(ref, new, strict=False) if x == y) / len(ref)


# ---------------------------------------------------------------- task interface


@dataclass
class TaskOutput:
    """What a task returns for one model: its metrics, discrete decisions and raw float outputs."""

    metrics: dict[str, float]
    decisions: list[Any] = field(default_factory=list)
    raw: list[np.ndarray] = field(default_factory=list)


TaskFn = Callable[[Any], TaskOutput]


def json_default(o: object) -> object:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(type(o))


def run_report_parser(doc: str | None) -> tuple[argparse.ArgumentParser, Any]:
    """The command line of a driver that measures (``run [--only NAME ...]``, its results cached) and
    prints its table (``report``), described by the first line of its docstring ``doc``; more
    commands go on the returned subparsers."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("--only", nargs="*")
    sub.add_parser("report")
    return ap, sub


# ---------------------------------------------------------------- hand-written notes

def _commit(engine: str) -> str:
    return engine.removeprefix("git:").removesuffix("-dirty")[:12]


def engine_notes(notes: str, written_for: Sequence[str], engines: Sequence[str], report: str) -> str:
    """A driver's hand-written notes, only where every result of the report comes from an engine they were
    written for (commits compared on their common prefix, at least 7 hex digits); otherwise a paragraph saying
    they were left out and where they are. A verdict written about one engine's figures reads as true of
    whatever a later run prints beside it, so a regenerated report never carries another engine's words."""
    mine = sorted({_commit(e) for e in written_for})
    now = sorted({_commit(e) for e in engines})

    def same(a: str, b: str) -> bool:
        n = min(len(a), len(b))
        return n >= 7 and a[:n] == b[:n]

    if now and all(any(same(e, m) for m in mine) for e in now):
        return notes
    return (f"## Notes\n\nThe hand-written notes of this report were written for engine {', '.join(mine)}; "
            f"these results come from {', '.join(now) or 'no engine'}, so they are left out "
            f"(`git log -p -- benchmarks/{report}` shows them beside the figures they were written about).\n")
