"""Streaming digests and atomic writes: the two file primitives every layer needs.

Nothing here imports beyond the standard library, so the build hook's light path (pass-through)
can use it without pulling in onnx.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from hatch_shrinkray.signals import deferred

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def copy_hashed(source: Path, target: Path) -> str:
    """Copy ``source`` to ``target`` and return the sha256 of exactly the bytes copied (one read,
    so what is hashed is what is shipped even if ``source`` is rewritten meanwhile)."""
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as dst:
        for chunk in iter(lambda: src.read(CHUNK), b""):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def write_atomically(path: Path, data: bytes) -> None:
    """Readers see the old file or the complete new one, never a part; a failed or interrupted
    write leaves the old file and no temporary file.

    A path that exists and is not a regular file (``/dev/stdout``, a FIFO) is written directly:
    renaming over it would replace the device instead of writing to it.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    with deferred():  # no signal between creating the temporary file and owning it
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
