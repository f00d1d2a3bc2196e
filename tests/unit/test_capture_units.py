"""``capture.units``: the test a recorded call belongs to, here and in the processes started meanwhile
(through the environment), restored however the test ends."""

from __future__ import annotations

import os

import pytest

from hatch_shrinkray.capture import env, units


def test_a_unit_holds_while_it_runs_and_reaches_subprocesses_through_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(env.UNIT, raising=False)
    outside = units.current()
    with units.running("test:a"):
        assert units.current() == "test:a" and os.environ[env.UNIT] == "test:a"
        with units.running("test:b"):
            assert units.current() == "test:b" and os.environ[env.UNIT] == "test:b"
        assert units.current() == "test:a" and os.environ[env.UNIT] == "test:a"
    assert units.current() == outside and env.UNIT not in os.environ


def test_the_environment_is_restored_when_the_test_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.UNIT, "test:parent")
    with pytest.raises(RuntimeError), units.running("test:child"):
        raise RuntimeError("the test failed")
    assert os.environ[env.UNIT] == "test:parent"
