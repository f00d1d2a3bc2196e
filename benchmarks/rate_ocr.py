"""Rate-aware int8 encodings on PP-OCRv6 rec, each alone, at the layer: bits a value against output
error on lines the fitting never saw, round-to-nearest int8 and the level counts beside them.

    nice python -m benchmarks.rate_ocr run      # every family, cached per family as JSON
    python -m benchmarks.rate_ocr report        # the DOWNLOAD.md table

Why the layer and not the model: a recogniser's lines need a model run per encoding and a brotli 11 of
the file (30 s each on this VM), and ``auto`` assigns rungs per weight anyway; what decides whether a
rung can help ``auto`` is whether it stores a weight in fewer bits at the same output error on data it
was not fitted on. So every weight of the model (39, all with their activations visible) is encoded
by one family, and for each the output error ``dW H dW^T`` relative to the layer's output energy is
measured twice: with ``H`` of the 64 lines ``record_task`` records (seed 777, what the encodings
are fitted on: **fit**) and with ``H`` of 64 other lines (seed 555, disjoint from them and from the
task's 200 test lines: **tune**). Bits are the codes' order-0 entropy at the tensor's code
frequencies (``steps.row_bits``; brotli 11 stores PP-OCRv6's int8 codes at 0.94-0.95x of it,
``DOWNLOAD.md``). The table sums both over the weights (value-weighted means).

Families (every one int8 codes and one float32 scale per channel, the ``Cast -> Mul`` decode):

* ``levels L``: L codes per channel on the max-abs grid (``auto``'s level rungs), round-to-nearest
  or output-aware (``gptq.round_rows``: scale search 0.85-1, GPTQ, kept where better);
* ``steps b``: ``numerics.steps`` at b bits a value saved, factors 1-16 (``WIDE``), the steps chosen
  with the full ``H`` (as ``auto``'s rungs) or with its diagonal only (``diag``), then round-to-nearest
  or GPTQ (kept per row where it beats round-to-nearest);
* ``per-tensor`` / ``grouped g``: one step for the tensor / for each of g groups of channels ranked by
  max-abs (the peer's default is per-tensor, asymmetric);
* ``clip``: per channel the step 0.85-1x max-abs with the least output error, round-to-nearest;
* ``entropy-gptq lam``: GPTQ where each code is the floor or the ceiling of the compensated value,
  whichever costs less output error + ``lam`` x its bits (``-log2`` of the codes' frequencies in the
  tensor, from the previous pass; two passes), at the max-abs step and at ``steps 2``'s steps.
"""

from __future__ import annotations

import json
import pickle
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from benchmarks import corpus
from benchmarks.common import run_report_parser
from benchmarks.rate import WIDE, gptq_choosing, gptq_order, grouped_steps
from benchmarks.rate_data import RATE_DIR
from hatch_shrinkray import ShrinkOptions
from hatch_shrinkray.bench import (
    StepTable,
    as_rows,
    calibrate,
    code_bounds,
    gptq,
    site_key,
    steps_saving,
)

QMAX = 127
SAVINGS = (0.5, 1.0, 1.5, 2.0, 3.0)
LAMS = (1e-5, 3e-5, 1e-4, 3e-4)
FIT_SEED, TUNE_SEED, LINES = 777, 555, 64
RESULTS = RATE_DIR / "ppocrv6_layers.json"
WEIGHTS = RATE_DIR / "ppocrv6_weights.pkl"


@dataclass
class W:
    name: str
    rows: np.ndarray
    h: np.ndarray
    """Fit ``H`` (mean ``x x^T`` over the recorded lines' positions)."""
    h_tune: np.ndarray
    rows_seen: int

    @property
    def s0(self) -> np.ndarray:
        amax = np.abs(self.rows).max(axis=1)
        return np.where(amax > 0, amax / QMAX, 1.0)


def _moments(model: onnx.ModelProto, seed: int) -> tuple[Any, dict[tuple[str, str], tuple[np.ndarray, int]]]:
    from benchmarks.tasks.ocr_rec import TEST_SEED, build_lines, preprocess

    path = corpus.model_path("ppocrv6_rec")
    lines = build_lines(path, LINES, seed)
    assert not {t for t, _ in build_lines(path, 200, TEST_SEED)} & {t for t, _ in lines}, "lines overlap the test lines"
    name = model.graph.input[0].name
    cal = calibrate(model, ShrinkOptions(method="int8"), [{name: preprocess(img)} for _, img in lines],
                    weights_as_feeds=False)
    assert cal is not None
    return cal, {k: (m[0][0], m[1]) for k, m in cal.moments.items() if m[0].shape[0] == 1}


