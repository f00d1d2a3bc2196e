"""Which file of a recording directory is a model's recording: by content, else by file name."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording.format import SHA_DIGITS, stem
from hatch_shrinkray.recording.storage import read_meta


def named_for(directory: Path, model_sha256: str) -> list[Path]:
    """The files of ``directory`` named as a recording of the model with these bytes."""
    return sorted(directory.glob(f"*-{model_sha256[:SHA_DIGITS]}.npz"))


class NoRecording(ShrinkrayError):
    """A recording directory holds nothing for this model (by content or by name)."""


def find_recording(directory: Path, model_sha256: str, model_name: str) -> tuple[Path, str]:
    """The recording of the model with these bytes, or of the same file name (with a note saying so);
    :class:`NoRecording` when there is neither."""
    label = str(directory)
    files = sorted(p for p in directory.glob("*.npz") if p.is_file())
    for path in (p for p in named_for(directory, model_sha256) if p.is_file()):
        if read_meta(path).model_sha256 == model_sha256:
            return path, ""
    name_stem = stem(Path(model_name).name)
    named = [p for p in files if p.name.rsplit("-", 1)[0] == name_stem]
    if len(named) == 1:
        return named[0], (f"matched {named[0].name} by file name, not by content: {model_name} changed since it "
                          "was recorded; record again to verify on inputs of this exact model")
    from hatch_shrinkray.hints import current, record_command, relative  # not in the recorded processes

    have = ", ".join(p.name for p in files[:6]) or "no recordings"
    more = " (several by that name)" if named else ""
    raise NoRecording(f"holds no recording of {model_name} (sha256 {model_sha256[:SHA_DIGITS]}...){more}; it has: "
                      f"{have}", path=label,
                      hint=f"record it: `{record_command(current().root, relative(directory, current().root))}`")

