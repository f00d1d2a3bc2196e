"""The test tiers, and a guard that keeps the fast one honest.

``python -m pytest -m unit`` runs the tests of pure pieces and in-process engine behaviour (the
option table, judges, quantization grids, graph rewriting, the hook called in this process): about a
minute, what a maintainer runs while editing. A module listed in ``UNIT_MODULES`` puts its tests in
that tier, except those marked ``process`` (they start an interpreter, the console script or a
build). A test of the tier that starts a process anyway fails, naming the marker: the tier's speed
is a property of what its tests do, checked on every run, not a list kept in step by hand.

The default run (``python -m pytest``) runs the unit tier and everything else but the ``slow``,
``compat`` and ``extended`` tiers (pyproject.toml).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import realmodels

UNIT_MODULES = frozenset({
    "test_advice",
    "test_agreement",
    "test_auto",
    "test_cache_manifest",
    "test_capture_units",
    "test_check_fix_floor",
    "test_check_verdict",
    "test_config",
    "test_docs_consistency",
    "test_download",
    "test_external_data",
    "test_fast_paths",
    "test_graph_cases",
    "test_heads",
    "test_hook_inprocess",
    "test_inputs",
    "test_judges",
    "test_memory_encodings",
    "test_memory_target",
    "test_option_table",
    "test_packaging",
    "test_packing",
    "test_progress",
    "test_properties",
    "test_quant",
    "test_record_merge",
    "test_record_select",
    "test_runtimes",
    "test_steps",
    "test_wheel_layout",
})
"""Modules whose tests run in this process (but those marked ``process``)."""

SPAWNING = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.system",
                      "os.spawn"})
"""Audit events (``sys.addaudithook``) that start a process."""

_running: list[str] = []
"""The node id of the unit test now running, if any."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _running and event in SPAWNING:
        raise RuntimeError(f"{_running[0]} is in the unit tier and started a process ({event}); mark it "
                           "@pytest.mark.process (tests/conftest.py)")


sys.addaudithook(_audit)


def pytest_configure(config: pytest.Config) -> None:
    """A module renamed or removed must leave the list too, or its successor silently leaves the tier."""
    missing = sorted(name for name in UNIT_MODULES if not (Path(__file__).parent / f"{name}.py").is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py: UNIT_MODULES names no test module: {', '.join(missing)}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__ in UNIT_MODULES and item.get_closest_marker("process") is None \
                and item.get_closest_marker("extended") is None:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _unit_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a unit-tier test that starts a process (fixtures included: they run inside this one)."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    _running.append(request.node.nodeid)
    realmodels.UNIT_TIER = True
    try:
        yield
    finally:
        _running.clear()
        realmodels.UNIT_TIER = False


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hook build in this process with a cache and a temporary directory of its own, and none of
    hatch's switches that a developer's shell may set (no hooks, hooks only, clean, verbosity)."""
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN", "HATCH_VERBOSE",
                 "HATCH_QUIET"):
        monkeypatch.delenv(name, raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shrink cache of this test's own (``HATCH_SHRINKRAY_CACHE_DIR``), for the commands it runs too."""
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a command run in a fresh process: a cache and a $TMPDIR of its own, and no
    ``SOURCE_DATE_EPOCH`` from a developer's shell (a module that needs other variables defines its own)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}
    out.pop("SOURCE_DATE_EPOCH", None)
    return out
