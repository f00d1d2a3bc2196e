"""The test tiers, and the guards that keep them honest.

``tests/unit/`` is the unit tier (``python -m pytest tests/unit`` or ``-m unit``, the same tests): pure
pieces and in-process engine behaviour (the option table, judges, quantization grids, graph rewriting,
the hook called in this process), what a maintainer runs while editing. It runs anywhere: it starts no
process (a test of the tier that starts one fails, naming the folder) and downloads nothing (a real
model missing from the test cache is a skip with its reason, ``realmodels.UNIT_TIER``). The folder is
the tier: a test under ``tests/unit/`` marked for another tier, or a test elsewhere marked ``unit``,
stops the run at collection.

A test that reaches the package index is marked ``network``, and offline it is a skip with its reason:
one that fetches a real model wheel (``realmodels``) by hand (it fails, naming the marker, when it reaches
``realmodels`` without it, whether or not the cache holds the model); one that creates a build
environment from the index by the ``index`` fixture, which adds the marker.

The default run (``python -m pytest``) runs the unit tier and everything else but the ``slow``,
``compat`` and ``extended`` tiers (pyproject.toml).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

import realmodels

UNIT = Path(__file__).resolve().parent / "unit"
"""The unit tier's folder."""

OTHER_TIERS = ("process", "slow", "compat", "extended")
"""Markers of tests that cannot be in the unit tier."""

SPAWNING = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.system",
                      "os.spawn"})
"""Audit events (``sys.addaudithook``) that start a process."""

_running: list[str] = []
"""The node id of the unit test now running, if any."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _running and event in SPAWNING:
        raise RuntimeError(f"{_running[0]} is in the unit tier (tests/unit/) and started a process ({event}); "
                           "move it out of tests/unit/ and mark it @pytest.mark.process")


sys.addaudithook(_audit)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under ``tests/unit/`` is ``unit``; none elsewhere is."""
    misfiled = []
    for item in items:
        if "index" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.network)
        if item.path.resolve().is_relative_to(UNIT):
            other = [name for name in OTHER_TIERS if item.get_closest_marker(name) is not None]
            if other:
                misfiled.append(f"{item.nodeid} is marked {', '.join(other)} but is in tests/unit/: move it out")
            item.add_marker(pytest.mark.unit)
        elif item.get_closest_marker("unit") is not None:
            misfiled.append(f"{item.nodeid} is marked unit outside tests/unit/: move it there")
    if misfiled:
        raise pytest.UsageError("\n".join(misfiled))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """The guards hold for the test's fixtures too, of every scope (set up and torn down inside it)."""
    unit = item.get_closest_marker("unit") is not None
    if unit:
        _running.append(item.nodeid)
    realmodels.UNIT_TIER = unit
    realmodels.RUNNING = (item.nodeid, item.get_closest_marker("network") is not None)
    try:
        return (yield)
    finally:
        _running.clear()
        realmodels.UNIT_TIER = False
        realmodels.RUNNING = None


@pytest.fixture(scope="session")
def index(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The package index, for a test that creates a build environment from it (``pip``'s own settings:
    ``PIP_INDEX_URL`` ...): a skip with pip's reason when it cannot fetch hatchling from there."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir", "-d",
           str(tmp_path_factory.mktemp("index")), "hatchling"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.skip(f"the package index is unreachable (pip download hatchling: {proc.stderr.strip()[-200:]})")


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
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 270 KB output counts as 'over 2 GB' (``modelio.SINGLE_FILE_LIMIT``, read at write time): the
    external-data output path, cheaply (the real crossing is in test_big_model.py)."""
    monkeypatch.setattr("hatch_shrinkray.onnxgraph.modelio.SINGLE_FILE_LIMIT", 64 * 1024)


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
