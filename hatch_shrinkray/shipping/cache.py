"""A content-addressed store of shrunk models, so an unchanged model is shrunk only once.

The key covers everything that determines the output: the model's bytes, the effective options,
the verification inputs' bytes, the versions of hatch-shrinkray, onnx and onnxruntime, and a
digest of hatch-shrinkray's own source (development builds keep one version number). Paths
are left out of the key (the same project built from a checkout and from its unpacked sdist hits
the same entry).

Each entry is two files, ``<key>.onnx`` and ``<key>.json``, each written to a temporary file in the
cache directory and renamed into place; the record is renamed last and names the model's sha256,
so a reader never trusts a half-written entry and concurrent builds can only race to write the
same bytes. Small files written the same way sit beside them: ``<sha256>.loads`` says which
onnxruntime loaded those bytes (:meth:`ShrinkCache.note_loaded`).

An entry is never taken on its word: whoever can write the directory chooses its bytes, so the
directory must be private (:func:`private_problem`), and a hit ships only once its outputs agree
with the original's (``shipping.recheck``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from hatch_shrinkray.codec import AT_LEAST_0, Check, decode, encode
from hatch_shrinkray.errors import ShrinkrayError, printable
from hatch_shrinkray.files import file_sha256, read_regular, write_atomically
from hatch_shrinkray.options import INPUTS_MAX_FILE_BYTES, ShrinkOptions
from hatch_shrinkray.shipping.manifest import ManifestEntry
from hatch_shrinkray.sizes import Sizes

CACHE_ENV = "HATCH_SHRINKRAY_CACHE_DIR"
DURATION = Check(lambda s: 0 <= s < math.inf, "a finite number >= 0")
KEY_VERSION = 3
"""Bump when the key or record layout changes, so old entries are simply never found."""


@dataclass(frozen=True)
class CachedShrink:
    """A cache record: the manifest entry plus what the build report needs."""

    entry: ManifestEntry
    original_size: Annotated[int, AT_LEAST_0]
    shrunk_size: Annotated[int, AT_LEAST_0]
    seconds: Annotated[float, DURATION]
    """How long the original shrink took (reported as time saved)."""
    summary: str | None
    """The verification figure (``VerifyResult.summary()``), or ``None`` without verification."""
    kept: str = ""
    """What stayed float and why (``ShrinkResult.kept_summary()``)."""
    kept_original: str | None = None
    """Why the original ships instead (``ShrinkResult.kept_original``)."""
    unverified: bool = False
    """It ships because generated inputs could not verify the shrunk model (``ShrinkResult.unverified``)."""
    sizes: tuple[Sizes, Sizes] | None = None
    """Raw, wheel and web bytes of the original and the shrunk model, for the report line."""
    label: str = ""
    """What shipped, as the report line names it (``verdict.shipped_label``)."""
    verdicts: tuple[str, ...] = ()
    """The verdict in words for the report line, fullest first (``verdict.line_words``)."""


def _unprintable(value: Any) -> bool:
    """Whether a string (key or value) in ``value`` is one that :func:`printable` would change."""
    if isinstance(value, str):
        return printable(value) != value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return any(_unprintable(key) or _unprintable(item) for key, item in items)


def default_cache_dir() -> Path:
    """``$HATCH_SHRINKRAY_CACHE_DIR``, else the platform's user cache directory + ``hatch-shrinkray``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hatch-shrinkray"


