"""What a build says to do when a model needs real inputs: the ``record`` command for this project.

The one place that spells the command, so the line of a model whose original ships, the error of
an ``inputs`` that does not exist yet and the command line's advice all name the same command.
"""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.hints import RECORDING, default_recording, record_command, relative

__all__ = ["RECORDING", "default_recording", "record_advice", "record_command"]


def record_advice(root: Path, inputs: Path | None, key: str = "inputs", models: int = 1) -> str:
    """How the next build can shrink a model generated inputs could not verify: the ``record``
    command for the project at ``root`` (its tests, when it has a ``tests`` directory) and the
    setting that points at the recording (``key``: the table's ``inputs``, or a command's
    ``--inputs``); when ``inputs`` is set already, that its recording lacks the model (or the
    ``models`` models the advice concerns)."""
    output = relative(Path(inputs), root) if inputs is not None else default_recording(root)
    command = record_command(root, output)
    it = "them" if models > 1 else "it"
    if inputs is not None:
        return f"{output} holds no recording of {it}; to shrink {it}: `{command}`"
    # the recording's path is in the command: the setting is named, not given it again (a line's room)
    if key.startswith("--"):
        return f"to shrink {it}: `{command}`, then pass `{key}`"
    return f"to shrink {it}: `{command}`, then set `{key}`"


