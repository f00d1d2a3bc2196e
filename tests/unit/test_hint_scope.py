"""Hints are scoped to the command that speaks (the rest of the hints' tests, through the CLI and
builds, are in tests/test_hints.py)."""

from __future__ import annotations

from hatch_shrinkray import hints


def test_the_words_of_a_command_end_with_it_and_reach_its_worker_threads() -> None:
    """Hints are scoped to the command that speaks (no process-wide state a later library call in
    the same process would inherit), and the engine's thread pools carry them to their workers."""
    from hatch_shrinkray.pool import Background, thread_pool

    assert hints.current() == hints.Invocation() and hints.interface() == hints.HOOK
    asked = hints.Invocation("check", ("--method", "int8"), ("pytest",), ("m.onnx",))
    with hints.speaking(asked):
        with thread_pool(2) as pool:
            seen = list(pool.map(lambda _: (hints.interface(), hints.check_hint()), range(4)))
        background = Background(hints.current).result()
        hints.installed_models()
        installed = hints.current().models
    assert seen == [("check", "hatch-shrinkray check --search m.onnx --method int8 -- pytest")] * 4
    assert background == asked and installed == (hints.SITE + "m.onnx",)
    assert hints.current() == hints.Invocation() and hints.setting("inputs", "DIR") == '`inputs = "DIR"`'
    with thread_pool(2) as pool:
        assert list(pool.map(lambda _: hints.interface(), range(2))) == [hints.HOOK] * 2
