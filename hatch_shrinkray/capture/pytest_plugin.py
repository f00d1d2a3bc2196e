"""``pytest --shrinkray-record DIR``: record the feeds of every onnxruntime session the test run
creates, in the pytest process and its Python subprocesses (pytest-xdist workers included).

Registered through the ``pytest11`` entry point, so it is imported by every pytest run in an
environment where hatch-shrinkray is installed: until the option is given it only adds options.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from hatch_shrinkray.capture import env
from hatch_shrinkray.recording.caps import MAX_BYTES, MAX_BYTES_FOR_UNITS, MAX_MEMORY, MAX_SAMPLES

ENV_KEYS = (env.RECORD, env.RECORD_SAMPLES, env.RECORD_BYTES, "PYTHONPATH", "PYTEST_PLUGINS")
UNITS_PLUGIN = "hatch_shrinkray_units"
"""The name ``record``'s shim registers ``capture.testunits`` under (``capture.run.UNITS_PLUGIN``)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hatch-shrinkray", "record onnxruntime inputs (hatch-shrinkray)")
    group.addoption("--shrinkray-record", metavar="DIR", default=None,
                    help="record a bounded sample of the feeds of every ONNX model the tests run into DIR "
                         "(one .npz per model; use DIR as hatch-shrinkray's `inputs`)")
    group.addoption("--shrinkray-record-samples", metavar="N", type=int, default=MAX_SAMPLES,
                    help=f"samples kept per model; a stream counts as one (default {MAX_SAMPLES})")
    group.addoption("--shrinkray-record-bytes", metavar="BYTES", type=int, default=None,
                    help=f"bound on the bytes each model's samples take in its file, compressed, hard when given "
                         f"(default {MAX_BYTES}, or up to {MAX_BYTES_FOR_UNITS} when 16 units need more)")
    group.addoption("--shrinkray-record-memory", metavar="BYTES", type=int, default=MAX_MEMORY,
                    help=f"bound on the bytes each model's samples take once loaded; a feed over a sixteenth of "
                         f"it is left out (default {MAX_MEMORY})")


class Recording:
    """The controlling pytest process: records in-process, makes subprocesses record, merges at the end."""

    def __init__(self, config: pytest.Config, output: Path) -> None:
        from hatch_shrinkray.capture import boot
        from hatch_shrinkray.capture.run import missing_directories, recording_environment
        from hatch_shrinkray.recording.caps import Caps

        self.output = output
        given = config.getoption("shrinkray_record_bytes")
        self.caps = Caps.given(int(config.getoption("shrinkray_record_samples")), None if given is None else int(given),
                               int(config.getoption("shrinkray_record_memory")))
        self.created = missing_directories(output)
        self.saved = {k: os.environ.get(k) for k in ENV_KEYS}
        self.stack = contextlib.ExitStack()
        variables, self.run_dir = self.stack.enter_context(recording_environment(output, self.caps))
        self.stack.callback(self._restore)
        os.environ.update(variables)
        boot.install()
        self.summary = ""
        self.incomplete: list[str] = []

    def _restore(self) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def finish(self) -> None:
        from hatch_shrinkray.capture.run import finish, project_root, remove_if_empty, summary
        from hatch_shrinkray.capture.session import flush

        with self.stack:
            flush()
            done = finish(self.run_dir, self.output, self.caps, project_root(self.output))
            self.incomplete = done.incomplete
            self.summary = "\n".join([summary(done, self.output), *(f"error: {e}" for e in self.incomplete)])
        remove_if_empty(self.created)


KEY = pytest.StashKey[Recording]()


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("shrinkray_record")
    if target or os.environ.get(env.RECORD):  # this option, or `hatch-shrinkray record -- pytest`
        _label_tests(config)
    if not target:
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the controller's environment already records here
        from hatch_shrinkray.capture import boot

        boot.install()
        return
    config.stash[KEY] = Recording(config, Path(target))


def _label_tests(config: pytest.Config) -> None:
    """Calls made during a test belong to it (``capture.testunits``), once per session."""
    if not config.pluginmanager.has_plugin(UNITS_PLUGIN):
        from hatch_shrinkray.capture import testunits

        config.pluginmanager.register(testunits, UNITS_PLUGIN)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not config.getoption("shrinkray_record"):
        return
    if hasattr(config, "workerinput"):
        from hatch_shrinkray.capture.session import flush

        flush()  # workers may end without running atexit handlers
        return
    state = config.stash.get(KEY, None)
    if state is not None:
        state.finish()
        if state.incomplete and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # as a coverage floor fails a green run


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(KEY, None)
    if state is not None and state.summary:
        terminalreporter.section("hatch-shrinkray recording")
        terminalreporter.write_line(state.summary)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(KEY, None)
    if state is not None:
        from hatch_shrinkray.capture.run import discard

        state.stack.close()  # a run that ended before sessionfinish: leave no temporary files
        discard(state.run_dir)
        del config.stash[KEY]
