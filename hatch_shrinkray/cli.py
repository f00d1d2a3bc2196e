"""``hatch-shrinkray`` / ``python -m hatch_shrinkray``: info, shrink, compare.

Every user mistake ends in one line on stderr and a non-zero exit; ``-v`` adds tracebacks.
In ``shrink`` a bad file is reported and the remaining files are still processed.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError, VerificationError
from hatch_shrinkray.options import DECODES, METHODS, SCHEMES, ShrinkOptions, VerifyOptions, option_errors

FLAG_NAMES = {"method": "--method", "min_elements": "--min-elements", "scheme": "--scheme",
              "levels": "--levels", "decode": "--decode", "block_size": "--block-size", "inputs": "--inputs",
              "dims": "--dim", "default_dim": "--default-dim", "samples": "--samples",
              "int_range": "--int-range", "max_rel_l2": "--max-rel-l2", "min_cosine": "--min-cosine",
              "min_top1": "--min-top1", "budget_rel_l2": "--budget-rel-l2", "budget_cosine": "--budget-cosine",
              "budget_agreement": "--budget-agreement", "runtimes": "--runtime"}


def _verify_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verification")
    g.add_argument("--inputs", type=Path, help="a .npz of sample inputs (arrays named after the graph inputs)")
    g.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="value for a symbolic dimension (repeatable)")
    g.add_argument("--default-dim", type=int, default=1, help="value for other symbolic dimensions (default 1)")
    g.add_argument("--samples", type=int, default=2, help="generated samples (default 2)")
    g.add_argument("--int-range", type=int, nargs=2, default=[0, 64], metavar=("LOW", "HIGH"),
                   help="range of generated integer inputs, [LOW, HIGH) (default 0 64)")
    d = VerifyOptions()
    g.add_argument("--max-rel-l2", type=float, default=d.max_rel_l2, help=f"default {d.max_rel_l2}")
    g.add_argument("--min-cosine", type=float, default=d.min_cosine, help=f"default {d.min_cosine}")
    g.add_argument("--min-top1", type=float, default=d.min_top1,
                   help=f"minimum top-1 agreement for class-score outputs (default {d.min_top1})")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hatch-shrinkray",
        description="Shrink ONNX models (weights-only quantization), verified with onnxruntime.")
    p.add_argument("-v", "--verbose", action="store_true", help="show tracebacks and per-tensor details")
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="show a model's weights and how much of the file they are")
    info.add_argument("model", type=Path)
    info.add_argument("--min-elements", type=int, default=16384)
    info.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser("shrink", help="shrink models into an output directory")
    s.add_argument("models", nargs="+", help="model files (glob patterns allowed)")
    s.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    s.add_argument("--method", default="int8", help=f"one of {', '.join(METHODS)} (default int8)")
    s.add_argument("--min-elements", type=int, default=16384, help="smallest tensor to encode (default 16384)")
    s.add_argument("--exclude-tensor", action="append", default=[], metavar="GLOB",
                   help="leave tensors whose name matches (repeatable)")
    s.add_argument("--exclude-op", action="append", default=[], metavar="OP",
                   help="leave tensors consumed by this op type (repeatable)")
    s.add_argument("--no-dedup", action="store_true", help="do not merge identical tensors first")
    s.add_argument("--scheme", default="symmetric", help=f"int8 scheme: {', '.join(SCHEMES)}")
    s.add_argument("--levels", type=int, default=256, help="float-levels: levels per channel (2..65536)")
    s.add_argument("--decode", default="float",
                   help=f"int8 decode: {', '.join(DECODES)} (fast = DequantizeLinear before MatMul, int8 activations)")
    s.add_argument("--block-size", type=int, default=32, help="int4 block size (default 32)")
    s.add_argument("--runtime", action="append", default=[], metavar="TARGET",
                   help="where the model will run: onnxruntime>=X.Y, web or openvino (repeatable); methods "
                        "those runtimes cannot load, or would decode per inference, are refused")
    b = ShrinkOptions()
    s.add_argument("--budget-rel-l2", type=float, default=b.budget_rel_l2,
                   help=f"auto: largest output relative L2 on the verification inputs (default {b.budget_rel_l2})")
    s.add_argument("--budget-cosine", type=float, default=b.budget_cosine,
                   help=f"auto: smallest output cosine (default {b.budget_cosine})")
    s.add_argument("--budget-agreement", type=float, default=b.budget_agreement,
                   help="auto: smallest share of unchanged argmax / >0.5 decisions "
                        f"(default {b.budget_agreement})")
    s.add_argument("--no-verify", action="store_true", help="skip output verification (not recommended)")
    s.add_argument("--force", action="store_true", help="overwrite existing outputs")
    s.add_argument("--sizes", action="store_true", help="also report gzip/zstd/brotli sizes")
    s.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON ('-' for stdout)")
    _verify_args(s)

    c = sub.add_parser("compare", help="verify a shrunk model against its original and compare sizes")
    c.add_argument("original", type=Path)
    c.add_argument("shrunk", type=Path)
    _verify_args(c)
    return p


def _verify_options(args: argparse.Namespace) -> VerifyOptions:
    dims = []
    for item in args.dim:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ShrinkrayError(f"--dim {item!r} must look like NAME=VALUE with an integer value")
        dims.append((name, int(value)))
    low, high = args.int_range
    return VerifyOptions(inputs=args.inputs, dims=tuple(dims), default_dim=args.default_dim, samples=args.samples,
                         int_low=low, int_high=high, max_rel_l2=args.max_rel_l2, min_cosine=args.min_cosine,
                         min_top1=args.min_top1)


def _shrink_options(args: argparse.Namespace) -> ShrinkOptions:
    opts = ShrinkOptions(method=args.method, min_elements=args.min_elements,
                         exclude_tensors=tuple(args.exclude_tensor), exclude_ops=tuple(args.exclude_op),
                         dedup=not args.no_dedup, scheme=args.scheme, levels=args.levels, decode=args.decode,
                         block_size=args.block_size, verify=None if args.no_verify else _verify_options(args),
                         budget_rel_l2=args.budget_rel_l2, budget_cosine=args.budget_cosine,
                         budget_agreement=args.budget_agreement, runtimes=tuple(args.runtime))
    errors = option_errors(opts, FLAG_NAMES)
    if errors:
        raise ShrinkrayError("; ".join(errors))
    return opts


def _expand(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    files: list[Path] = []
    unmatched: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            hits = sorted(glob.glob(pattern, recursive=True))
            if not hits:
                unmatched.append(pattern)
            files.extend(Path(h) for h in hits)
        else:
            files.append(Path(pattern))
    return files, unmatched


def cmd_shrink(args: argparse.Namespace) -> int:
    from hatch_shrinkray.engine import shrink
    from hatch_shrinkray.report import compressed_sizes, result_json, shrink_report

    options = _shrink_options(args)
    files, unmatched = _expand(args.models)
    failures = 0
    for pattern in unmatched:
        print(f"error: {pattern}: matches no file", file=sys.stderr)
        failures += 1
    reports = []
    seen: set[Path] = set()
    for src in files:
        dest = args.output / src.name
        try:
            if dest in seen:
                raise ShrinkrayError(f"another input also writes {dest}", path=str(src),
                                     hint="shrink same-named models into different directories")
            seen.add(dest)
            if dest.exists() and src.exists() and dest.resolve() == src.resolve():
                raise ShrinkrayError("the output would overwrite the source", path=str(src),
                                     hint="choose another output directory")
            if dest.exists() and not args.force:
                raise ShrinkrayError(f"output {dest} exists", path=str(src), hint="use --force to overwrite")
            result = shrink(src, dest, options)
        except ShrinkrayError as exc:
            failures += 1
            _error(exc, args.verbose)
            continue
        sizes = None
        if args.sizes:
            sizes = {"original": compressed_sizes([src, *_data_files(src)]),
                     "shrunk": compressed_sizes([dest, *(dest.parent / n for n in result.external_data)])}
        print(shrink_report(result, sizes, tensors=args.verbose))
        reports.append(result_json(result, sizes))
    if args.json is not None:
        text = json.dumps(reports, indent=2, sort_keys=True)
        if str(args.json) == "-":
            print(text)
        else:
            args.json.write_text(text + "\n")
    if failures:
        print(f"{failures} of {len(files) + len(unmatched)} inputs failed", file=sys.stderr)
    return 1 if failures else 0


def _data_files(model: Path) -> list[Path]:
    from hatch_shrinkray.onnxgraph.modelio import load_model

    return list(load_model(model).data_files)


def cmd_info(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from hatch_shrinkray.onnxgraph.inspect_model import model_info

    info = model_info(args.model)
    if args.json:
        print(json.dumps({**asdict(info), "weight_bytes": info.weight_bytes}, indent=2))
    else:
        print(info.render(args.min_elements))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from hatch_shrinkray.report import compressed_sizes, table
    from hatch_shrinkray.verification.runner import verify

    result = verify(args.original, args.shrunk, _verify_options(args))
    a = compressed_sizes([args.original, *_data_files(args.original)])
    b = compressed_sizes([args.shrunk, *_data_files(args.shrunk)])
    rows = [["", *a], ["original", *map(str, a.values())], ["shrunk", *map(str, b.values())],
            ["ratio", *(f"{100 * b[k] / a[k]:.1f}%" for k in a)]]
    print(table(rows))
    print(f"\nverification ({result.input_source}):\n{result.table()}")
    if not result.passed:
        print(f"error: {args.shrunk}: differs too much from {args.original}", file=sys.stderr)
        return 1
    return 0


def _error(exc: ShrinkrayError, verbose: bool) -> None:
    if verbose:
        traceback.print_exception(exc)
    text = str(exc)
    if isinstance(exc, VerificationError):
        print(f"error: {text}", file=sys.stderr)
    else:
        print(f"error: {text.splitlines()[0]}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"shrink": cmd_shrink, "info": cmd_info, "compare": cmd_compare}
    try:
        return commands[args.command](args)
    except ShrinkrayError as exc:
        _error(exc, args.verbose)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
