"""Size vs. agreement curves per corpus model: ours (int8, fp16, int8-gptq, ``auto`` over a budget sweep)
against the predecessor onnx-shrink-ray 0.0.11 (integer modes and its float-levels curve).

    HSR_BENCH_ENGINE=<rev> python -m benchmarks.curves [MODEL ...] [--report-only]

-> ``benchmarks/CURVES.md`` and ``benchmarks/curves.png``.

Each point: raw size ratio (shrunk file / original file), gzip-9 ratio, agreement with the original
on the task's own test data (share of identical answers, as the retired ``auto_bench.py`` counted them; NudeNet: the
task's detection F1 vs the original, see ``AGREEMENT``) and the primary task metric's delta.

Our engine is imported from a ``git archive`` snapshot of ``HSR_BENCH_ENGINE`` (``variants.engine_dir``),
put first on ``sys.path`` below, before anything imports ``hatch_shrinkray``. Per-point results are
cached in ``.cache/curves/<engine sha12>/<model>.json`` (ours) and ``.cache/curves/peer/<model>.json``
(the predecessor, independent of our engine), so a rerun with a new engine commit recomputes only ours.

``auto``: one ``Auto().analyse`` per model on the calibration inputs (``curve_calib.py``: a recording
of the task's own pipeline, or an ``.npz``; disjoint from the test data; the feeds the engine fits
on, i.e. all but the held-out quarter), then ``Auto().finish`` per budget, as the retired ``auto_bench.py``
did (``AUTO.md``). The budget
swept is ``budget_agreement`` (rel-L2 at verification's limit 0.1, cosine off) when the engine has a decision
measure for one of the model's outputs (argmax of class scores / ``> 0.5`` of a probability), else
``budget_rel_l2`` (agreement off): for the detectors' probability maps, NudeNet's box tensor and
Nakdimon's score tensors the engine measures no decisions, so an agreement budget would not constrain
anything; nor for MiniLM's unit-length embedding.
Shrunk files go to ``.cache/curves/<engine sha12>/<model>/`` and ``.cache/curves/peer/<model>/``
(the predecessor's files made by ``run.py`` from the same input are reused, read-only).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CACHE_DIR, SizeCache, json_default, sha256_file, try_session
from benchmarks.corpus import MODEL_DIR
from benchmarks.variants import ENGINE_REV, REPO_DIR, SHRUNK_DIR, engine_dir, ensure_peer_venv

ENGINE_DIR = engine_dir()
if ENGINE_DIR is not None:  # the snapshot first, before anything imports hatch_shrinkray
    sys.path.insert(0, str(ENGINE_DIR))

BENCH_DIR = Path(__file__).resolve().parent
CURVES = CACHE_DIR / "curves"
PEER_CACHE = CURVES / "peer"
MODELS = ["ppocrv6_rec", "ppocrv4_rec", "silero_vad", "ppocrv6_det", "ppocrv4_det", "magika", "minilm",
          "nudenet", "nakdimon"]
MIN_ELEMENTS = {"ppocrv4_rec": 4096}  # AUTO.md: at 16384, 7.5% of this file stays float32 whatever we do
DEFAULT_MIN_ELEMENTS = 16384
AGREEMENT_BUDGETS = (0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999, 0.99999)
REL_L2_BUDGETS = (0.05, 0.03, 0.02, 0.01, 0.005, 0.0025, 0.001)
PEER_LEVELS = (16, 64, 256, 1024, 4096)
PEER_VARIANTS: list[tuple[str, tuple[str, ...]]] = [
    ("peer-default", ("--action", "integer_weights")),
    ("peer-per-channel", ("--action", "integer_weights", "--per-channel")),
    *[(f"peer-float{n}", ("--action", "float_weights", "--float_levels", str(n))) for n in PEER_LEVELS],
]
AGREEMENT = {"nudenet": "task"}  # else "identical"
AGREEMENT_TEXT = {
    "identical": "share of test answers identical to the original's",
    "task": "detection F1 vs the original's detections (IoU 0.5, same class): exact equality of float "
            "scores/boxes is meaningless here",
}
SCHEMA = 1
LOG = logging.getLogger("curves")


def engine_sha() -> str:
    if ENGINE_DIR is not None:
        return ENGINE_DIR.name
    return "worktree"


def task_spec(key: str) -> Any:
    from benchmarks.task_specs import TASKS

    return TASKS[key]


# ---------------------------------------------------------------- evaluation


class Evaluator:
    """The task on its test data and the original's answers, built on first use."""

    def __init__(self, key: str, src: Path) -> None:
        self.key, self.src = key, src
        self._task: Any = None
        self._ref: Any = None

    def ref(self) -> Any:
        if self._task is None:
            spec = task_spec(self.key)
            self._task = spec.build(self.src, False)
            sess, err = try_session(self.src, threads=2)
            assert sess is not None, err
            self._ref = self._task.run(sess, self.src)  # first run = the original (NudeNet/Nakdimon keep it)
        return self._ref

    def evaluate(self, path: Path) -> dict[str, Any]:
        ref = self.ref()
        sess, err = try_session(path, threads=2)
        if sess is None:
            return {"status": "does not load", "error": err}
        try:
            out = self._task.run(sess, path)
        except Exception as exc:
            return {"status": "run failed", "error": " ".join(str(exc).split())[:300]}
        spec = task_spec(self.key)
        row: dict[str, Any] = {"status": "ok"}
        row["identical"] = float(np.mean([a == b for a, b in zip(ref.decisions, out.decisions, strict=True)]))
        agree_fn = getattr(self._task, "agreement", None)
        if agree_fn is not None:
            row["task_agreement"] = float(agree_fn(ref, out))
        row["agreement"] = row["task_agreement"] if AGREEMENT.get(self.key) == "task" else row["identical"]
        row["metrics"] = {k: float(v) for k, v in out.metrics.items()}
        row["primary"] = spec.primary
        row["d_primary"] = float(out.metrics[spec.primary] - ref.metrics[spec.primary])
        return row


