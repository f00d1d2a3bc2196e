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
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import create_beside, read_regular
from hatch_shrinkray.options import ENCODINGS, METHODS, ROUNDINGS, Remedy, ShrinkOptions, string
from hatch_shrinkray.signals import deferred

PLAN_NAME = "shrinkray-plan.json"
MAX_BYTES = 64 << 20
"""A plan file lists tensors of a few models: kilobytes. Larger is not a plan."""
FORMAT = "hatch-shrinkray-plan"
VERSION = 2
READS = (1, 2)
HINT = ("hatch-shrinkray check --fix (or --search) writes it; fix the entry, or delete the file and run "
        "check --fix again")


@dataclass(frozen=True)
class PlanEntry:
    model: str
    """The model's path in the project, for people (the sha256 key is what matches)."""
    method: str
    """The configured method the plan was searched from; the tensors not listed get it."""
    tensors: tuple[tuple[str, str, str], ...]
    """``(scope, tensor name, encoding)``, sorted."""
    checked: dict[str, Any] = field(default_factory=dict)
    """What accepted the plan: the command, its tests and shadow flips, sizes, ``shrunk_sha256``."""
    remedy: Remedy | None = None
    """``check --fix``'s choice for this model (None: a ``check --search`` plan)."""

    def to_dict(self) -> dict[str, Any]:
        body = {"model": self.model, "method": self.method, "checked": self.checked,
                "tensors": [{"scope": s, "tensor": t, "encoding": e} for s, t, e in self.tensors]}
        return body if self.remedy is None else {**body, "remedy": self.remedy.to_dict()}

    def apply(self, options: ShrinkOptions) -> ShrinkOptions:
        chosen = replace(options, plan=self.tensors)
        return chosen if self.remedy is None else self.remedy.apply(chosen)

    @property
    def ships_original(self) -> bool:
        return self.remedy is not None and self.remedy.original


def render(entries: Mapping[str, PlanEntry]) -> str:
    body = {"format": FORMAT, "version": VERSION,
            "models": {sha: entry.to_dict() for sha, entry in sorted(entries.items())}}
    return json.dumps(body, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def read_plan(path: Path) -> dict[str, PlanEntry]:
    """The plans in ``path`` by original sha256; ShrinkrayError naming the file and the entry."""
    label = str(path)
    hint = HINT
    try:
        data = json.loads(read_regular(path, MAX_BYTES).decode("utf-8"))
    except OSError as exc:
        raise ShrinkrayError(f"cannot read the plan: {exc.strerror or exc}", path=label, hint=hint) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ShrinkrayError(f"the plan is not valid JSON: {exc}", path=label, hint=hint) from exc
    except RecursionError as exc:
        raise ShrinkrayError("the plan is not a plan: its JSON is nested too deeply", path=label, hint=hint) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ShrinkrayError(f"not a hatch-shrinkray plan (format is not {FORMAT!r})", path=label, hint=hint)
    if data.get("version") not in READS:
        raise ShrinkrayError(f"plan version {data.get('version')!r}; this hatch-shrinkray reads versions "
                             f"{', '.join(map(str, READS))}", path=label, hint=hint)
    models = data.get("models")
    if not isinstance(models, dict):
        raise ShrinkrayError("`models` must be an object keyed by sha256", path=label, hint=hint)
    return {str(sha): _entry(sha, item, label, hint) for sha, item in models.items()}


def _entry(sha: str, item: Any, label: str, hint: str) -> PlanEntry:
    where = f"models.{sha[:16]}"
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ShrinkrayError(f"`models` key {sha!r} is not a sha256", path=label, hint=hint)
    try:
        if not isinstance(item["tensors"], list) or not isinstance(item.get("checked") or {}, dict):
            raise TypeError("tensors must be a list and checked an object")
        tensors = tuple(sorted((string(t["scope"]), string(t["tensor"]), string(t["encoding"]))
                               for t in item["tensors"]))
        remedy = Remedy.from_dict(item["remedy"]) if item.get("remedy") is not None else None
        entry = PlanEntry(string(item["model"]), string(item["method"]), tensors, dict(item.get("checked") or {}),
                          remedy)
    except KeyError as exc:
        raise ShrinkrayError(f"`{where}` lacks {exc}", path=label, hint=hint) from exc
    except TypeError as exc:
        raise ShrinkrayError(f"`{where}` is not shaped like a plan entry ({exc})", path=label, hint=hint) from exc
    bad = [f"{t} = {e!r}" for _, t, e in tensors if e not in ENCODINGS]
    if bad:
        raise ShrinkrayError(f"`{where}.tensors` has unknown encodings ({', '.join(bad[:3])}); "
                             f"one of {', '.join(ENCODINGS)}", path=label, hint=hint)
    remedy = entry.remedy
    if remedy is not None and (remedy.method not in (None, *METHODS) or remedy.rounding not in (None, *ROUNDINGS)):
        raise ShrinkrayError(f"`{where}.remedy` is not one this hatch-shrinkray knows ({remedy.to_dict()}); method "
                             f"one of {', '.join(METHODS)}, rounding one of {', '.join(ROUNDINGS)}", path=label,
                             hint=hint)
    return entry


def write_plan(path: Path, entries: Mapping[str, PlanEntry]) -> None:
    """Write the plan file atomically (a reader sees the old file or the complete new one)."""
    with deferred():  # no signal between creating the temporary file and owning it
        fd, tmp = create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render(entries))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