def cache_key(model_sha256: str, options: ShrinkOptions, versions: dict[str, str]) -> str:
    """The entry name for shrinking a model with these bytes and options under these versions."""
    described = options.describe()
    inputs_sha256 = None
    if options.verify is not None and options.verify.inputs is not None:
        inputs_sha256 = inputs_digest(Path(options.verify.inputs))
        described["verify"] = {**described["verify"], "inputs": None}
    payload = {"key_version": KEY_VERSION, "model": model_sha256, "options": described,
               "inputs": inputs_sha256, "versions": versions, "code": code_fingerprint()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _loads_line(shrunk_sha256: str, runtime: str) -> str:
    return f"{shrunk_sha256} loads in onnxruntime {runtime}\n"


def inputs_digest(path: Path) -> str:
    """The sha256 of a sample file, or of a recording directory's ``.npz`` files (names and
    contents); only regular files of a bounded size are read (a FIFO or ``/dev/zero`` never ends)."""
    try:
        if not path.is_dir():
            return file_sha256(path, INPUTS_MAX_FILE_BYTES)
        digest = hashlib.sha256()
        for member in sorted(path.glob("*.npz")):
            digest.update(member.name.encode() + b"\0" + file_sha256(member, INPUTS_MAX_FILE_BYTES).encode() + b"\0")
        return digest.hexdigest()
    except OSError as exc:
        where = getattr(exc, "path", None) or exc.filename or path
        raise ShrinkrayError(f"cannot read the sample inputs: {exc.strerror or exc}", path=str(where),
                             hint="`inputs` names a .npz file or a recording directory of regular files") from exc


@functools.cache
def code_fingerprint() -> str:
    """A digest of hatch-shrinkray's own source files.

    The version number alone does not change between edits of a development build, and build
    frontends keep installing fresh builds of the same version; without this a changed encoder
    could be served output its predecessor made.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


RECORD_MAX_BYTES = 16 << 20
"""A record is a few kilobytes; the reader never takes more than this."""


def private_problem(directory: Path) -> tuple[Path, str] | None:
    """Which directory makes ``directory`` not private enough to take shrunk models from, and why;
    ``None`` when it is private.

    Whoever can write the cache chooses the bytes a build ships and the figures it prints, so, as
    ssh requires of its keys, the directory must belong to this user (or root) and be writable by
    nobody else, and so must every directory above it, which could otherwise rename it away and put
    another in its place; a sticky directory (``/tmp``) lets nobody rename what is not theirs. A
    directory that does not exist yet is fine: it is created 0700. Not checked on Windows, where
    POSIX modes say nothing."""
    if os.name != "posix":
        return None
    try:
        info = directory.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return directory, f"cannot be read ({exc.strerror or exc})"
    if info is not None and not stat.S_ISDIR(info.st_mode):
        return directory, "is not a directory"
    if info is not None and (problem := _foreign(info)):
        return directory, problem
    for parent in Path(os.path.realpath(directory)).parents:
        try:
            above = parent.stat()
        except OSError:
            continue
        if not (above.st_mode & stat.S_ISVTX and above.st_uid in (os.geteuid(), 0)) and (problem := _foreign(above)):
            return parent, problem
    return None


def _foreign(info: os.stat_result) -> str | None:
    """Whether someone else owns or may write a directory with this ``stat``."""
    if info.st_uid not in (os.geteuid(), 0):
        return f"belongs to another user (uid {info.st_uid})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if info.st_mode & bit]
    return f"is writable by {' and '.join(writers)} (mode {stat.S_IMODE(info.st_mode):04o})" if writers else None


def refused(directory: Path) -> ShrinkrayError | None:
    """The one line that refuses a cache directory that is not private, with the fix; None when it is."""
    found = private_problem(directory)
    if found is None:
        return None
    where, problem = found
    what = "cache directory" if where == directory else "cache's parent"
    fix = "chmod go-w it" if problem.startswith("is writable") else "use a directory of your own"
    return ShrinkrayError(f"{what} {where} {problem}: others could pick what ships", hint=fix)


class ShrinkCache:
    """One cache directory; ``get`` and ``put`` never raise for I/O trouble (a cache is optional).

    The directory must be private (:func:`private_problem`, checked by the caller before use); a
    record must be well formed and printable, and name the original it was made from; its model
    file must hash to the record's ``shrunk_sha256``. What ships is re-hashed while it is copied
    out, loaded in onnxruntime and compared with the original (``shipping.shrink.take_cached``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.directory / f"{key}.onnx", self.directory / f"{key}.json"

    def get(self, key: str, original_sha256: str | None = None) -> tuple[Path, CachedShrink] | None:
        """The cached model file and its record, if the entry is complete and intact (and, with
        ``original_sha256``, made from that original)."""
        model, record = self._paths(key)
        try:
            data = json.loads(read_regular(record, RECORD_MAX_BYTES).decode("utf-8"))
            if _unprintable(data):  # text that would not print as it reads
                return None
            cached: CachedShrink = decode(CachedShrink, data)
            if original_sha256 is not None and cached.entry.original_sha256 != original_sha256:
                return None
            if file_sha256(model) != cached.entry.shrunk_sha256:
                return None
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
        return model, cached

    def loaded(self, sha256: str, runtime: str) -> bool:
        """Whether onnxruntime ``runtime`` loaded these very bytes before (:meth:`note_loaded`)."""
        try:
            said = read_regular(self.directory / f"{sha256}.loads", 512).decode("utf-8")
        except (OSError, ValueError):
            return False
        return said == _loads_line(sha256, runtime)

    def note_loaded(self, sha256: str, runtime: str) -> None:
        """Remember that onnxruntime ``runtime`` loads the model whose bytes have ``sha256``: a build
        that ships them again with the same onnxruntime (a cache hit, or the manifest match of the
        wheel built from our sdist) skips the load check, a second Python process importing
        onnxruntime (a cost per model and target). Other bytes (an entry
        rewritten since, whatever its record says) or another onnxruntime are checked again."""
        with contextlib.suppress(OSError):
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomically(self.directory / f"{sha256}.loads", _loads_line(sha256, runtime).encode())

    def discard(self, key: str) -> None:
        """Remove an entry (the record first, so no reader meets a record without its model)."""
        for path in reversed(self._paths(key)):
            with contextlib.suppress(OSError):
                path.unlink()

    def put(self, key: str, shrunk_model: Path, record: CachedShrink) -> str | None:
        """Store an entry; returns why it could not be stored, or ``None`` on success."""
        model, record_path = self._paths(key)
        try:
            self.directory.parent.mkdir(parents=True, exist_ok=True)
            self.directory.mkdir(mode=0o700, exist_ok=True)
            write_atomically(model, shrunk_model.read_bytes())
            write_atomically(record_path, json.dumps(encode(record), sort_keys=True, indent=2).encode())
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