def sizes_of(path: Path, src: Path, sizes: SizeCache) -> dict[str, float]:
    s = sizes.sizes(path, algos=("gzip9",))
    o = sizes.sizes(src, algos=("gzip9",))
    return {"raw_bytes": path.stat().st_size, "raw_ratio": path.stat().st_size / src.stat().st_size,
            "gzip_ratio": float(s["gzip9"] or 0) / float(o["gzip9"] or 1)}


# ---------------------------------------------------------------- ours


def _kinds(recs: Any) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for t in recs:
        k = t.encoding.split(" ")[0]
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def decision_outputs(src: Path, feeds: list[dict[str, np.ndarray]]) -> list[str]:
    """Outputs for which the engine's budget measures decisions (top-1 of class scores, else
    ``> 0.5`` of a probability: ``compare.expect``) on the calibration feeds."""
    from hatch_shrinkray.bench import expect

    sess, err = try_session(src, threads=2)
    assert sess is not None, err
    outs = [sess.run(None, f) for f in feeds]
    names = [o.name for o in sess.get_outputs()]
    return [name for i, name in enumerate(names) if expect([o[i] for o in outs]).kind in ("top-1", "decision")]


def ours_points(key: str, src: Path, calib: Path, *, min_elements: int, param: str, budgets: tuple[float, ...],
                todo: set[str], out_dir: Path) -> list[dict[str, Any]]:
    """Shrink the ``todo`` variants of ours; rows carry ``path``. The retired auto_bench.py's recipe."""
    import onnx

    import hatch_shrinkray
    from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
    from hatch_shrinkray.bench import Auto, Dedup

    if ENGINE_DIR is not None:
        assert Path(hatch_shrinkray.__file__).resolve().is_relative_to(ENGINE_DIR.resolve()), hatch_shrinkray.__file__
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for method in ("int8", "fp16"):
        if method not in todo:
            continue
        dst = out_dir / f"{method}_{min_elements}.onnx"
        t0 = time.perf_counter()
        res = shrink(src, dst, ShrinkOptions(method=method, verify=None, min_elements=min_elements))
        rows.append({"variant": method, "path": dst, "seconds": time.perf_counter() - t0,
                     "encodings": _kinds(res.tensors)})
    autos = [v for v in todo if v.startswith("auto") or v == "int8-gptq"]
    if not autos:
        return rows
    opts = ShrinkOptions(method="auto", verify=VerifyOptions(inputs=calib), budget_cosine=-1.0,
                         min_elements=min_elements)
    from benchmarks.curve_calib import feeds

    model = onnx.load(str(src))
    Dedup().apply(model, opts)
    auto = Auto()
    t0 = time.perf_counter()
    analysis = auto.analyse(model, opts, feeds(calib, src)[0])
    analyse_s = time.perf_counter() - t0
    if analysis is None:
        raise RuntimeError(f"{key}: auto found no float32 weight")
    if "int8-gptq" in todo:
        m = copy.deepcopy(model)
        recs = auto.write_choice(m, analysis, opts, "int8")
        dst = out_dir / f"int8gptq_{min_elements}.onnx"
        onnx.save(m, str(dst))
        rows.append({"variant": "int8-gptq", "path": dst, "seconds": analyse_s, "analysis_s": analyse_s,
                     "encodings": _kinds(recs)})
    rows += _sweep(auto, model, analysis, opts, param=param, budgets=budgets, todo=todo,
                   dst=out_dir / f"auto_{param}", analyse_s=analyse_s)
    return rows


def _sweep(auto: Any, model: Any, analysis: Any, opts: Any, *, param: str,
           budgets: tuple[float, ...], todo: set[str], dst: Path, analyse_s: float) -> list[dict[str, Any]]:
    """``Auto().finish`` per budget of ``param`` (the other budget loose: rel-L2 at verification's
    limit 0.1 / agreement off)."""
    import onnx

    loose = {"budget_rel_l2": 0.1} if param == "budget_agreement" else {"budget_agreement": 0.0}
    rows: list[dict[str, Any]] = []
    for b in budgets:
        name = f"auto {b:g}"
        if name not in todo:
            continue
        m = copy.deepcopy(model)
        t0 = time.perf_counter()
        try:
            recs = auto.finish(m, analysis, replace(opts, **loose, **{param: b}))
        except Exception as exc:  # e.g. the budget is missed even by the original weights
            rows.append({"variant": name, "path": None, "status": "shrink failed", "budget": b, "param": param,
                         "error": " ".join(str(exc).split())[:300], "seconds": analyse_s})
            continue
        path = Path(f"{dst}_{b:g}_{opts.min_elements}.onnx")
        onnx.save(m, str(path))
        rows.append({"variant": name, "path": path, "budget": b, "param": param,
                     "seconds": analyse_s + time.perf_counter() - t0,
                     "analysis_s": analyse_s, "encodings": _kinds(recs),
                     "note": recs[0].note[-200:] if recs else ""})
    return rows


