"""The kernels behind the memory target's choices: per-inference CPU time, resident memory and output error of
each packed form against float32, on synthetic MatMul and Conv models, PP-OCR rec and MiniLM.

    python -m benchmarks.kernels run [--seconds 2.5] [--rounds 3] [--no-real]   # -> .cache/kernels/results.json
    python -m benchmarks.kernels report                                          # -> benchmarks/KERNELS.md

Models (``onnx.helper``, seeded): per MatMul shape K x N, ``REPEAT`` weights of that shape applied to one input
``[1, tokens, K]`` and summed (weights Gaussian with a log-normal per-output-channel scale and rare outliers,
activations Gaussian with a log-normal per-channel scale); per Conv shape a stack of three convolutions with
``Relu``. Forms: float32 ``MatMul``; ``com.microsoft.MatMulNBits`` 8-bit with ``accuracy_level`` unset (float
activations) and 4 (int8 activations), blocks of 32 and 128; 4-bit blocks of 32, float activations; all written by
onnxruntime's own ``MatMulNBitsQuantizer`` (symmetric: the codes ``hatch_shrinkray``'s encoder writes, the
product's ``int4`` calls it). Conv: float32 ``Conv`` against ``quantize_dynamic``'s ``ConvInteger``, on the
synthetic stacks and on the corpus' PP-OCRv4 and PP-OCRv6 text recognisers (``corpus.model_path``). On MiniLM
(``corpus.model_path("minilm")``, when cached or exportable) the same quantizer over every MatMul, and the
product's own files (``hatch-shrinkray shrink --method int8``, with and without ``--target memory``).

Time: ``common.interleaved_latency`` (one intra-op thread, thread CPU time, runs alternating with the float32
model in one process, median of per-pair ratios). Memory: ``hatch_shrinkray.bench.footprint``, the build's own
probe (a fresh process per model; resident memory the session adds once created), ``--rounds`` rounds
interleaved over the forms, medians. Error: relative L2 of the output against the float32 model's on the same
seeded activations (MiniLM: 32 tokenized sentences, its last hidden state).
"""

from __future__ import annotations

import copy
import json
import logging
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import CACHE_DIR, interleaved_latency, make_session, output_diff, run_report_parser

BENCH_DIR = Path(__file__).resolve().parent
OUT = CACHE_DIR / "kernels"
REPORT = BENCH_DIR / "KERNELS.md"
REPEAT = 6
"""Weights per MatMul model: enough that the MatMuls dominate a run and memory reads clearly."""
MATMUL_SHAPES = ((384, 384), (384, 1536), (1536, 384))
"""K x N of a BERT-small layer (MiniLM's): attention projections, the MLP's up and down."""
TOKENS = (1, 16)
CONV_SHAPES = {"Conv 3x3 stack": (32, 64, 56, 3), "Conv 1x1 stack": (128, 256, 28, 1)}
"""name -> (input channels, width, spatial size, kernel): three convolutions c -> w -> w -> w."""
REAL_CONVS = {"ppocrv4_rec": "PP-OCRv4 rec", "ppocrv6_rec": "PP-OCRv6 rec"}


@dataclass(frozen=True)
class Form:
    name: str
    bits: int = 0
    block: int = 0
    accuracy_level: int | None = None


MATMUL_FORMS = (
    Form("MatMulNBits 8-bit float activations, blocks of 32", 8, 32),
    Form("MatMulNBits 8-bit float activations, blocks of 128", 8, 128),
    Form("MatMulNBits 8-bit accuracy level 4 (int8 activations), blocks of 32", 8, 32, 4),
    Form("MatMulNBits 8-bit accuracy level 4 (int8 activations), blocks of 128", 8, 128, 4),
    Form("MatMulNBits 4-bit float activations, blocks of 32", 4, 32),
)
FLOAT = "float32"
CONV_INTEGER = "ConvInteger (quantize_dynamic)"
PRODUCT = {"int8 (round-to-nearest, Cast -> Mul)": ["--method", "int8", "--no-verify"],
           "int8, target memory (MatMulNBits 8-bit blocks of 32, accuracy level 4)":
               ["--method", "int8", "--target", "memory", "--no-verify"]}
"""The product's own files of MiniLM: round-to-nearest int8 (the do-no-harm floor) and the memory target's."""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- models


