"""An installed distribution's ``RECORD`` kept true to the files it lists.

pip, uv and ``installer`` write one ``<name>.dist-info/RECORD`` per installed distribution: a CSV
row per file, its path relative to the directory that holds the ``.dist-info`` (``../../bin/x`` for
a script), the urlsafe-base64 sha256 and the size. ``pip uninstall`` removes what it lists, ``pip
show -f`` lists it, and checkers (``pip-audit``, ``installer``'s own validation) compare the hashes.
A file this run replaces gets its new fields in every RECORD that lists it, under whatever path
reaches it (a link included); a file that leaves the tree loses its row; every other row and byte
of the file stays as it was.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.wheels.archive import RECORD_MAX_BYTES, record_fields


@dataclass(frozen=True)
class Listed:
    """Which RECORD files list one file of the tree, under which row."""

    record: str
    """The RECORD, relative to the bundle directory."""
    row: str
    """The path as that RECORD spells it."""

    @property
    def distribution(self) -> str:
        """``name-version`` of the distribution, from its ``.dist-info`` directory's name."""
        return Path(self.record).parent.name.removesuffix(".dist-info")


@dataclass(frozen=True)
class Records:
    """The RECORD files of a tree, read once; by the real path of each file they list."""

    root: Path
    rows: Mapping[str, list[list[str]]]
    """RECORD (relative to ``root``) -> its rows as read."""
    listing: Mapping[Path, tuple[Listed, ...]]

    def of(self, real: Path) -> tuple[Listed, ...]:
        return self.listing.get(real, ())

    def rewritten(self, changed: Mapping[Path, Path | None]) -> dict[str, str]:
        """RECORD (relative) -> its new text, for each RECORD that lists a file of ``changed`` (real
        path -> the file whose bytes it now holds, or None when it leaves the tree)."""
        fields = {real: None if new is None else record_fields(new) for real, new in changed.items()}
        out: dict[str, str] = {}
        for record, rows in self.rows.items():
            base = (self.root / record).parent.parent
            new_rows, touched = [], False
            for row in rows:
                real = _real(base, row[0]) if row else None
                if real is None or real not in fields:
                    new_rows.append(row)
                    continue
                touched, now = True, fields[real]
                if now is not None:
                    new_rows.append([row[0], *now])
            if touched:
                text = io.StringIO()
                csv.writer(text, lineterminator="\n").writerows(new_rows)
                out[record] = text.getvalue()
        return out


def read_records(root: Path, records: Iterable[str]) -> Records:
    """The rows of each RECORD under ``root`` (one ShrinkrayError naming a RECORD that cannot be read)."""
    rows: dict[str, list[list[str]]] = {}
    listing: dict[Path, list[Listed]] = {}
    for record in records:
        path = root / record
        try:
            with open(path, "rb") as fh:
                data = fh.read(RECORD_MAX_BYTES + 1)
            if len(data) > RECORD_MAX_BYTES:
                raise ValueError(f"it is over {RECORD_MAX_BYTES >> 20} MB")
            parsed = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        except (OSError, ValueError, csv.Error) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ShrinkrayError(f"cannot read this installed distribution's file list: {why}", path=record,
                                 hint="reinstall the distribution (pip install --force-reinstall --no-deps NAME)"
                                 ) from exc
        rows[record] = parsed
        base = path.parent.parent
        for row in parsed:
            real = _real(base, row[0]) if row else None
            if real is not None:
                listing.setdefault(real, []).append(Listed(record, row[0]))
    return Records(root, rows, {k: tuple(v) for k, v in listing.items()})


def _real(base: Path, row: str) -> Path | None:
    """The real path a RECORD row names (None for an absolute path: not one a wheel installs)."""
    return None if not row or os.path.isabs(row) else Path(os.path.realpath(base / row))
