"""What a project configures, as ``record`` needs it: the models its coverage table expects to see
run, and where the project's table points the build's ``inputs`` (for the next step it names)."""

from __future__ import annotations

import functools
from pathlib import Path

from hatch_shrinkray.capture.run import Expected, Finished, Named, Setup, installed
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.config import hook_table, load_config
from hatch_shrinkray.shipping.project import find_table


def configured_models(root: Path, done: Finished) -> tuple[list[Expected], Setup]:
    """The models the project at ``root`` configures (on the wheel path, where its globs name files
    inside the installed package, those found beside the models the command ran (``done``); none
    when its table cannot be read: the build says why) and its recording setup."""
    try:
        raw, table = find_table(root)
    except ShrinkrayError:
        return [], Setup(root=root, hook=hook_table())
    inputs = raw.get("inputs")
    setup = Setup(table, inputs if isinstance(inputs, str) else None, root, hook_table())
    if table is None:
        return [], setup
    try:
        config = load_config(raw, root, "wheel", table)
        return [Expected(m.relpath, file_sha256(root / m.relpath), m.options.method) for m in config.models], setup
    except (ShrinkrayError, OSError):
        globs, method = raw.get("models"), raw.get("method")
        if isinstance(globs, list) and all(isinstance(g, str) for g in globs):
            return installed(globs, done, method if isinstance(method, str) else ShrinkOptions().method), setup
        return [], setup


def named_by_content(root: Path) -> Named:
    """sha256 -> the project's configured model file with those bytes (its table's ``models``),
    read when first asked: a program that loads a model from bytes gets its recording named after
    the file the build matches it with."""

    @functools.cache
    def files() -> dict[str, str]:
        try:
            raw, table = find_table(root)
            if table is None:
                return {}
            return {file_sha256(root / m.relpath): m.relpath for m in load_config(raw, root, "wheel", table).models}
        except (ShrinkrayError, OSError):
            return {}

    return lambda sha: files().get(sha)