# ---------------------------------------------------------------- the predecessor


def _peer_cached_file(key: str, name: str, src_sha: str) -> Path | None:
    """benchmarks/run.py's shrunk file of the same peer variant, if it was made from this input."""
    meta = SHRUNK_DIR / key / f"{name}.json"
    if not meta.exists():
        return None
    prev = json.loads(meta.read_text())
    out = SHRUNK_DIR / key / f"{name}.onnx"
    if prev.get("input_sha256") == src_sha and prev.get("ok") and out.exists():
        return out
    return None


def peer_shrink(key: str, src: Path, name: str, args: tuple[str, ...], src_sha: str) -> dict[str, Any]:
    cmd_args = ["-m", "onnx_shrink_ray.shrink", *args, "--output_dir", "DIR", "--output_suffix", "_peer.onnx",
                "MODEL.onnx"]
    row: dict[str, Any] = {"variant": name, "command": "python " + " ".join(cmd_args)}
    reuse = _peer_cached_file(key, name, src_sha)
    if reuse is not None:
        prev = json.loads((SHRUNK_DIR / key / f"{name}.json").read_text())
        row.update(path=reuse, seconds=prev["seconds"], reused=str(reuse.relative_to(REPO_DIR)))
        return row
    py = ensure_peer_venv()
    out_dir = PEER_CACHE / key
    tmp = out_dir / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0 = time.perf_counter()
    proc = subprocess.run([str(py), "-m", "onnx_shrink_ray.shrink", *args, "--output_dir", str(tmp),
                           "--output_suffix", "_peer.onnx", str(src)], capture_output=True, text=True,
                          check=False)
    row["seconds"] = time.perf_counter() - t0
    produced = tmp / f"{src.stem}_peer.onnx"
    if proc.returncode != 0 or not produced.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()
        row.update(path=None, status="shrink failed", error=(tail[-1] if tail else f"exit {proc.returncode}")[:300])
    else:
        dst = out_dir / f"{name}.onnx"
        produced.replace(dst)
        row["path"] = dst
    shutil.rmtree(tmp, ignore_errors=True)
    return row


# ---------------------------------------------------------------- per model


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=json_default))
    tmp.replace(path)


def run_model(key: str, sizes: SizeCache, force: bool = False) -> None:
    from benchmarks.curve_calib import calibration, feeds

    src = MODEL_DIR / f"{key}.onnx"
    src_sha = sha256_file(src)
    ev = Evaluator(key, src)
    sig = f"{SCHEMA}|{src_sha}|{task_spec(key).signature(False)}"

    # predecessor
    peer_file = PEER_CACHE / f"{key}.json"
    peer = _load(peer_file)
    if peer.get("sig") != sig or force:
        peer = {"sig": sig, "points": {}}
    for name, args in PEER_VARIANTS:
        if name in peer["points"]:
            continue
        LOG.info("%s: predecessor %s", key, name)
        row = peer_shrink(key, src, name, args, src_sha)
        path = row.pop("path")
        if path is not None:
            row.update(sizes_of(path, src, sizes))
            row.update(ev.evaluate(path))
            row["file_sha256"] = sha256_file(path)
        peer["points"][name] = row
        _save(peer_file, peer)
        LOG.info("%s: %s", key, _brief(row))

    # ours
    me = MIN_ELEMENTS.get(key, DEFAULT_MIN_ELEMENTS)
    calib, calib_text = calibration(key, src)
    ours_file = CURVES / engine_sha()[:12] / f"{key}.json"
    ours = _load(ours_file)
    osig = f"{sig}|{me}|{sha256_file(calib)}"
    if ours.get("sig") != osig or force:
        fitted, samples = feeds(calib, src)
        decides = decision_outputs(src, fitted)
        param = "budget_agreement" if decides else "budget_rel_l2"
        ours = {"sig": osig, "engine": engine_sha(), "engine_rev": ENGINE_REV, "min_elements": me,
                "calibration": str(calib.relative_to(REPO_DIR)), "calibration_text": calib_text,
                "calibration_samples": samples,
                "decision_outputs": decides, "param": param, "points": {}}
    param = ours["param"]
    budgets = AGREEMENT_BUDGETS if param == "budget_agreement" else REL_L2_BUDGETS
    wanted = ["int8", "fp16", "int8-gptq", *[f"auto {b:g}" for b in budgets]]
    todo = {v for v in wanted if v not in ours["points"]}
    if todo:
        LOG.info("%s: ours %s (engine %s, %s, min-elements %d)", key, sorted(todo), engine_sha()[:12], param, me)
        out_dir = CURVES / engine_sha()[:12] / key
        for row in ours_points(key, src, calib, min_elements=me, param=param, budgets=budgets, todo=todo,
                               out_dir=out_dir):
            path = row.pop("path")
            if path is not None:
                row.update(sizes_of(path, src, sizes))
                row.update(ev.evaluate(path))
                row["file_sha256"] = sha256_file(path)
            ours["points"][row["variant"]] = row
            _save(ours_file, ours)
            LOG.info("%s: %s", key, _brief(row))


