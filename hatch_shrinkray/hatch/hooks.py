"""Hatch's entry point (group ``hatch``): registers the ``shrinkray`` build hook."""

from __future__ import annotations

try:
    import signal

    from hatchling.plugin import hookimpl

    from hatch_shrinkray.hatch.plugin import ShrinkrayBuildHook
except KeyboardInterrupt:  # Ctrl-C while hatchling loads the plugin: as anywhere in the build, no traceback
    from hatch_shrinkray.hatch.stopping import stop

    stop(signal.SIGINT)


@hookimpl
def hatch_register_build_hook() -> type[ShrinkrayBuildHook]:
    return ShrinkrayBuildHook
