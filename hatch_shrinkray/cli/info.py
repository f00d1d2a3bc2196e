"""``hatch-shrinkray info``: a model's weights and how much of the file they are."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hatch_shrinkray.cli.flags import FLAG_NAMES
from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.option_table import option_errors
from hatch_shrinkray.options import ShrinkOptions


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    info = command(sub, "info", help="show a model's weights and how much of the file they are",
                   description="Show a model's weights and how much of the file they are.")
    info.add_argument("model", type=Path, metavar="MODEL", help="the model file")
    info.add_argument("--min-elements", type=int, default=ShrinkOptions.min_elements, metavar="N",
                      help="smallest tensor the table counts as one to encode (default %(default)s, as shrink)")
    info.common(info.add_argument("--json", action="store_true", help="print JSON"))


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from hatch_shrinkray.onnxgraph.inspect_model import model_info

    errors = option_errors(ShrinkOptions(min_elements=args.min_elements), FLAG_NAMES)
    if errors:
        raise ShrinkrayError("; ".join(errors))
    info = model_info(args.model)
    if args.json:
        print(json.dumps({**asdict(info), "weight_bytes": info.weight_bytes}, indent=2))
    else:
        print(info.render(args.min_elements))
    return 0