def _brief(row: dict[str, Any]) -> str:
    if row.get("status") != "ok":
        return f"{row['variant']}: {row.get('status')} {row.get('error', '')[:120]}"
    return (f"{row['variant']}: raw {100 * row['raw_ratio']:.1f}% gzip {100 * row['gzip_ratio']:.1f}% "
            f"agreement {100 * row['agreement']:.2f}% d{row['primary']} {row['d_primary']:+.4f} "
            f"{row.get('encodings', '')} {row['seconds']:.0f}s")


# ---------------------------------------------------------------- report


def load_results(key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return _load(CURVES / engine_sha()[:12] / f"{key}.json"), _load(PEER_CACHE / f"{key}.json")


ORDER = ["int8", "int8-gptq", "fp16"]
LABELS = {"int8": "ours int8 (default, round-to-nearest)", "int8-gptq": "ours int8-gptq (uniform, output-aware)",
          "fp16": "ours fp16", "peer-default": "predecessor integer_weights (per-tensor)",
          "peer-per-channel": "predecessor integer_weights --per-channel",
          **{f"peer-float{n}": f"predecessor float_weights --float_levels {n}" for n in PEER_LEVELS}}
SIZE_TOL = 0.001  # 0.1 point of raw size: "equal size"

# Hand-written verdicts, keyed by model, for the engine commit they were written against (the computed
# dominance section of the report is regenerated from the cached results on every run).
NOTES: dict[str, str] = {
    "ppocrv6_rec": (
        "against `int8` and the predecessor, yes: auto 0.998 keeps 93.0% of lines identical at 27.5% (ΔCER "
        "+0.0016) where int8 keeps 85.5% at 28.2% and the predecessor 77.5% (per-tensor, 27.4%) / 86.0% "
        "(per-channel, 28.5%); at the low end packed int4/int6 give 18.3-18.7% at 77.5-79.5%. Issue minimum "
        "(>= 90% at <= 35%, |ΔCER| <= 0.005) met by 0.998; **target (>= 95% at <= 30%) missed by one line "
        "on 16 calibration lines**: "
        "0.9995 gives 94.5% at 29.3%, 0.9999 96.0% at 33.8%. Our own uniform `int8-gptq` (95.0% at 28.2%) lies "
        "above the curve: on 16 calibration lines several mixes meet the budget by 1-2 CTC positions, so which "
        "tensors get the spare bytes is calibration noise (0.999: 91.5% at 28.8%). With 32 calibration lines "
        "(`auto_bench --calib-lines 32`, same engine, AUTO.md) the target is met: 0.995 gives 95.0% at 29.2% "
        "(ΔCER -0.0004), 0.998 96.5% at 32.4% (the old ladder without int10/int12 needed 39.8% for 98.0%). "
        "Predecessor float4096 reaches 95.0% but at 99.7% raw (50.1% gzip)."),
    "ppocrv4_rec": (
        "no predecessor point loads (`Mul` shape inference error). Against `int8`: yes, 0.95 gives 69.5% at "
        "22.2% (int8 63.0% at 26.9%). Issue minimum met: 0.998 keeps 93.0% of lines at 34.0% (ΔCER -0.0020); "
        "**target missed**: 95.0% needs 36.0% (0.999), and <= 30% gives at most 83.5% (0.99, 28.0%). The "
        "int10/int12 rungs are what moved this model: the old ladder reached 89.0% at 32.3% and then jumped to "
        "96.5% at 48.4%. `int8-gptq` (83.0% at 26.9%) is again slightly above the curve at its size. "
        "min-elements 4096 (at 16384, 7.5% of this file stays float32, see AUTO.md)."),
    "silero_vad": (
        "no predecessor point loads (`If` type inference error). Against `int8`, **no, a near-tie**: int8 keeps "
        "99.953% of 32 ms decisions at 34.2%; `auto` is smaller below it (0.998: 31.8% / 99.511%, which meets "
        "the issue's >= 99.5%; 0.9995: 32.7% / 99.781%) and agrees more above it (0.99999: 37.0% / 99.97%), but "
        "no point is both. All weights sit in the two `If` branches, where activations are not captured (no "
        "output-aware rounding), and the 8 kHz branch never runs on the 16 kHz calibration chunks (plain "
        "int8); with ~200 calibration chunks the budget cannot tell 99.9% from 99.95% of decisions."),
    "ppocrv6_det": (
        "the engine measures no decisions on a probability map, so rel-L2 is swept. Against `int8`: yes, 43.3% "
        "of pages with identical boxes at 27.4% (rel-L2 0.01) vs int8's 43.3% at 31.8%, and 73.3% at 30.4%; "
        "96.7% at 37.0% (0.001) = fp16's agreement at 54.3%. Box F1 at IoU 0.7 vs ground truth is unchanged "
        "from 0.01 up. Raw: dominates both predecessor integer points (3.3% / 0.0% of pages identical at "
        "31.6% / 32.2%); its float4096 (96.7%) saves nothing raw. Gzip: the predecessor's per-tensor (21.1%) "
        "and float levels are smaller at 0-47% of pages identical; at 96.7% float4096 is 41.9% gzip vs `auto` "
        "34.8%."),
    "ppocrv4_det": (
        "no predecessor point loads (`Mul` shape inference error). Against `int8`: yes, 50.0% vs 43.3% of "
        "pages identical at 31.2% vs 35.2%, 76.7% at 34.5%, 96.7% at 43.5% (fp16: 96.7% at 56.5%). int8 is "
        "35.2%, not ~26%, because at min-elements 16384 many small `Constant` weights stay float32."),
    "magika": (
        "against `int8`, yes (99.47% of 377 DL labels at 20.5% vs int8 at 26.0%; 99.735% at 22.2%). Against "
        "the predecessor, not quite: its per-tensor `integer_weights` keeps all 377 labels at 26.3% raw / "
        "21.8% gzip, while `auto` reaches 100% only at 32.6% (three int10 weights): below that, one file of 377 "
        "flips whatever the mix (also under `int8-gptq` and the predecessor's own per-channel), so this is a "
        "single near-tie the 64 calibration files do not contain. Its per-channel point (26.6% / 99.735%) is "
        "dominated."),
    "minilm": (
        "rel-L2 swept (a unit-length embedding is not read as class scores since this engine). Against `int8`, "
        "**no**: int8 keeps all 130 nearest neighbours at 25.4%; `auto` gives 21.0-22.4% with one neighbour "
        "changed (99.23%, rel-L2 0.05-0.03) and 100% from 26.5% (0.02). The task cannot separate the "
        "int8-size points and the rel-L2 budget does not see one neighbour swap. Predecessor: per-tensor "
        "(25.3% / 98.5%) dominated, per-channel (25.8% / 100%) not."),
    "nudenet": (
        "rel-L2 swept (no decision measure on the box tensor). Yes on raw: 0.0025 keeps detection F1 100% vs "
        "the original at 24.8% (int8 97.0% at 28.9%), dominating int8 and both predecessor integer points "
        "(85.7%, 94.1% at ~29%); the curve is not monotone on test data (0.001: 28.0% / 94.1%), one or two "
        "boxes of ~35 moving across the IoU threshold. Gzip: the predecessor's per-tensor (23.9% / 85.7%) and "
        "float16/64 are smaller but lose detections."),
    "nakdimon": (
        "rel-L2 swept (3-D score outputs are not recognised as class probabilities). Yes on raw: 0.005 keeps "
        "all 30 sentences at 24.3% (int8 25.7%, predecessor per-channel 26.1%); the task saturates (one "
        "sentence = 3.3 points, so 0.0025/0.001 at 96.7% are one sentence). Gzip: no - the predecessor's "
        "float64 is 19.6% at 100% vs `auto`'s 22.9%."),
}
NOTES_ENGINE = "e9053603422d"
SUMMARY = (
    "In short (engine e9053603422d, packed int4/6/10/12 rungs): on raw size `auto`'s curve dominates `int8` on "
    "7 of 9 models (both recognisers, both detectors, magika, nudenet, nakdimon); on silero_vad and minilm it "
    "passes next to the int8 point (smaller with slightly less agreement, or larger with more) without "
    "dominating it. The predecessor loads on 6 models; its integer points are dominated on ppocrv6_rec, "
    "ppocrv6_det, nudenet and nakdimon, not on magika (per-tensor keeps 100%, one file of 377) and minilm "
    "(per-channel). OCR recognisers: the issue minimum (>= 90% of lines at <= 35%) is met on both at budget "
    "0.998 (v6 93.0% at 27.5%, v4 93.0% at 34.0%); the target (>= 95% at <= 30%) is missed on both (v6: 94.5% "
    "at 29.3%; v4: 83.5% at 28.0%); with 32 calibration lines (AUTO.md) v6 meets it (95.0% at 29.2%), v4 "
    "does not (92.0% at 32.7%). Silero VAD >= 99.5% decisions: met (99.511% at 31.8%). Under gzip the "
    "predecessor's float levels stay smaller on nakdimon and magika at full agreement.")


def _ok(points: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in points.values() if p.get("status") == "ok"]


def _autos(ours: dict[str, Any]) -> list[dict[str, Any]]:
    pts = [p for p in _ok(ours.get("points", {})) if p["variant"].startswith("auto")]
    return sorted(pts, key=lambda p: p["budget"] if p.get("param", ours.get("param")) == "budget_agreement"
                  else -p["budget"])


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _agree(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.3f}%" if x > 0.995 else f"{100 * x:.1f}%"


SHORT = {"int8": "int8", "int8-gptq": "int8-gptq", "fp16": "fp16", "peer-default": "pred. per-tensor",
         "peer-per-channel": "pred. per-channel", **{f"peer-float{n}": f"pred. float{n}" for n in PEER_LEVELS}}


def dominance(key: str, ours: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    """Per size basis (raw, gzip-9): which reference points (int8, int8-gptq, fp16, each predecessor point)
    a point of ``auto``'s curve dominates (no larger size, no lower agreement), and for the others the
    closest ``auto`` points."""
    autos = _autos(ours)
    if not autos:
        return ["no `auto` point yet"]
    refs = [p for p in _ok(ours.get("points", {})) if p["variant"] in ("int8", "int8-gptq", "fp16")]
    refs += _ok(peer.get("points", {}))
    lines = []
    for basis, label in (("raw_ratio", "raw"), ("gzip_ratio", "gzip-9")):
        won, lost = [], []
        for r in refs:
            name = SHORT.get(r["variant"], r["variant"])
            here = f"{name} ({_pct(r[basis])}, {_agree(r['agreement'])})"
            dom = _dominating(r, autos, basis)
            if dom:
                a = min(dom, key=lambda a: a[basis])
                won.append(f"{here} by {a['variant']} ({_pct(a[basis])}, {_agree(a['agreement'])})")
                continue
            smaller = [a for a in autos if a[basis] <= r[basis] + SIZE_TOL]
            better = [a for a in autos if a["agreement"] >= r["agreement"]]
            parts = []
            if smaller:
                a = max(smaller, key=lambda a: a["agreement"])
                parts.append(f"best `auto` at no larger size {a['variant']} {_agree(a['agreement'])}")
            else:
                parts.append("every `auto` point is larger")
            if better:
                a = min(better, key=lambda a: a[basis])
                parts.append(f"`auto` needs {_pct(a[basis])} ({a['variant']}) to match it")
            else:
                parts.append("no `auto` point reaches its agreement")
            lost.append(f"{here}: " + ", ".join(parts))
        if won:
            lines.append(f"{label}: dominates " + "; ".join(won))
        if lost:
            lines.append(f"{label}: **does not dominate** " + "; ".join(lost))
    bad = [p for p in peer.get("points", {}).values() if p.get("status") != "ok"]
    if bad:
        lines.append("predecessor points that do not load / fail: "
                     + ", ".join(f"{SHORT.get(p['variant'], p['variant'])} ({p.get('status')})" for p in bad))
    return lines


def cell(p: dict[str, Any] | None) -> str:
    """``raw / agreement`` of one point, ``-`` when it has none."""
    return "-" if not p or p.get("status") != "ok" else f"{_pct(p['raw_ratio'])} / {_agree(p['agreement'])}"


def _dominating(r: dict[str, Any], autos: list[dict[str, Any]], basis: str = "raw_ratio") -> list[dict[str, Any]]:
    """The ``auto`` points no larger than ``r`` on ``basis`` (within SIZE_TOL) that agree no less."""
    return [a for a in autos if a[basis] <= r[basis] + SIZE_TOL and a["agreement"] >= r["agreement"]]


def _row(p: dict[str, Any], ours_param: str = "") -> str:
    name = LABELS.get(p["variant"], p["variant"])
    if p["variant"].startswith("auto"):
        param = p.get("param", ours_param)
        name = f"ours auto {'agreement' if param == 'budget_agreement' else 'rel-L2'} {p['budget']:g}"
    enc = ", ".join(f"{v} {k}" for k, v in sorted(p.get("encodings", {}).items(), key=lambda kv: -kv[1])) or "-"
    if p.get("variant") == "int8-gptq":
        enc += " (GPTQ)"
    t = p.get("seconds")
    tt = "-" if t is None else f"{t:.1f} s" if t < 10 else f"{t:.0f} s"
    if p["variant"].startswith("auto") or p["variant"] == "int8-gptq":
        tt += " (incl. analysis)"
    if p.get("status") != "ok":
        err = re.sub(r"^.*? failed:", "", p.get("error") or "").replace("|", "/")[:110]
        return f"| {name} | **{p.get('status')}** | | | | {err} | {tt} |"
    extra = f" ({_pct(p['task_agreement'])})" if "task_agreement" in p and p["agreement"] != p["task_agreement"] else ""
    return (f"| {name} | {_pct(p['raw_ratio'])} | {_pct(p['gzip_ratio'])} | {_agree(p['agreement'])}{extra} | "
            f"{p['d_primary']:+.4f} | {enc} | {tt} |")


def write_report(argv: list[str]) -> None:
    import onnxruntime

    from benchmarks.curve_calib import calibration

    eng = engine_sha()
    last = " ".join(["python -m benchmarks.curves", *argv]) if argv else "python -m benchmarks.curves"
    out: list[str] = [
        "# Size vs. agreement curves: `auto` against `int8` and the predecessor (issue 6)", "",
        f"Engine: `{eng}` (`HSR_BENCH_ENGINE={ENGINE_REV}`, imported from a `git archive` snapshot). "
        f"Written {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} on a shared 2-vCPU VM "
        f"({platform.python_version()}, onnxruntime {onnxruntime.__version__}, load average "
        f"{os.getloadavg()[0]:.1f} at report time, 1-4 during the sweep, which ran `nice`d next to other "
        "benchmark jobs: times are wall times; task sessions use 2 threads, the engine's own sessions the "
        "default).", "",
        "```", f"HSR_BENCH_ENGINE={ENGINE_REV} nice .venv/bin/python -m benchmarks.curves   # all 9 models", "```",
        "",
        "computes every missing point and rewrites this file (it was run twice: all nine models, then again "
        "after the budgets 0.99999 (agreement) and 0.03 / 0.001 (rel-L2) were added to the sweeps; every point "
        f"is cached, so the one command reproduces the tables). This file was last written by `{last}`.", "",
        "Per-point results: `benchmarks/.cache/curves/<engine sha12>/<model>.json` (ours) and "
        "`benchmarks/.cache/curves/peer/<model>.json` (the predecessor, independent of our engine); a rerun "
        "with another `HSR_BENCH_ENGINE` recomputes only our rows. Plot: `curves.png`.", "",
    ]
    verdict: list[str] = ["## Verdict per model", "",
                          "Does `auto`'s curve dominate `int8` and the predecessor's curve (more agreement at equal "
                          "size or smaller at equal agreement)? \"raw\" compares file sizes, \"gzip\" sizes after "
                          "gzip -9 (what a wheel's deflate sees: the predecessor's `float_weights` only pays off "
                          "there). Numbers: raw size / agreement on the test data.", ""]
    if NOTES_ENGINE and not eng.startswith(NOTES_ENGINE):
        verdict.append(f"**These verdicts were written for engine {NOTES_ENGINE}, not {eng[:12]}: check them "
                       "against the computed dominance and the tables below.**")
        verdict.append("")
    computed: list[str] = ["## Dominance, computed from the tables", "",
                           "A reference point (int8, int8-gptq, fp16, each predecessor point) is dominated when a "
                           "point of `auto`'s curve is no larger (tolerance "
                           f"{100 * SIZE_TOL:.1f} point of size) and has no lower agreement.", ""]
    tables: list[str] = []
    for key in MODELS:
        ours, peer = load_results(key)
        if not ours and not peer:
            continue
        verdict.append(f"* **{key}**: {NOTES.get(key, 'see the computed dominance below.')}")
        computed.append(f"**{key}**")
        computed.append("")
        computed += [f"* {line}" for line in dominance(key, ours, peer)]
        computed.append("")
        spec = task_spec(key)
        tables.append(f"## {key}")
        tables.append("")
        if ours:
            param = ours["param"]
            swept = ("`budget_agreement` (rel-L2 budget at verification's limit 0.1, cosine off)"
                     if param == "budget_agreement"
                     else "`budget_rel_l2` (agreement budget off, cosine off): the engine measures no decisions "
                     "on this model's outputs")
            tables.append(
                f"Calibration (`auto`'s `inputs`): {calibration(key, MODEL_DIR / f'{key}.onnx')[1]} - "
                f"{ours.get('calibration_samples', '?')} samples (3 of 4 fitted on), `{ours['calibration']}`. "
                f"min-elements {ours['min_elements']}. Budget swept: {swept}; outputs with a decision measure: "
                f"{', '.join(ours['decision_outputs']) or 'none'}.")
            tables.append("")
        agree = AGREEMENT_TEXT[AGREEMENT.get(key, "identical")]
        if key.endswith("_det"):
            agree = ("share of the 30 test pages whose boxes are identical to the original's; in brackets the "
                     "task's box F1 vs the original's boxes at IoU 0.8")
        tables.append(f"Agreement = {agree}. Metric delta = {spec.primary} (variant - original, "
                      f"{'higher' if spec.higher_is_better else 'lower'} is better).")
        tables.append("")
        tables.append("| variant | raw | gzip-9 | agreement | Δ" + spec.primary + " | encodings | time |")
        tables.append("|---|---|---|---|---|---|---|")
        pts = ours.get("points", {})
        for v in ORDER:
            if v in pts:
                tables.append(_row(pts[v]))
        for p in _autos(ours):
            tables.append(_row(p, ours.get("param", "")))
        for p in [p for p in pts.values() if p["variant"].startswith("auto") and p.get("status") != "ok"]:
            tables.append(_row(p, ours.get("param", "")))
        for name, _ in PEER_VARIANTS:
            if name in peer.get("points", {}):
                tables.append(_row(peer["points"][name]))
        tables.append("")
    notes = [
        "## Definitions", "",
        "* raw = shrunk `.onnx` bytes / original bytes; gzip-9 = the same after `gzip -9` of both files.",
        "* Agreement is measured on each task's own test data (`benchmarks/tasks/*.py`, as in `RESULTS.md`), "
        "never on the calibration inputs: the share of answers identical to the original model's (OCR lines, "
        "VAD 32 ms decisions, Magika DL labels, MiniLM nearest neighbours, Nakdimon sentences, detector pages "
        "with identical boxes); NudeNet: detection F1 vs the original.",
        "* `int8` = method `int8` (round-to-nearest); `int8-gptq` = every weight at `auto`'s int8 candidate "
        "(output-aware rounding on the calibration inputs, same bytes as `int8`); `fp16` = method `fp16`; "
        "`auto b` = method `auto` at budget b, one `Auto().analyse` shared by the budgets "
        "(`benchmarks/auto_bench.py`'s recipe). Time of `auto` = analysis + that budget's search.",
        "* The predecessor = onnx-shrink-ray 0.0.11 through its CLI in its own venv "
        "(`python -m onnx_shrink_ray.shrink --action ... --output_dir DIR --output_suffix _peer.onnx MODEL`). "
        "`float_weights` snaps weights to N levels but keeps them float32: it saves nothing raw, only after "
        "compression (gzip column). Files made by `benchmarks/run.py` from the same input are reused.",
        "",
    ]
    verdict.append("")
    summary = ["## Summary table", "", *summary_table(), "", SUMMARY, ""]
    (BENCH_DIR / "CURVES.md").write_text("\n".join(out + summary + verdict + notes + tables + computed).rstrip()
                                         + "\n")
    plot()
    LOG.info("wrote %s", BENCH_DIR / "CURVES.md")
    from benchmarks.report import splice_curves

    splice_curves(BENCH_DIR / "RESULTS.md")


def summary_table() -> list[str]:
    """One row per model: raw size / agreement of int8, int8-gptq, every ``auto`` budget and the
    predecessor's points that save raw bytes, and whether ``auto`` dominates int8 and the predecessor."""
    head = ("| model | budget swept | int8 | int8-gptq | `auto` (budget: raw / agreement) | predecessor "
            "(per-tensor; per-channel) | `auto` dominates int8 / predecessor (raw) |")
    lines = [f"Engine `{engine_sha()[:12]}`. Each cell: raw size / agreement with the original on the task's "
             "test data (definitions in `CURVES.md`).", "", head, "|---|---|---|---|---|---|---|"]
    for key in MODELS:
        ours, peer = load_results(key)
        if not ours:
            continue
        pts = ours.get("points", {})
        autos = _autos(ours)
        curve = "; ".join(f"{p['budget']:g}: {cell(p)}" for p in autos) or "-"
        peers = [peer.get("points", {}).get(n) for n in ("peer-default", "peer-per-channel")]
        loads = [p for p in peers if p and p.get("status") == "ok"]
        pred = "; ".join(cell(p) for p in peers) if loads else "does not load"
        i8 = pts.get("int8")
        dom_int8 = "yes" if i8 and i8.get("status") == "ok" and _dominating(i8, autos) else "no"
        raw_peers = [p for p in _ok(peer.get("points", {})) if p["raw_ratio"] < 0.95]
        dom_peer = f"{sum(bool(_dominating(p, autos)) for p in raw_peers)} of {len(raw_peers)}" if raw_peers else "n/a"
        swept = "agreement" if ours.get("param") == "budget_agreement" else "rel-L2"
        lines.append(f"| {key} | {swept} | {cell(i8)} | {cell(pts.get('int8-gptq'))} | {curve} | {pred} | "
                     f"{dom_int8} / {dom_peer} |")
    return lines


def plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 6, figsize=(32, 14))
    for i, key in enumerate(MODELS):
        ours, peer = load_results(key)
        for j, (basis, label) in enumerate((("raw_ratio", "raw size"), ("gzip_ratio", "gzip-9 size"))):
            _panel(axes[i // 3, 2 * (i % 3) + j], key, ours=ours, peer=peer, basis=basis, label=label)
    fig.suptitle(f"Size vs. agreement with the original on each task's test data (engine {engine_sha()[:12]}); "
                 "per model: raw size (left), gzip-9 size (right); numbers = auto budgets / predecessor float levels")
    legend: dict[str, Any] = {}
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(lab, h)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.legend(list(legend.values()), list(legend.keys()), loc="lower center", ncol=len(legend), fontsize=10)
    fig.savefig(BENCH_DIR / "curves.png", dpi=90)


def _panel(ax: Any, key: str, *, ours: dict[str, Any], peer: dict[str, Any], basis: str, label: str) -> None:
    ax.set_title(f"{key} ({label})", fontsize=10)
    ax.set_xlabel(f"{label}, % of original", fontsize=8)
    ax.set_ylabel("agreement (log scale of the disagreement)", fontsize=8)
    ticks = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999]
    ax.set_yticks([-math.log10(1 - t) for t in ticks], [f"{100 * t:g}%" for t in ticks[:-1]] + [">= 99.99%"],
                  fontsize=7)
    ax.set_ylim(-0.1, 4.2)

    def y(p: dict[str, Any]) -> float:
        return -math.log10(max(1.0 - p["agreement"], 1e-4))

    autos = _autos(ours)
    if autos:
        ax.plot([100 * p[basis] for p in autos], [y(p) for p in autos], "o-", color="C0", label="ours auto (budgets)")
        for p in autos:
            ax.annotate(f"{p['budget']:g}", (100 * p[basis], y(p)), fontsize=6, color="C0", xytext=(3, 3),
                        textcoords="offset points")
    pts = ours.get("points", {})
    for v, m, c in (("int8", "s", "C1"), ("int8-gptq", "D", "C2"), ("fp16", "^", "C4")):
        p = pts.get(v)
        if p and p.get("status") == "ok":
            ax.plot([100 * p[basis]], [y(p)], m, color=c, ms=7, label=f"ours {v}", alpha=0.8)
    pp = peer.get("points", {})
    floats = [pp[f"peer-float{n}"] for n in PEER_LEVELS if pp.get(f"peer-float{n}", {}).get("status") == "ok"]
    if floats:
        ax.plot([100 * p[basis] for p in floats], [y(p) for p in floats], "x--", color="C3",
                label="predecessor float_weights (levels)")
        for p in floats:
            ax.annotate(p["variant"].removeprefix("peer-float"), (100 * p[basis], y(p)), fontsize=6, color="C3",
                        xytext=(3, -9), textcoords="offset points")
    for v, m in (("peer-default", "v"), ("peer-per-channel", "P")):
        p = pp.get(v)
        if p and p.get("status") == "ok":
            ax.plot([100 * p[basis]], [y(p)], m, color="C3", ms=7, label=LABELS[v], alpha=0.8)
    bad = [SHORT.get(p["variant"], p["variant"]) for p in pp.values() if p.get("status") != "ok"]
    if bad:
        ax.text(0.02, 0.5, "predecessor: " + ("nothing loads" if len(bad) == len(pp) else
                                               "does not load: " + ", ".join(bad)),
                transform=ax.transAxes, fontsize=7, color="C3")
    ax.grid(True, alpha=0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("models", nargs="*", default=MODELS)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--force", action="store_true", help="recompute the models' cached points")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sizes = SizeCache(CURVES / "sizes.json")
    if not args.report_only:
        for key in args.models:
            t0 = time.perf_counter()
            run_model(key, sizes, force=args.force)
            LOG.info("%s done in %.0f s", key, time.perf_counter() - t0)
    write_report(sys.argv[1:])


if __name__ == "__main__":
    main()