def weights() -> list[W]:
    if WEIGHTS.exists():
        out: list[W] = pickle.loads(WEIGHTS.read_bytes())
        return out
    model = onnx.load(str(corpus.model_path("ppocrv6_rec")))
    cal, fit = _moments(model, FIT_SEED)
    _, tune = _moments(model, TUNE_SEED)
    out = []
    for site in cal.sites:
        key, lay = site_key(site), cal.lays[site_key(site)]
        if lay is None or key not in fit or key not in tune:
            continue
        out.append(W(key[1], as_rows(site.array().astype(np.float64), lay), fit[key][0], tune[key][0], fit[key][1]))
    RATE_DIR.mkdir(parents=True, exist_ok=True)
    WEIGHTS.write_bytes(pickle.dumps(out))
    return out


def bits(codes: np.ndarray) -> float:
    c = (codes.astype(np.int64) + QMAX).reshape(-1)
    counts = np.bincount(c, minlength=2 * QMAX + 1).astype(np.float64)
    p = counts[counts > 0] / c.size
    return float(-(p * np.log2(p)).sum() * c.size)


def measure(w: W, codes: np.ndarray, scale: np.ndarray) -> tuple[float, float, float]:
    dec = (codes.astype(np.float32) * scale.astype(np.float32)[:, None]).astype(np.float64)
    dw = w.rows - dec
    rel = [float(gptq.output_error(dw, h).sum() / gptq.output_error(w.rows, h).sum()) for h in (w.h, w.h_tune)]
    return bits(codes), rel[0], rel[1]


