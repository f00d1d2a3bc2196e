"""``hatch-shrinkray compare``: verify a shrunk model against its original and compare sizes; inside a
project, on the table's inputs, judges and limits for the original (``cli.project``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hatch_shrinkray.cli.flags import Given, option_flags
from hatch_shrinkray.cli.output import need_brotli
from hatch_shrinkray.cli.project import project_of
from hatch_shrinkray.options import ShrinkOptions


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("compare", help="verify a shrunk model against its original and compare sizes")
    c.add_argument("original", type=Path)
    c.add_argument("shrunk", type=Path)
    c.add_argument("--sizes", action="store_true", help="measure the web size (brotli 11, ~0.3 MB/s; needs the "
                                                        "compress extra) instead of estimating it")
    option_flags(c, verify=True)


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.report import model_files, sizes_table, verification_report
    from hatch_shrinkray.sizes import measure
    from hatch_shrinkray.verification.runner import verify

    need_brotli(ShrinkOptions(), args.sizes)
    # Checked like `shrink` checks its input first, so a bad file gets the same one-line message.
    given = Given.of(args)
    options = given.options().verify
    assert options is not None  # compare has no --no-verify
    configured = project_of(args, given, [args.original], "compare").options.get(args.original)
    if configured is not None and configured.verify is not None:
        options = configured.verify  # the table's inputs, judges and limits, the flags given overriding them
    files = {path: model_files(path) for path in (args.original, args.shrunk)}
    result = verify(args.original, args.shrunk, options)
    print(sizes_table(measure(files[args.original], exact_web=args.sizes),
                      measure(files[args.shrunk], exact_web=args.sizes)))
    print("\n" + verification_report(result))
    if not result.passed:
        print(f"error: {args.shrunk}: differs too much from {args.original}", file=sys.stderr)
        return 1
    return 0
