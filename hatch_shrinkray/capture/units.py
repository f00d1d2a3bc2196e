"""The unit a call belongs to: the pytest test running when it was made (``test:<node id>``), in this
process or in the process that started this one (through ``HATCH_SHRINKRAY_UNIT``); empty outside
tests. Standard library only: read by the instrumented ``run()`` on every call."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hatch_shrinkray.capture import env

_current = [os.environ.get(env.UNIT, "")]


def current() -> str:
    return _current[-1]


@contextmanager
def running(label: str) -> Iterator[None]:
    """Calls made meanwhile, here and in subprocesses started meanwhile, belong to ``label``."""
    saved = os.environ.get(env.UNIT)
    _current.append(label)
    os.environ[env.UNIT] = label
    try:
        yield
    finally:
        _current.pop()
        if saved is None:
            os.environ.pop(env.UNIT, None)
        else:
            os.environ[env.UNIT] = saved