def _weight(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    w = rng.standard_normal((k, n)) * np.exp(0.35 * rng.standard_normal(n)) / np.sqrt(k)
    out = rng.random(w.shape) < 5e-4
    w[out] *= rng.uniform(4, 10, int(out.sum()))
    return w.astype(np.float32)


def _save(model: Any, path: Path) -> Path:
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def matmul_model(k: int, n: int, seed: int = 0) -> Any:
    """``REPEAT`` MatMuls of one K x N shape on one input ``[1, tokens, K]``, summed."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(_weight(rng, k, n), f"w{i}") for i in range(REPEAT)]
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"]) for i in range(REPEAT)]
    nodes.append(helper.make_node("Sum", [f"m{i}" for i in range(REPEAT)], ["y"]))
    graph = helper.make_graph(nodes, "matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "t", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "t", n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_model(c: int, width: int, size: int, kernel: int, seed: int = 0) -> Any:
    """Three convolutions ``c -> width -> width -> width`` with Relu, same padding, on ``[1, c, size, size]``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, prev, cin = [], [], "x", c
    for i in range(3):
        w = rng.standard_normal((width, cin, kernel, kernel)) * np.sqrt(2 / (cin * kernel * kernel))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((0.01 * rng.standard_normal(width)).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[kernel // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev, cin = f"r{i}", width
    graph = helper.make_graph(nodes, "convs",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, width, size, size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_nbits(model: Any, form: Form) -> Any:
    """``model`` with every MatMul weight as onnxruntime's quantizer writes it (on a copy: it edits in place)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quant = MatMulNBitsQuantizer(copy.deepcopy(model), bits=form.bits, block_size=form.block, is_symmetric=True,
                                 accuracy_level=form.accuracy_level)
    quant.process()
    out = quant.model.model
    attrs = [{a.name: a.i for a in n.attribute} for n in out.graph.node if n.op_type == "MatMulNBits"]
    want = {"bits": form.bits, "block_size": form.block, "accuracy_level": form.accuracy_level or 0}
    if not attrs or any({k: a.get(k, 0) for k in want} != want for a in attrs):
        raise RuntimeError(f"the quantizer did not write {form.name}: {attrs[:1]}")
    return out


def conv_integer(src: Path, dest: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dest), op_types_to_quantize=["Conv"], weight_type=QuantType.QUInt8)
    if "ConvInteger" not in {n.op_type for n in _load(dest).graph.node}:
        raise RuntimeError(f"quantize_dynamic wrote no ConvInteger into {dest}")
    return dest


def _load(path: Path) -> Any:
    import onnx

    return onnx.load(str(path))


def activations(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    """Gaussian, each channel (last axis for MatMul inputs, axis 1 for images) scaled log-normally."""
    rng = np.random.default_rng(seed)
    axis = 1 if len(shape) == 4 else len(shape) - 1
    scale = np.exp(0.5 * rng.standard_normal(shape[axis])).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- measuring


def _footprints(paths: dict[str, Path], feed: dict[str, np.ndarray], rounds: int) -> dict[str, float]:
    """Median resident memory (KB) each model's session adds, rounds interleaved, each starting at another form."""
    from hatch_shrinkray.bench import footprint

    names = list(paths)
    seen: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            seen[n].append(footprint(str(paths[n]), feed, runs=3).session_kb)
    return {n: statistics.median(v) for n, v in seen.items()}


def _measure(group: str, paths: dict[str, Path], feeds: dict[str, dict[str, np.ndarray]], seconds: float,
             rounds: int) -> list[dict[str, Any]]:
    """One row per (feed, form) of ``paths`` (the first is the float32 reference): time, memory, error."""
    base = make_session(paths[FLOAT])
    memory = _footprints(paths, next(iter(feeds.values())), rounds)
    rows = []
    for feed_name, feed in feeds.items():
        ref = base.run(None, feed)
        for name, path in paths.items():
            sess = make_session(path)
            lat = interleaved_latency(base, sess, feed, budget_s=seconds)
            diff = output_diff(ref, sess.run(None, feed))
            rows.append({"group": group, "feed": feed_name, "form": name, "time": lat.ratio, "base_ms": lat.base_ms,
                         "ms": lat.variant_ms, "runs": lat.runs, "memory": memory[name] / memory[FLOAT],
                         "kb": memory[name], "rel_l2": diff.rel_l2, "file_mb": path.stat().st_size / 1e6})
            log(f"{group} {feed_name} {name}: x{lat.ratio:.2f} time, x{memory[name] / memory[FLOAT]:.2f} memory, "
                f"rel-L2 {diff.rel_l2:.1e}")
    return rows


def run_matmuls(shapes: tuple[tuple[int, int], ...], tokens: tuple[int, ...], seconds: float, rounds: int,
                work: Path) -> list[dict[str, Any]]:
    rows = []
    for k, n in shapes:
        model = matmul_model(k, n)
        paths = {FLOAT: _save(model, work / f"mm{k}x{n}" / "float32.onnx")}
        for i, form in enumerate(MATMUL_FORMS):
            paths[form.name] = _save(matmul_nbits(model, form), work / f"mm{k}x{n}" / f"form{i}.onnx")
        feeds = {f"{t} token{'s' if t > 1 else ''}": {"x": activations((1, t, k))} for t in tokens}
        rows += _measure(f"MatMul {k}x{n}", paths, feeds, seconds, rounds)
    return rows


def run_convs(shapes: dict[str, tuple[int, int, int, int]], seconds: float, rounds: int,
              work: Path) -> list[dict[str, Any]]:
    rows = []
    for name, (c, width, size, kernel) in shapes.items():
        src = _save(conv_model(c, width, size, kernel), work / name.replace(" ", "_") / "float32.onnx")
        paths = {FLOAT: src, CONV_INTEGER: conv_integer(src, src.with_name("convinteger.onnx"))}
        rows += _measure(name, paths, {"1 image": {"x": activations((1, c, size, size))}}, seconds, rounds)
    return rows


def run_real_conv(key: str, seconds: float, rounds: int, work: Path) -> list[dict[str, Any]]:
    """``ConvInteger`` on one of the corpus' text recognisers (convolutions, then attention), one seeded line image."""
    from benchmarks import corpus

    src = corpus.model_path(key)
    (work / key).mkdir(parents=True, exist_ok=True)
    paths = {FLOAT: src, CONV_INTEGER: conv_integer(src, work / key / "convinteger.onnx")}
    feed = {make_session(src).get_inputs()[0].name: activations((1, 3, 48, 320))}
    return _measure(REAL_CONVS[key], paths, {"1 line": feed}, seconds, rounds)


def minilm_feed() -> dict[str, np.ndarray]:
    """32 sentences of ``curve_calib`` (no task's test item), tokenized and padded to one length."""
    from tokenizers import Tokenizer

    from benchmarks import corpus
    from benchmarks.curve_calib import MINILM_SENTENCES

    tok = Tokenizer.from_file(str(corpus.minilm_dir() / "tokenizer.json"))
    tok.enable_padding()
    enc = tok.encode_batch(MINILM_SENTENCES)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.zeros_like(ids)}


def run_minilm(seconds: float, rounds: int, work: Path) -> list[dict[str, Any]]:
    from benchmarks import corpus
    from benchmarks.download import OUT as SHRINK_CWD
    from benchmarks.download import shrink

    SHRINK_CWD.mkdir(parents=True, exist_ok=True)
    src = corpus.model_path("minilm")
    model = _load(src)
    paths = {FLOAT: src}
    for i, form in enumerate(MATMUL_FORMS):
        if form.bits == 8:
            paths[form.name + " (every MatMul)"] = _save(matmul_nbits(model, form), work / "minilm" / f"form{i}.onnx")
    for name, args in PRODUCT.items():
        paths[name] = Path(shrink(src, name, args, Path("-"), work / "minilm")["file"])
    feed = minilm_feed()
    names = {i.name for i in make_session(src).get_inputs()}
    return _measure("MiniLM", paths, {"32 sentences": {k: v for k, v in feed.items() if k in names}}, seconds, rounds)


def run(args: Any) -> None:
    import onnxruntime

    logging.getLogger().setLevel(logging.WARNING)  # the quantizers log every tensor at INFO
    work = Path(args.out) if args.out else OUT
    shapes = ((64, 64),) if args.tiny else MATMUL_SHAPES
    convs = {"Conv 3x3 stack": (8, 8, 8, 3)} if args.tiny else CONV_SHAPES
    t0 = time.perf_counter()
    rows = run_matmuls(shapes, TOKENS, args.seconds, args.rounds, work)
    rows += run_convs(convs, args.seconds, args.rounds, work)
    real: dict[str, str] = {}
    if not args.no_real and not args.tiny:
        jobs = {name: (lambda key=key: run_real_conv(key, args.seconds, args.rounds, work / "real"))
                for key, name in REAL_CONVS.items()}
        for name, job in {**jobs, "MiniLM": lambda: run_minilm(args.seconds, args.rounds, work)}.items():
            try:
                rows += job()
                real[name] = "measured"
            except Exception as exc:  # the other rows stand alone; the report says why
                real[name] = f"skipped: {' '.join(str(exc).split())[:200]}"
                log(f"{name} {real[name]}")
    results = {"command": " ".join(["python -m benchmarks.kernels", *sys.argv[1:]]), "rows": rows, "real": real,
               "onnxruntime": onnxruntime.__version__, "machine": _machine(), "seconds": time.perf_counter() - t0,
               "commit": _commit()}
    work.mkdir(parents=True, exist_ok=True)
    tmp = work / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(work / "results.json")
    log(f"{len(rows)} rows in {results['seconds']:.0f} s -> {work / 'results.json'}")


def _machine() -> str:
    cpu = ""
    if Path("/proc/cpuinfo").exists():
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    import os

    return f"{cpu or platform.processor()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def _commit() -> str:
    proc = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True, text=True,
                          cwd=BENCH_DIR, check=False)
    return proc.stdout.strip() or "unknown"


# ---------------------------------------------------------------- report


def _range(values: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(values), max(values)
    return f"{fmt.format(lo)}x" if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}x"


def report_text(results: dict[str, Any]) -> str:
    rows = results["rows"]
    lines = ["# Kernels: time, memory and error of each packed form against float32\n",
             "```bash", results["command"], "python -m benchmarks.kernels report", "```\n",
             f"onnxruntime {results['onnxruntime']}, one intra-op thread; {results['machine']}, shared with other "
             f"jobs (so time is the calling thread's CPU time); commit {results['commit']}; "
             f"the run took {results['seconds']:.0f} s. "
             + ("".join(f"{k}: {v}. " for k, v in results["real"].items()) or "Real models: not run. ") + "\n",
             "*time*: median over interleaved pairs of CPU time per inference, the form / float32 in the same "
             "process; *memory*: resident memory the session adds once created (the build's own probe, fresh "
             "processes, median of rounds), the form / float32; *rel-L2*: relative L2 error of the output "
             "against float32's on the same seeded activations (MiniLM: 32 tokenized sentences). The 8-bit forms "
             "with float activations leave `accuracy_level` unset; accuracy level 4 quantizes the activations to "
             "int8 per block inside the kernel. Weights written by onnxruntime's `MatMulNBitsQuantizer` "
             "(symmetric), `ConvInteger` by `quantize_dynamic`. On this shared machine two runs of the driver "
             "(2.5 s and 6 s per pair) moved the time ratios by up to about 15%, most on the 8-bit rows with float "
             "activations; memory and rel-L2 repeat exactly.\n",
             "MiniLM's *(every MatMul)* rows quantize its MatMul weights only (the embedding tables stay float32); "
             "its *int8* rows are the product's own files, every weight quantized (`hatch-shrinkray shrink "
             "--method int8 --no-verify`, with `--target memory` for the MatMulNBits one). PP-OCR rec's input is a "
             "seeded random image, not a text line: its time and memory stand, its error says nothing about "
             "lines.\n"]
    groups = list(dict.fromkeys(r["group"] for r in rows))
    lines += ["## Summary over the synthetic shapes\n", "| form | time | memory | rel-L2 |", "|---|---|---|---|"]
    real = {"MiniLM", *REAL_CONVS.values()}
    synthetic = [r for r in rows if r["group"] not in real and r["form"] != FLOAT]
    for form in dict.fromkeys(r["form"] for r in synthetic):
        mine = [r for r in synthetic if r["form"] == form]
        by_feed = {f: [r["time"] for r in mine if r["feed"] == f] for f in dict.fromkeys(r["feed"] for r in mine)}
        time_cells = "; ".join(f"{_range(v)} at {f}" for f, v in by_feed.items())
        errs = [r["rel_l2"] for r in mine]
        err = f"{min(errs):.1e}" if f"{min(errs):.1e}" == f"{max(errs):.1e}" else f"{min(errs):.1e}-{max(errs):.1e}"
        lines.append(f"| {form} | {time_cells} | {_range([r['memory'] for r in mine])} | {err} |")
    for group in groups:
        lines += [f"\n## {group}\n", "| input | form | time | float32 ms | memory | rel-L2 | file MB |",
                  "|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["group"] == group and r["form"] != FLOAT):
            lines.append(f"| {r['feed']} | {r['form']} | {r['time']:.2f}x | {r['base_ms']:.3f} | {r['memory']:.2f}x | "
                         f"{r['rel_l2']:.1e} | {r['file_mb']:.2f} |")
        base = next(r for r in rows if r["group"] == group and r["form"] == FLOAT)
        lines.append(f"\nfloat32: {base['kb'] / 1024:.1f} MiB resident after session creation, "
                     f"file {base['file_mb']:.2f} MB.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap, sub = run_report_parser(__doc__)
    for name, p in sub.choices.items():
        p.add_argument("--out", help=f"working folder (default {OUT})")
        if name == "run":
            p.add_argument("--seconds", type=float, default=2.5, help="interleaving budget per form and input")
            p.add_argument("--rounds", type=int, default=3, help="fresh-process memory rounds per form")
            p.add_argument("--no-real", action="store_true")
            p.add_argument("--tiny", action="store_true", help="one 64x64 MatMul and a tiny Conv (the smoke test)")
        else:
            p.add_argument("--report", help=f"where the report goes (default {REPORT})")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args)
    else:
        work = Path(args.out) if args.out else OUT
        text = report_text(json.loads((work / "results.json").read_text()))
        dest = Path(args.report) if args.report else REPORT
        tmp = dest.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
