"""What a build says to do when a model needs real inputs: the ``record`` command for this project.

The one place that spells the command, so the line of a model whose original ships, the error of
an ``inputs`` that does not exist yet and the command line's advice all name the same command.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

RECORDING = "tests/shrinkray-inputs"
"""Where the advice records a project's inputs: beside its tests, which are what it runs."""
TEST_COMMAND = "python -m pytest tests"


def record_command(root: Path, output: str) -> str:
    """``hatch-shrinkray record --output OUTPUT -- python -m pytest tests`` for a project with a
    ``tests`` directory at ``root``; ``COMMAND`` (the command that runs its code) for any other."""
    command = TEST_COMMAND if (root / "tests").is_dir() else "COMMAND"
    return f"hatch-shrinkray record --output {output} -- {command}"


def default_recording(root: Path) -> str:
    """Where a project at ``root`` records its inputs unless it says otherwise."""
    return RECORDING if (root / "tests").is_dir() else "shrinkray-inputs"


def record_advice(root: Path, inputs: Path | None, key: str = "inputs", models: int = 1) -> str:
    """How the next build can shrink a model generated inputs could not verify: the ``record``
    command for the project at ``root`` (its tests, when it has a ``tests`` directory) and the
    setting that points at the recording (``key``: the table's ``inputs``, or a command's
    ``--inputs``); when ``inputs`` is set already, that its recording lacks the model (or the
    ``models`` models the advice concerns)."""
    if inputs is not None:
        output = PurePosixPath(Path(inputs).relative_to(root)).as_posix() if Path(inputs).is_relative_to(root) \
            else str(inputs)
    else:
        output = default_recording(root)
    command = record_command(root, output)
    it = "them" if models > 1 else "it"
    if inputs is not None:
        return f"{output} holds no recording of {it}; to shrink {it}: `{command}`"
    if key.startswith("--"):
        return f"to shrink {it}: `{command}`, then pass --inputs {output}"
    return f'to shrink {it}: `{command}`, then set {key} = "{output}"'


