"""Rate-aware int8 encodings on Magika, each measured alone: wheel-member bytes against answers on
files the fitting never saw (``rate_data``), round-to-nearest int8 beside every figure.

    python -m benchmarks.rate_data          # the three file sets (fit / tune / held-out), cached
    nice python -m benchmarks.rate run      # every encoding and lambda; results cached as JSON
    python -m benchmarks.rate report        # the DOWNLOAD.md table
    python -m benchmarks.rate fit-npz X.npz # the fit files, one per sample, as `auto`'s --inputs

Every variant stores int8 codes and one float32 scale per output channel (``Cast -> Mul``, as
method ``int8`` writes them); only the codes and scales differ:

* ``rtn``: round-to-nearest, max-abs scales (method ``int8``);
* ``per-tensor``: one scale per tensor (as onnx-shrink-ray's default, symmetric);
* ``step``: per channel a step ``f x`` the max-abs step (``STEPS``; f < 1 clips), chosen per
  channel to minimise ``D + lam * R``: D the layer's output error on the fit files (``dW H dW^T``
  relative to the layer's output energy), R the channel's codes' entropy in bits;
* ``clip``: the same with ``lam = 0`` over the steps <= 1 (clipping chosen by output error alone);
* ``gptq``: output-aware rounding as method ``int8`` fits it (``numerics.gptq.round_rows``);
* ``gptq-entropy``: GPTQ where each code is the nearest or its neighbour towards zero, whichever
  costs less output error plus ``lam`` times its bits (``-log2`` of the round-to-nearest codes'
  frequencies); on the ``step`` choice of the same ``lam`` (``step+gptq-entropy``) too.

An operating point (``lam``) is chosen on the tune files: the largest whose answers there are all
round-to-nearest int8's (output labels and model labels unchanged where int8's are, scores' rel-L2
at most int8's times ``SLACK``); the held-out files only report.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from benchmarks import corpus
from benchmarks.common import run_report_parser
from benchmarks.rate_data import RATE_DIR, Labeller, file_sets, fit_feeds
from hatch_shrinkray import ShrinkOptions
from hatch_shrinkray.bench import (
    FACTORS,
    STEP_SAVINGS,
    Int8Encoder,
    Layout,
    Planned,
    Quantized,
    StepTable,
    as_rows,
    calibrate,
    encode_weights,
    float_decode,
    from_rows,
    gptq,
    scale_shape,
    site_key,
    steps_saving,
)

STEPS = (0.85, 0.9, 0.95, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)
LAMS = (0.0, 3e-11, 1e-10, 2e-10, 4e-10, 7e-10, 1e-9, 2e-9)
WLAMS = (5e-11, 1e-10, 1.5e-10, 2e-10, 3e-10)
"""For the sensitivity-weighted D (output rel-L2^2 of the model's scores per bit)."""
WIDE = (1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 11.0, 16.0)
"""Step factors up to 16 (``numerics.steps.FACTORS`` stops at 4): coarser rungs than the level counts'."""
WIDE_SAVINGS = (3.0, 2.0, 1.5, 1.0, 0.5)
SLACK = 1.5
QMAX = 127
RESULTS = RATE_DIR / "magika_results.json"


@dataclass
class Weight:
    key: tuple[str, str]
    shape: tuple[int, ...]
    lay: Layout
    rows: np.ndarray
    """``[rows, K]`` float64."""
    h: np.ndarray
    """``[K, K]`` mean ``x x^T`` on the fit files."""
    energy: float
    """The layer's output energy ``sum W H W^T`` (D is relative to it)."""

    @property
    def axis(self) -> int:
        return 1 if self.lay.transpose else 0

    @property
    def s0(self) -> np.ndarray:
        amax = np.abs(self.rows).max(axis=1)
        return np.where(amax > 0, amax / QMAX, 1.0)


def load_weights(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> list[Weight]:
    cal = calibrate(model, ShrinkOptions(method="int8"), feeds, weights_as_feeds=False)
    assert cal is not None
    out = []
    for site in cal.sites:
        key = site_key(site)
        lay, mom = cal.lays[key], cal.moments.get(key)
        if lay is None or mom is None or mom[0].shape[0] != 1:
            continue
        rows = as_rows(site.array().astype(np.float64), lay)
        h = mom[0][0]
        energy = float(gptq.output_error(rows, h).sum())
        out.append(Weight(key, tuple(site.shape), lay, rows, h, energy))
    return out


def row_bits(codes: np.ndarray) -> np.ndarray:
    """Per row, its codes' empirical entropy times their count (bits)."""
    out = np.empty(codes.shape[0])
    for r, row in enumerate(codes.astype(np.int64)):
        counts = np.bincount(row + QMAX + 1)
        p = counts[counts > 0] / row.size
        out[r] = -(p * np.log2(p)).sum() * row.size
    return out


def rtn(w: Weight, scale: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(w.rows / scale[:, None]), -QMAX, QMAX)


def rel_error(w: Weight, codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per row, output error relative to the layer's output energy."""
    dec = (codes.astype(np.float32) * scale.astype(np.float32)[:, None]).astype(np.float64)
    return gptq.output_error(w.rows - dec, w.h) / w.energy


def step_choice(w: Weight, lam: float, steps: tuple[float, ...] = STEPS, weight: float = 1.0) -> np.ndarray:
    """Per row, the step factor minimising ``weight * D + lam * R``."""
    s0 = w.s0
    cost = []
    for f in steps:
        s = s0 * f
        q = rtn(w, s)
        cost.append(weight * rel_error(w, q, s) + lam * row_bits(q))
    return np.asarray(steps)[np.argmin(np.asarray(cost), axis=0)]


def grouped_steps(rows: np.ndarray, groups: int) -> np.ndarray:
    """Channels ranked by their max-abs value into ``groups`` equal groups, one step per group
    (the group's largest max-abs / 127): the per-tensor scale's few-codes channels, per group."""
    amax = np.abs(rows).max(axis=1)
    s = np.empty_like(amax)
    for part in np.array_split(np.argsort(amax, kind="stable"), groups):
        s[part] = max(float(amax[part].max()), 1e-30) / QMAX
    return s


def gptq_rows(w: Weight, scale: np.ndarray) -> np.ndarray:
    """GPTQ codes at these scales, kept per row only where they beat round-to-nearest's output error."""
    base = rtn(w, scale)
    codes = gptq.gptq(w.rows, scale, w.h, QMAX)
    better = rel_error(w, codes, scale) < rel_error(w, base, scale)
    return np.where(better[:, None], codes, base)


def sensitivities(model: onnx.ModelProto, weights: list[Weight], x: np.ndarray) -> dict[tuple[str, str], float]:
    """Per weight: the model's output error energy (squared rel-L2 of the scores on ``x``) per unit of
    the layer's relative output error, with that weight alone at twice the max-abs step."""
    ref = scores(model.SerializeToString(), x)
    out = {}
    for w in weights:
        s = 2 * w.s0
        q = rtn(w, s)
        got = scores(write(model, [w], {w.key: (q, s)}), x)
        out[w.key] = float((np.linalg.norm(got - ref) / np.linalg.norm(ref)) ** 2 / rel_error(w, q, s).sum())
    return out


GptqOrder = tuple[np.ndarray, np.ndarray, np.ndarray | None]
"""GPTQ's column order, its inverse, and the inverse factor of the damped ``H`` in that order."""


def gptq_order(h: np.ndarray) -> GptqOrder:
    """``numerics.gptq.gptq``'s damping and column order for ``H`` (the factor None where it has none)."""
    k = h.shape[0]
    h = h.copy()
    dead = np.diag(h) <= 0
    h[dead, dead] = 1.0
    diag = np.diag(h)
    h[np.diag_indices(k)] += gptq.DAMP * float(diag.mean())
    perm = np.argsort(-diag, kind="stable")
    return perm, np.argsort(perm, kind="stable"), gptq.inverse_factor(h[np.ix_(perm, perm)])


Choose = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A column's codes from ``x``, its compensated values in steps, and ``weight``, the output error
(relative to the layer's output energy) of one step of rounding error there."""


def gptq_choosing(rows: np.ndarray, scale: np.ndarray, order: GptqOrder, energy: float,
                  choose: Choose) -> np.ndarray:
    """GPTQ (``numerics.gptq.gptq``'s blocks, in ``order``) where ``choose`` picks each column's codes."""
    perm, inv_perm, u = order
    assert u is not None
    k = rows.shape[1]
    wt = np.ascontiguousarray(rows[:, perm].T)
    q = np.zeros_like(wt)
    # Output error of a column's rounding error e (in weight units) is e^2 / u_jj^2 (relative: / energy).
    for i1 in range(0, k, gptq.BLOCK):
        i2 = min(i1 + gptq.BLOCK, k)
        block = wt[i1:i2].copy()
        err = np.zeros_like(block)
        u1 = u[i1:i2, i1:i2]
        for j in range(i2 - i1):
            codes = choose(block[j] / scale, (scale / u1[j, j]) ** 2 / energy)
            q[i1 + j] = codes
            e = (block[j] - codes * scale) / u1[j, j]
            block[j + 1:] -= u1[j, j + 1:, None] * e
            err[j] = e
        wt[i2:] -= u[i1:i2, i2:].T @ err
    return np.ascontiguousarray(q[inv_perm].T)


def gptq_entropy(w: Weight, scale: np.ndarray, lam: float) -> np.ndarray:
    """GPTQ (``numerics.gptq.gptq``'s order, damping and blocks) where each code is the nearest or
    its neighbour towards zero, by output error + lam * bits (bits from the round-to-nearest codes'
    frequencies over the whole tensor)."""
    base = rtn(w, scale)
    counts = np.bincount((base.astype(np.int64) + QMAX).reshape(-1), minlength=2 * QMAX + 1) + 0.5
    bits = -np.log2(counts / counts.sum())

    def choose(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        near = np.clip(np.rint(x), -QMAX, QMAX)
        toward = near - np.sign(near)
        c_near = weight * (x - near) ** 2 + lam * bits[(near + QMAX).astype(np.int64)]
        c_tow = weight * (x - toward) ** 2 + lam * bits[(toward + QMAX).astype(np.int64)]
        return np.where(c_tow < c_near, toward, near)

    return gptq_choosing(w.rows, scale, gptq_order(w.h), w.energy, choose)


Plan = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
"""Per weight: codes ``[rows, K]`` and scales ``[rows]``."""


def write(model: onnx.ModelProto, weights: list[Weight], plan: Plan) -> bytes:
    """The model with every planned weight stored as these int8 codes and scales (``Cast -> Mul``)."""
    m = copy.deepcopy(model)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    decodes = {}
    for w in weights:
        codes, scale = plan[w.key]
        s32 = scale.astype(np.float32)
        dec_rows = (codes.astype(np.float32) * s32[:, None]).astype(np.float32)
        shp = scale_shape(w.shape, w.axis)
        q = Quantized(from_rows(codes, w.lay, w.shape).astype(np.int8), s32.reshape(shp), None,
                      from_rows(dec_rows, w.lay, w.shape), None, None)
        decodes[w.key] = float_decode(q, np.dtype(np.float32), opset, "int8 rate")
    enc = Planned(decodes, Int8Encoder(), fallback_float32=True)
    encode_weights(m, enc, ShrinkOptions(method="int8"), select=enc.select)
    return m.SerializeToString()


def wheel(data: bytes) -> int:
    d = zlib.compressobj(6, zlib.DEFLATED, -15)
    return len(d.compress(data)) + len(d.flush())


def scores(data: bytes, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(["target_label"], {"bytes": x[i:i + 256]})[0] for i in range(0, len(x), 256)])


def judge(ref: np.ndarray, got: np.ndarray, lab: Labeller) -> dict[str, float]:
    rdl, rout = lab.labels(ref)
    gdl, gout = lab.labels(got)
    return {"out_changed": sum(a != b for a, b in zip(rout, gout, strict=True)),
            "dl_changed": sum(a != b for a, b in zip(rdl, gdl, strict=True)),
            "rel_l2": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
            "files": len(ref)}


def variants(weights: list[Weight], sens: dict[tuple[str, str], float]) -> dict[str, Callable[[], Plan]]:
    out: dict[str, Callable[[], Plan]] = {}
    out["rtn"] = lambda: {w.key: (rtn(w, w.s0), w.s0) for w in weights}

    def per_tensor() -> Plan:
        plan = {}
        for w in weights:
            s = np.full(w.rows.shape[0], np.abs(w.rows).max() / QMAX)
            plan[w.key] = (rtn(w, s), s)
        return plan

    out["per-tensor"] = per_tensor

    def grouped(groups: int) -> Plan:
        plan = {}
        for w in weights:
            s = grouped_steps(w.rows, groups)
            plan[w.key] = (rtn(w, s), s)
        return plan

    for groups in (4, 16, 64):
        out[f"grouped scales, {groups} groups"] = lambda g=groups: grouped(g)

    def gptq_plain() -> Plan:
        plan = {}
        for w in weights:
            r = gptq.round_rows(w.rows, w.s0, w.h)
            plan[w.key] = (r.codes, r.scale)
        return plan

    out["gptq"] = gptq_plain

    def clip() -> Plan:
        plan = {}
        for w in weights:
            s = w.s0 * step_choice(w, 0.0, tuple(f for f in STEPS if f <= 1.0))
            plan[w.key] = (rtn(w, s), s)
        return plan

    out["clip"] = clip
    for lam in LAMS[1:]:
        def step(lam: float = lam) -> Plan:
            plan = {}
            for w in weights:
                s = w.s0 * step_choice(w, lam)
                plan[w.key] = (rtn(w, s), s)
            return plan

        def ent(lam: float = lam) -> Plan:
            return {w.key: (gptq_entropy(w, w.s0, lam), w.s0) for w in weights}

        def both(lam: float = lam) -> Plan:
            plan = {}
            for w in weights:
                s = w.s0 * step_choice(w, lam)
                plan[w.key] = (gptq_entropy(w, s, lam), s)
            return plan

        def wstep(lam: float = lam, fit: bool = False) -> Plan:
            plan = {}
            for w in weights:
                s = w.s0 * step_choice(w, lam, weight=sens[w.key])
                plan[w.key] = (gptq_rows(w, s) if fit else rtn(w, s), s)
            return plan

        out[f"step lam={lam:g}"] = step
        out[f"gptq-entropy lam={lam:g}"] = ent
        out[f"step+gptq-entropy lam={lam:g}"] = both
    largest = max(weights, key=lambda w: w.rows.size)

    def rung(saving: float, fit: bool = True, only: Weight | None = None, factors: tuple[float, ...] = FACTORS) -> Plan:
        plan = {}
        for w in weights:
            s = steps_saving(StepTable(w.rows, w.s0, w.h, factors), saving) if only in (None, w) else None
            s = w.s0 if s is None else s
            plan[w.key] = (gptq_rows(w, s) if fit else rtn(w, s), s)
        return plan

    for saving in STEP_SAVINGS:
        out[f"auto's rung int8-steps{saving:g}, every weight"] = lambda s=saving: rung(s)
        out[f"auto's rung int8-steps{saving:g}, round-to-nearest, every weight"] = lambda s=saving: rung(s, False)
        out[f"auto's rung int8-steps{saving:g}, the largest weight only"] = lambda s=saving: rung(s, True, largest)
    for saving in WIDE_SAVINGS:
        tag = f"steps {saving:g} with factors 1-16"
        out[f"{tag}, every weight"] = lambda s=saving: rung(s, factors=WIDE)
        out[f"{tag}, round-to-nearest, every weight"] = lambda s=saving: rung(s, False, factors=WIDE)
        out[f"{tag}, the largest weight only"] = lambda s=saving: rung(s, True, largest, WIDE)
    for lam in WLAMS:
        out[f"weighted step lam={lam:g}"] = lambda lam=lam: wstep(lam)
        out[f"weighted step+gptq lam={lam:g}"] = lambda lam=lam: wstep(lam, True)
    return out


def run(only: list[str] | None) -> None:
    sets = file_sets()
    model = onnx.load(str(corpus.model_path("magika")))
    t0 = time.perf_counter()
    weights = load_weights(model, fit_feeds(sets))
    print(f"{len(weights)} weights, moments in {time.perf_counter() - t0:.1f} s", flush=True)
    sens = sensitivities(model, weights, sets["fit"].x)
    print("sensitivities", sens, flush=True)
    lab = Labeller()
    original = model.SerializeToString()
    refs = {n: scores(original, s.x) for n, s in sets.items()}
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["original"] = {"wheel": wheel(original), "files": {n: len(s.x) for n, s in sets.items()}}
    for name, make in variants(weights, sens).items():
        if only and not any(o in name for o in only):
            continue
        if name in results and not only:
            continue
        t = time.perf_counter()
        data = write(model, weights, make())
        row: dict[str, Any] = {"wheel": wheel(data), "raw": len(data), "seconds": time.perf_counter() - t}
        for n, s in sets.items():
            row[n] = judge(refs[n], scores(data, s.x), lab)
        results[name] = row
        RESULTS.write_text(json.dumps(results, indent=1))
        print(f"{name}: wheel {row['wheel'] / 1e6:.4f} MB, tune {row['tune']}, held-out {row['held_out']}",
              flush=True)


def judge_files(files: list[Path]) -> None:
    """Each model file's wheel member and answers against the original's, beside round-to-nearest
    int8's figures from ``run``."""
    sets = file_sets()
    lab = Labeller()
    original = onnx.load(str(corpus.model_path("magika"))).SerializeToString()
    base = json.loads(RESULTS.read_text())["rtn"]
    for path in files:
        data = path.read_bytes()
        row = {n: judge(scores(original, sets[n].x), scores(data, sets[n].x), lab) for n in ("tune", "held_out")}
        print(f"{path}: wheel {wheel(data) / 1e6:.4f} MB ({wheel(data) / base['wheel']:.3f}x int8); tune "
              f"{_cell(row['tune'], base['tune'])}; held-out {_cell(row['held_out'], base['held_out'])}", flush=True)


def fit_npz(out: Path) -> None:
    """The fit set as a ``.npz`` of one file per sample (``--inputs`` of ``hatch-shrinkray shrink``):
    80 units, so ``auto`` fits on 40 and its guard judges the other 40, the evidence a recording of
    one file per call gives, without the recording's run."""
    x = file_sets()["fit"].x
    np.savez(out, bytes=x[:, None, :])
    print(f"{out}: {len(x)} samples of one file each")


def _cell(r: dict[str, Any], base: dict[str, Any]) -> str:
    return (f"{r['out_changed']} / {r['dl_changed']} / {r['rel_l2']:.4f} "
            f"(int8: {base['out_changed']} / {base['dl_changed']} / {base['rel_l2']:.4f})")


def chosen(results: dict[str, Any], family: str) -> str | None:
    """The family's variant with the most lam whose tune-set answers are round-to-nearest int8's
    (no more output or model labels changed, scores' rel-L2 at most ``SLACK`` times int8's)."""
    base = results["rtn"]["tune"]
    ok = [k for k, r in results.items() if k.startswith(f"{family} lam=")
          and r["tune"]["out_changed"] <= base["out_changed"] and r["tune"]["dl_changed"] <= base["dl_changed"]
          and r["tune"]["rel_l2"] <= SLACK * base["rel_l2"]]
    return max(ok, key=lambda k: float(k.split("=")[1]), default=None)


def report() -> str:
    results = json.loads(RESULTS.read_text())
    files = results["original"]["files"]
    rtn_wheel = results["rtn"]["wheel"]
    lines = [f"Files: {files['fit']} fit (the recording's), {files['tune']} tune, {files['held_out']} held-out.",
             "", "| encoding | wheel MB | / int8 | tune: labels / model labels changed / rel-L2 | "
             "held-out: labels / model labels changed / rel-L2 | chosen on tune |", "|---|---|---|---|---|---|"]
    picks = {chosen(results, f) for f in ("step", "gptq-entropy", "step+gptq-entropy", "weighted step",
                                          "weighted step+gptq")}
    for name, r in results.items():
        if name == "original":
            continue
        lines.append(f"| {name} | {r['wheel'] / 1e6:.4f} | {r['wheel'] / rtn_wheel:.3f}x | "
                     f"{_cell(r['tune'], results['rtn']['tune'])} | {_cell(r['held_out'], results['rtn']['held_out'])}"
                     f" | {'yes' if name in picks else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap, sub = run_report_parser(__doc__)
    j = sub.add_parser("judge", help="wheel bytes and tune / held-out answers of model files (e.g. auto's)")
    j.add_argument("files", nargs="+", type=Path)
    f = sub.add_parser("fit-npz", help="the fit files as a .npz of one file per sample, for `--inputs`")
    f.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args.only)
    elif args.cmd == "fit-npz":
        fit_npz(args.out)
    elif args.cmd == "judge":
        judge_files(args.files)
    else:
        print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
