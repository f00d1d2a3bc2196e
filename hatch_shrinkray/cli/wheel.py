"""``hatch-shrinkray wheel``: shrink the models inside built wheels, as the build hook would."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from pathlib import Path

from hatch_shrinkray import hints, progress
from hatch_shrinkray.cli.flags import Given, Noted, option_flags, pins_flag, plan_flag
from hatch_shrinkray.cli.output import Stderr
from hatch_shrinkray.cli.usage import command
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.config import HookConfig


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = command(sub, "wheel", help="shrink the models inside built wheels (any build backend)",
                description="Rewrite wheels with their models shrunk and verified as the build hook "
                            "would. The configuration is [tool.hatch-shrinkray] (or the hook's table) "
                            "of the project's pyproject.toml; --models and the options below override its "
                            "keys one by one (without a table, they configure alone).")
    w.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL", help="wheel files")
    where = w.add_mutually_exclusive_group()
    w.common(where.add_argument("-o", "--output", type=Path, default=Path("wheelhouse"), metavar="DIR",
                                help="directory for the rewritten wheels (default: %(default)s)"),
             where.add_argument("--in-place", action="store_true", help="replace each input wheel"))
    w.add_argument("--force", action="store_true", help="overwrite existing output wheels")
    w.common(w.add_argument("--project", type=Path, default=Path("."), action=Noted, metavar="DIR",
                            help="the project whose pyproject.toml configures the models (default: the current "
                                 "directory)"),
             w.add_argument("--models", action="append", metavar="GLOB",
                            help="the models to shrink instead of the table's `models`: paths inside the wheel or in "
                                 "the project (pkg/models/*.onnx or src/pkg/models/*.onnx; repeatable; ** allowed)"),
             plan_flag(w, "apply what this plan file holds for each model's bytes (check --fix's remedy or check "
                          "--search's per-tensor plan) instead of the configuration's plan"))
    pins_flag(w, "the wheel's own text files")
    option_flags(w)


def run(args: argparse.Namespace) -> int:
    from hatch_shrinkray.result import human
    from hatch_shrinkray.shipping.config import load_config
    from hatch_shrinkray.shipping.layout import project_layout
    from hatch_shrinkray.shipping.manifest import read_manifest
    from hatch_shrinkray.shipping.project import find_table
    from hatch_shrinkray.wheels.rewrite import rewrite_wheel

    given = Given.of(args)
    given.options()  # the flags are checked on their own first, each named as given
    project = args.project.resolve()
    raw, table = find_table(project, required=not args.models)
    if table is None:
        hints.installed_models()
    read = functools.partial(load_config, raw, project, "wheel", table or "--models",
                             flags=given.command_line(args, args.models or (), every_flag=table is None,
                                                      plan=args.plan))

    def configure(files: Path) -> HookConfig:
        config = read(files)
        given.refuse_idle(m.options for m in config.models)
        return config

    created = not args.in_place and not args.output.exists()
    outputs = _wheel_destinations(args)
    display = Stderr(args.verbose, args.quiet)
    manifest = read_manifest(project, display.display_warning)
    rewrote = in_tree = False
    layout = project_layout(project)  # how the wheel's paths are spelled in the project's tree
    for source, destination in progress.tracked(outputs, "wheel", detail=lambda pair: pair[0].name):
        try:
            done = rewrite_wheel(source, destination, configure, manifest, display)
        except BaseException as exc:
            if created:  # the output directory this command made, if nothing was written into it
                with contextlib.suppress(OSError):
                    args.output.rmdir()
            if isinstance(exc, ShrinkrayError) and exc.path not in (str(source), str(destination)):
                exc.path = f"{source}: {exc.path}" if exc.path else str(source)
            raise
        before = sum(m.original_size for m in done.shipped)
        after = sum(m.shipped_size for m in done.shipped)
        what = "rewrote" if done.changed else "left unchanged" if args.in_place else "copied unchanged"
        n, smaller = len(done.shipped), sum(m.shipped_size < m.original_size for m in done.shipped)
        count = f"{n} model" + ("s" if n != 1 else "") if smaller in (0, n) else f"{smaller} of {n} models shrunk"
        print(f"{source if args.in_place else destination}: {what} ({count}, {human(before)} -> {human(after)})")
        rewrote = rewrote or done.changed
        in_tree = in_tree or any((project / spelled).is_file() for m in done.shipped
                                 for spelled in layout.spellings(m.relpath, in_wheel=False))
    # The hook shrinks a Hatch project's sdist itself; a project whose tree does not hold the models (a
    # wheel rewritten from a stub project) has no sdist that could carry them.
    if rewrote and in_tree and not (table or "").startswith("tool.hatch."):
        print("note: only wheels are rewritten: this project's sdist still holds the original models (leave them "
              "out of it, or build with the Hatch hook)")
    return 0


def _wheel_destinations(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """``(input, output)`` per wheel, refusing clashes before any work is done."""
    pairs: list[tuple[Path, Path]] = []
    for source in args.wheels:
        if not source.is_file():
            raise ShrinkrayError("no such wheel", path=str(source), hint="pass the .whl files a build wrote")
        # --in-place on a link rewrites the wheel it points to: replacing the link with a file would
        # leave that wheel as it was, where whatever the link stands for still finds it.
        destination = Path(os.path.realpath(source)) if args.in_place else args.output / source.name
        if not args.in_place and destination.exists() and destination.resolve() == source.resolve():
            raise ShrinkrayError("the output would overwrite the input", path=str(source),
                                 hint="pass --in-place to replace it, or choose another -o directory")
        if destination in (d for _, d in pairs):
            raise ShrinkrayError(f"another input also writes {destination}", path=str(source))
        if not args.in_place and destination.exists() and not args.force:
            raise ShrinkrayError(f"output {destination} exists", path=str(source), hint="use --force to overwrite")
        pairs.append((source, destination))
    if not args.in_place:
        try:
            args.output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ShrinkrayError(f"cannot create the output directory: {exc.strerror or exc}",
                                 path=str(args.output)) from exc
    return pairs
