"""A pytest plugin that ``hatch-shrinkray check`` loads into every pytest session of the command
(through ``PYTEST_PLUGINS``): each test's outcome and failure text, written when the session ends
as ``<dir>/<pid>.<n>.json`` into the directory ``HATCH_SHRINKRAY_OUTCOMES`` names.

Outcomes: ``passed``, ``failed``, ``error`` (setup or teardown failed), ``skipped``, ``xfailed``,
``xpassed``. Under pytest-xdist the controller sees every worker's reports and writes them; the
workers write nothing. It is not the ``pytest11`` plugin: that one is loaded in every pytest run of
an environment with hatch-shrinkray installed, this one only when ``check`` asks.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hatch_shrinkray.capture.env import OUTCOMES
from hatch_shrinkray.capture.outcome_file import Outcome, Session
from hatch_shrinkray.codec import encode

TEXT_LIMIT = 6000
_serial = itertools.count()
_tests: dict[str, Outcome] = {}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _tests[report.nodeid or "<collection>"] = Outcome("error", _text(report))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    text = _tests[report.nodeid].text if report.nodeid in _tests else ""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        outcome = ("xfailed" if report.skipped else "xpassed") if xfail else report.outcome
        _tests[report.nodeid] = Outcome(outcome, _text(report) if report.failed else text)
    elif report.failed:  # setup or teardown
        _tests[report.nodeid] = Outcome("error", _text(report))
    elif report.skipped and report.when == "setup":
        _tests[report.nodeid] = Outcome("xfailed" if xfail else "skipped", text)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get(OUTCOMES)
    if not target or hasattr(session.config, "workerinput"):
        return
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{os.getpid()}.{next(_serial)}.json"
    data = Session(str(session.config.rootpath), int(exitstatus), dict(sorted(_tests.items())))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(encode(data), sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    _tests.clear()


def _text(report: Any) -> str:
    text = str(getattr(report, "longreprtext", "") or "")
    return text if len(text) <= TEXT_LIMIT else "...\n" + text[-TEXT_LIMIT:]
