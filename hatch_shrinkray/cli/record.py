"""``hatch-shrinkray record``: run a command and record the inputs its onnxruntime sessions see."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording.caps import MAX_BYTES, MAX_BYTES_FOR_UNITS, MAX_MEMORY, MAX_SAMPLES
from hatch_shrinkray.recording.mode import MODES, REPLACE


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = command(sub, "record", help="run a command and record the inputs its onnxruntime sessions see",
                description="Run COMMAND (tests, a demo, your CLI; Python subprocesses included) with "
                            "onnxruntime instrumented, and write a bounded sample of each model's inputs into "
                            "DIR, one .npz per model, for `inputs`: spread over the pytest tests that ran it "
                            "(else over its calls), whole streams for a recurrent model. Ends with a coverage "
                            "table, including the project's configured models that never ran, and the next "
                            "step. The command's exit code is passed through; when a recording is not "
                            "complete on disk (a full disk), record names what was lost and exits 1 if the "
                            "command did not fail.",
                usage="hatch-shrinkray record --output DIR [options] -- COMMAND [ARGS...]")
    r.takes_command = True
    r.common(r.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="recording directory"),
             r.add_argument("--mode", choices=MODES, default=REPLACE,
                            help="replace or add to a model's earlier recording in DIR (default %(default)s; add: the "
                                 "bounds apply to both runs' samples together)"))
    r.add_argument("--max-samples", type=int, default=MAX_SAMPLES, metavar="N",
                   help="samples kept per model; a stream counts as one (default %(default)s)")
    r.add_argument("--max-bytes", type=int, default=None, metavar="BYTES",
                   help=f"bound on the bytes each model's samples take in its file, compressed, headers "
                        f"included, hard when given; a feed over it alone is left out and counted (default "
                        f"{MAX_BYTES}, growing up to {MAX_BYTES_FOR_UNITS} when 16 independent units need "
                        "more)")
    r.add_argument("--max-memory", type=int, default=MAX_MEMORY, metavar="BYTES",
                   help="bound on the bytes each model's samples take once loaded (the arrays a build decodes); "
                        "a feed over a sixteenth of it alone is left out and counted (default %(default)s; "
                        "at most the 1 GB that reading a recording allows)")
    r.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to run, after --")


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.capture.run import project_root, record, summary
    from hatch_shrinkray.recording.caps import Caps
    from hatch_shrinkray.recording.npz import MAX_BYTES as MAX_DECODED
    from hatch_shrinkray.shipping.coverage import configured_models, named_by_content

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    problems = [f"{flag} must be {what}; got {value}" for flag, value, ok, what in (
        ("--max-samples", args.max_samples, args.max_samples >= 1, "a positive integer"),
        ("--max-bytes", args.max_bytes, args.max_bytes is None or args.max_bytes >= 1, "a positive integer"),
        ("--max-memory", args.max_memory, 1 <= args.max_memory <= MAX_DECODED,
         f"a positive integer of at most {MAX_DECODED} (what a recording may take once loaded)")) if not ok]
    if problems:
        raise ShrinkrayError("; ".join(problems))
    caps = Caps.given(args.max_samples, args.max_bytes, args.max_memory)
    root = project_root(args.output)
    code, done = record(command, args.output, caps, root, named_by_content(root), mode=args.mode)
    models, setup = configured_models(root, done)
    print(summary(done, args.output, models, command, setup))
    lost = done.incomplete
    for problem in lost:
        print(f"error: {problem}", file=sys.stderr)
    if lost:
        verdict = (f"{len(lost)} recording(s) or part(s) of one are not complete on disk (the error lines above); "
                   f"the command itself exited {code}")
        print(f"verdict: exit {code or 1}: {verdict}", file=sys.stderr)
    elif code:
        print(f"verdict: exit {code}: the command's own exit code, passed through (what it recorded is kept "
              "above)", file=sys.stderr)
    return code or (1 if lost else 0)
