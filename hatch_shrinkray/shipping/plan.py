"""``shrinkray-plan.json``: what ``hatch-shrinkray check`` chose for each model, which the hook,
``shrink`` and ``wheel`` then ship without running any test again: the per-tensor plans
``check --search`` found, and the remedies ``check --fix`` chose (round-to-nearest codes, int8
instead of ``auto``'s plan, fp16, or the original bytes).

Like the manifest, the file is content-addressed and meant for version control: each entry is keyed
by the sha256 of the original model it was found for (a changed model simply has no plan), lists
the tensors it sets (scope, name, encoding; every other tensor gets the configured method) or the
remedy, and records what the check that accepted it ran and saw, including the sha256 of the
shrunk model it tested, so a build can tell whether it ships exactly that model. Deterministic:
sorted keys, fixed formatting, no timestamps, no absolute paths. Version 1 files (plans only) are
still read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from hatch_shrinkray.codec import OMIT, SHA256, Format, Invalid, encode, loads, one_of
from hatch_shrinkray.errors import Malformed, ShrinkrayError
from hatch_shrinkray.files import read_regular, write_atomically
from hatch_shrinkray.options import ENCODINGS, Remedy, ShrinkOptions

PLAN_NAME = "shrinkray-plan.json"
MAX_BYTES = 64 << 20
"""A plan file lists tensors of a few models: kilobytes. Larger is not a plan."""
PLAN = Format("hatch-shrinkray-plan", 2, reads=(1, 2))
TENSOR = ("scope", "tensor", "encoding")
HINT = ("hatch-shrinkray check --fix (or --search) writes it; fix the entry, or delete the file and run "
        "check --fix again")


@dataclass(frozen=True)
class PlanEntry:
    model: str
    """The model's path in the project, for people (the sha256 key is what matches)."""
    method: str
    """The configured method the plan was searched from; the tensors not listed get it."""
    tensors: tuple[tuple[str, str, Annotated[str, one_of(ENCODINGS)]], ...]
    """``(scope, tensor name, encoding)``, sorted."""
    checked: dict[str, Any] = field(default_factory=dict)
    """What accepted the plan: the command, its tests and shadow flips, sizes, ``shrunk_sha256``."""
    remedy: Remedy | None = field(default=None, metadata=OMIT)
    """``check --fix``'s choice for this model (None: a ``check --search`` plan)."""

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        """Each tensor is written as an object that names its parts."""
        return {**body, "tensors": [dict(zip(TENSOR, t, strict=True)) for t in self.tensors]}

    @classmethod
    def json_in(cls, body: dict[str, Any]) -> dict[str, Any]:
        tensors = body.get("tensors")
        if not isinstance(tensors, list):
            return body
        return {**body, "tensors": [[t.get(k) for k in TENSOR] if isinstance(t, dict) else t for t in tensors]}

    def apply(self, options: ShrinkOptions) -> ShrinkOptions:
        chosen = replace(options, plan=self.tensors)
        return chosen if self.remedy is None else self.remedy.apply(chosen)

    @property
    def ships_original(self) -> bool:
        return self.remedy is not None and self.remedy.original


@dataclass(frozen=True)
class PlanFile:
    models: dict[Annotated[str, SHA256], PlanEntry]
    """By the sha256 of the original model each was found for."""


def render(entries: Mapping[str, PlanEntry]) -> str:
    body = {"format": PLAN.name, "version": PLAN.version, **encode(PlanFile(dict(sorted(entries.items()))))}
    return json.dumps(body, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def read_plan(path: Path) -> dict[str, PlanEntry]:
    """The plans in ``path`` by original sha256; ShrinkrayError naming the file and every bad entry."""
    try:
        plan: PlanFile = loads(PlanFile, read_regular(path, MAX_BYTES), PLAN)
    except OSError as exc:
        raise ShrinkrayError(f"cannot read the plan: {exc.strerror or exc}", path=str(path), hint=HINT) from exc
    except Invalid as exc:
        raise Malformed("\n".join(exc.problems), path=str(path), hint=HINT) from exc
    return {sha: replace(entry, tensors=tuple(sorted(entry.tensors))) for sha, entry in plan.models.items()}


def write_plan(path: Path, entries: Mapping[str, PlanEntry]) -> None:
    """Write the plan file atomically (a reader sees the old file or the complete new one), with the
    same bytes on every platform."""
    write_atomically(path, render(entries).encode())


def merge_plan(path: Path, entries: Mapping[str, PlanEntry], *, judged: set[str] | None = None,
               old: Mapping[str, PlanEntry] | None = None) -> None:
    """Merge ``entries`` into the plan file at ``path`` (``old``: what it held, by default read from
    it): other models' plans stay; plans for other bytes of the models judged (by default, those
    ``entries`` name) go, so a plan never outlives the bytes it was found for."""
    if old is None:
        old = read_plan(path) if path.is_file() else {}
    searched = judged if judged is not None else {e.model for e in entries.values()}
    kept = {sha: e for sha, e in old.items() if e.model not in searched}
    try:
        write_plan(path, {**kept, **entries})
    except OSError as exc:
        raise ShrinkrayError(f"cannot write the plan: {exc.strerror or exc}", path=str(path)) from exc
