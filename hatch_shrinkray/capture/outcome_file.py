"""The file each pytest session of a ``check`` command leaves: written by the plugin
``capture.outcomes`` inside that pytest, read by ``check`` (``capture.observe``), which imports no pytest."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    outcome: str
    text: str = ""


@dataclass(frozen=True)
class Session:
    rootdir: str
    exitstatus: int
    tests: dict[str, Outcome]
