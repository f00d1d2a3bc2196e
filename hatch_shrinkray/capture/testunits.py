"""A pytest plugin active while recording: every call made during a test (its setup, call and
teardown, in this process or in subprocesses it starts) belongs to the unit ``test:<node id>``.

``record`` loads it into every pytest session of the command (``PYTEST_PLUGINS``, through a shim in
the ``sitecustomize`` directory); ``pytest --shrinkray-record`` registers it itself.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from hatch_shrinkray.capture import units


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    with units.running(f"test:{item.nodeid}"):
        yield
