"""Hatch's entry point (group ``hatch``): registers the ``shrinkray`` build hook."""

from __future__ import annotations

from hatchling.plugin import hookimpl

from hatch_shrinkray.hatch.plugin import ShrinkrayBuildHook


@hookimpl
def hatch_register_build_hook() -> type[ShrinkrayBuildHook]:
    return ShrinkrayBuildHook
