"""Streaming digests, atomic writes and temporary files: the file primitives every layer needs.

Every temporary file or directory this package makes carries the id of the process that made it
(``.NAME.PID.HEX.tmp`` beside a file it replaces, ``.shrinkray-PID-...`` beside a model it stages,
``hatch-shrinkray-KIND-PID-...`` in TMPDIR). A run killed by SIGKILL or a power cut cannot remove
its own; the next run that makes one of the same kind there removes those whose process is gone
(:func:`sweep`), and never one of a live process, whoever it is.

Nothing here imports beyond the standard library, so the build hook's light path (pass-through)
can use it without pulling in onnx.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hatch_shrinkray.signals import deferred

CHUNK = 1 << 20


def file_sha256(path: Path, limit: int | None = None) -> str:
    """The sha256 of a file; with ``limit``, of a regular file of at most that many bytes
    (:func:`open_regular`: a FIFO or ``/dev/zero`` would never end)."""
    digest = hashlib.sha256()
    with open(path, "rb") if limit is None else open_regular(path, limit) as fh:
        read = 0
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
            read += len(chunk)
            if limit is not None and read > limit:
                raise TooLarge(path, limit)
    return digest.hexdigest()


class NotRegular(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a directory)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"is {kind}, not a regular file")
        self.path, self.kind = path, kind


class TooLarge(OSError):
    """A regular file over the size its reader accepts."""

    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"is larger than {limit} bytes")
        self.path, self.limit = path, limit


KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_kind(mode: int) -> str:
    return next((kind for test, kind in KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, limit: int) -> io.BufferedReader:
    """``path`` opened for reading if it is a regular file of at most ``limit`` bytes; otherwise
    :class:`NotRegular` or :class:`TooLarge` (both OSErrors). Opening never blocks: a FIFO without
    a writer would hang a plain ``open``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO opened for writing)
            raise NotRegular(Path(path), "a socket") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(Path(path), file_kind(info.st_mode))
        if info.st_size > limit:
            raise TooLarge(Path(path), limit)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see :func:`open_regular`); a file
    that grows past the limit while it is read is :class:`TooLarge` too."""
    with open_regular(path, limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(Path(path), limit)
    return data


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
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def copy_atomically(source: Path, target: Path) -> str:
    """``copy_hashed`` into a temporary file beside ``target``, renamed over it when complete."""
    with replacing(target) as tmp:
        return copy_hashed(source, tmp)


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` for the block to write, renamed over it when the block ends;
    on any error or interruption it is removed, and ``path`` is left as it was."""
    tmp: Path | None = None
    try:
        with deferred():  # a signal right after the file is created is delivered inside the try, which cleans up
            fd, name = create_beside(path)
            tmp = Path(name)
        os.close(fd)
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise


def create_beside(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` (to be renamed over it), open for writing: ``(fd, name)``
    as ``tempfile.mkstemp`` returns them, but created with mode 0666 less the umask, the mode any
    file the user writes gets (mkstemp's 0600 would make a plan file, a wheel or a report private).
    Those a killed run left beside ``path`` go first (:func:`sweep`). Call it inside
    ``signals.deferred()``."""
    sweep(path.parent, re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[0-9a-f]+\.tmp"))
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "cannot create a temporary file", str(path.parent))


NOT_SOURCES = frozenset({"node_modules", "site-packages", "__pycache__", "build", "dist"})
"""Directories a project's own model files are not in (environments, outputs); hidden ones neither."""


def model_files(root: Path, limit: int = 100) -> list[str]:
    """The ``.onnx`` files under ``root`` (a project, or a wheel's unpacked files) as relative POSIX
    paths, sorted, at most ``limit``: what a ``models`` pattern that matched nothing could have
    meant. Virtual environments, outputs and hidden directories are not searched."""
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d not in NOT_SOURCES
                                   and not (Path(directory) / d / "pyvenv.cfg").exists())
        found += [Path(directory, f).relative_to(root).as_posix() for f in files if f.endswith(".onnx")]
        if len(found) >= limit:
            break
    return sorted(found)[:limit]
TEMPORARY = re.compile(r"hatch-shrinkray-[a-z]+-(\d+)-.+")
"""Our directories in TMPDIR: ``hatch-shrinkray-KIND-PID-`` and ``mkdtemp``'s random end."""
STAGING = re.compile(r"\.shrinkray-(\d+)-.+")
"""Our staging directories beside a model being written (``onnxgraph.modelio.Staged``)."""


def temporary_prefix(kind: str) -> str:
    """The ``prefix`` of a directory of ours in TMPDIR (``mkdtemp``, ``TemporaryDirectory``); those a
    killed run left there go first."""
    sweep(Path(tempfile.gettempdir()), TEMPORARY)
    return f"hatch-shrinkray-{kind}-{os.getpid()}-"


def temporary_directory(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A directory of ours in TMPDIR that removes itself (``with temporary_directory(KIND) as name``).
    It and the object that removes it appear together, signals held meanwhile (``signals.deferred``):
    a Ctrl-C or SIGTERM right after ``mkdtemp`` made the directory would otherwise leave it behind."""
    with deferred():
        return tempfile.TemporaryDirectory(prefix=temporary_prefix(kind))


def staging_prefix(directory: Path) -> str:
    """The ``prefix`` of a staging directory of ours in ``directory``; those a killed run left there go first."""
    sweep(directory, STAGING)
    return f".shrinkray-{os.getpid()}-"


def sweep(directory: Path, pattern: re.Pattern[str]) -> None:
    """Remove what a killed run of ours left in ``directory``: entries whose whole name matches
    ``pattern`` (its first group a process id), that this user owns, and whose process is gone.
    A live process's (any live process with that id: it may be another's) is left alone, and so
    is anything that cannot be told apart from one. POSIX only (there is no harmless way to ask
    Windows whether a process id is alive)."""
    if os.name != "posix":
        return
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is None or not _gone(int(found.group(1))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != os.geteuid():
                continue
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            continue


def _gone(pid: int) -> bool:
    """Whether no process has this id (ours never is: it is running this)."""
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, someone else's
        return False
    return False