def rtn(w: W, s: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    lo, hi = (QMAX, QMAX) if bounds is None else (bounds[0][:, None], bounds[1][:, None])
    return np.clip(np.rint(w.rows / s[:, None]), -lo, hi)


def fitted(w: W, s: np.ndarray) -> np.ndarray:
    """GPTQ codes at these steps, per row where they beat round-to-nearest (as ``step_candidates``)."""
    base = rtn(w, s)
    if w.rows_seen < 2 * w.rows.shape[1]:
        return base
    codes = gptq.gptq(w.rows, s, w.h, QMAX)
    better = gptq.output_error(w.rows - codes * s[:, None], w.h) < gptq.output_error(w.rows - base * s[:, None], w.h)
    return np.where(better[:, None], codes, base)


def entropy_gptq(w: W, s: np.ndarray, lam: float, passes: int = 2) -> np.ndarray:
    """GPTQ (``numerics.gptq``'s order, damping and blocks) choosing each code between the floor and
    the ceiling of the compensated value by relative output error + ``lam`` x bits / values."""
    rows, k = w.rows, w.rows.shape[1]
    energy = float(gptq.output_error(rows, w.h).sum())
    order = gptq_order(w.h)
    codes = rtn(w, s)
    if order[2] is None or w.rows_seen < 2 * k:
        return codes
    per_bit = lam / rows.size
    for _ in range(passes):
        counts = np.bincount((codes.astype(np.int64) + QMAX).reshape(-1), minlength=2 * QMAX + 1) + 0.5
        cost = -np.log2(counts / counts.sum())

        def choose(x: np.ndarray, weight: np.ndarray, cost: np.ndarray = cost) -> np.ndarray:
            lo = np.clip(np.floor(x), -QMAX, QMAX)
            hi = np.clip(lo + 1, -QMAX, QMAX)
            c_lo = weight * (x - lo) ** 2 + per_bit * cost[(lo + QMAX).astype(np.int64)]
            c_hi = weight * (x - hi) ** 2 + per_bit * cost[(hi + QMAX).astype(np.int64)]
            return np.where(c_hi < c_lo, hi, lo)

        codes = gptq_choosing(rows, s, order, energy, choose)
    return codes


Family = Callable[[W], tuple[np.ndarray, np.ndarray]]


def families() -> dict[str, Family]:
    out: dict[str, Family] = {}
    for levels in (255, 127, 63, 31):
        def lv(w: W, levels: int = levels) -> tuple[np.ndarray, np.ndarray]:
            amax = np.abs(w.rows).max(axis=1)
            s = np.where(amax > 0, amax / ((levels - 1) // 2), 1.0)
            return rtn(w, s, code_bounds(w.rows.min(axis=1), w.rows.max(axis=1), levels)), s

        def lv_fit(w: W, levels: int = levels) -> tuple[np.ndarray, np.ndarray]:
            codes, s = lv(w, levels)
            if w.rows_seen < 2 * w.rows.shape[1]:
                return codes, s
            r = gptq.round_rows(w.rows, s, w.h, 8, code_bounds(w.rows.min(axis=1), w.rows.max(axis=1), levels))
            return r.codes, r.scale

        name = "int8" if levels == 255 else f"levels {levels}"
        out[f"{name}, round-to-nearest"] = lv
        out[f"{name}, output-aware"] = lv_fit

    def steps(w: W, saving: float, diag: bool) -> np.ndarray:
        h = np.diag(np.diag(w.h)) if diag else w.h
        s = steps_saving(StepTable(w.rows, w.s0, h, WIDE), saving)
        return w.s0 if s is None else s

    for saving in SAVINGS:
        for diag in (False, True):
            tag = f"steps {saving:g}{', diagonal H' if diag else ''}"
            out[f"{tag}, round-to-nearest"] = lambda w, b=saving, d=diag: (rtn(w, s := steps(w, b, d)), s)
            out[f"{tag}, output-aware"] = lambda w, b=saving, d=diag: (fitted(w, s := steps(w, b, d)), s)

    for groups, tag in ((1, "per-tensor"), (4, "grouped 4"), (16, "grouped 16")):
        out[f"{tag}, round-to-nearest"] = lambda w, g=groups: (rtn(w, s := grouped_steps(w.rows, g)), s)
        out[f"{tag}, output-aware"] = lambda w, g=groups: (fitted(w, s := grouped_steps(w.rows, g)), s)

    def clip(w: W) -> tuple[np.ndarray, np.ndarray]:
        alphas = np.asarray(gptq.ALPHAS)
        errs = np.stack([gptq.output_error(w.rows - rtn(w, w.s0 * a) * (w.s0 * a)[:, None], w.h) for a in alphas])
        s = w.s0 * alphas[np.argmin(errs, axis=0)]
        return rtn(w, s), s

    out["clip by output error, round-to-nearest"] = clip
    for lam in LAMS:
        out[f"entropy-gptq lam={lam:g}"] = lambda w, lam=lam: (entropy_gptq(w, w.s0, lam), w.s0)
        out[f"steps 2 + entropy-gptq lam={lam:g}"] = lambda w, lam=lam: (
            entropy_gptq(w, s := steps(w, 2.0, False), lam), s)
    return out


def run(only: list[str] | None) -> None:
    ws = weights()
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name, family in families().items():
        if (only and not any(o in name for o in only)) or (name in results and not only):
            continue
        t = time.perf_counter()
        total = np.zeros(4)
        for w in ws:
            b, d_fit, d_tune = measure(w, *family(w))
            total += (b, d_fit * w.rows.size, d_tune * w.rows.size, w.rows.size)
        results[name] = {"bits": total[0] / total[3], "fit": total[1] / total[3], "tune": total[2] / total[3],
                         "values": int(total[3]), "seconds": time.perf_counter() - t}
        RESULTS.write_text(json.dumps(results, indent=1))
        r = results[name]
        print(f"{name}: {r['bits']:.3f} bits, D fit {r['fit']:.3e}, tune {r['tune']:.3e}", flush=True)


def report() -> str:
    results = json.loads(RESULTS.read_text())
    base = results["int8, round-to-nearest"]
    lines = ["| encoding (every weight) | bits a value | / int8 | layer error, fit lines | layer error, tune lines "
             "| tune / int8's |", "|---|---|---|---|---|---|"]
    for name, r in sorted(results.items(), key=lambda kv: -kv[1]["bits"]):
        lines.append(f"| {name} | {r['bits']:.3f} | {r['bits'] / base['bits']:.3f}x | {r['fit']:.3e} | "
                     f"{r['tune']:.3e} | {r['tune'] / base['tune']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap, _ = run_report_parser(__doc__)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args.only)
    else:
        print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
