"""Every line a build prints about its models, worded from shipping's typed decisions
(``outcome``): the per-model line and its ``-v`` detail, why an original ships, what a plan
does, the advice that follows the models and the total.

Each model's line says first what shipped (``shipped shrunk``, ``shipped its original``), then why
in words; a failure ends the build with its own error. The verdict's words themselves (``same
answers on 20 recorded calls``, what became of the fitting) are ``verdict``'s, which the ``shrink``
command words the same way; this module puts them on the build's lines, each within
``verdict.LINE_LIMIT`` characters for a path of ``verdict.PATH_ROOM``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.hints import LINE_LIMIT, PATH_ROOM, check_hint, counted, record_hint, setting
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord, human, size_change
from hatch_shrinkray.shipping.advice import record_advice
from hatch_shrinkray.shipping.cache import CachedShrink
from hatch_shrinkray.shipping.display import PREFIX
from hatch_shrinkray.shipping.outcome import Shipped
from hatch_shrinkray.shipping.plan import PlanEntry
from hatch_shrinkray.verdict import PREFIX_ROOM, SHIPPED, State, clipped, model_line, original_line, seconds, sizes


def sdist_original_line(relpath: str, size: int) -> str:
    return f"{PREFIX} " + original_line(relpath, size, 'as configured (sdist = "original")')


def manifest_match_line(relpath: str, size: int, original_size: int | None) -> str:
    """A model shrunk already (an sdist, a wheel or a tree whose manifest names these bytes): it ships as
    it is; the words fit every source, the sdist a wheel is built from as much as a second ``bundle``."""
    if original_size is None:
        return f"{PREFIX} {relpath}: shipped shrunk ({human(size)}), {AS_BEFORE}"
    return f"{PREFIX} {relpath}: shipped shrunk, {sizes(original_size, size)}, {AS_BEFORE}"


AS_BEFORE = "already shrunk (its manifest names these bytes)"


def waiting_line(relpath: str, size: int, method: str) -> str:
    return f"{PREFIX} {relpath} ({human(size)}): {method}..."


def already_quantized_line(relpath: str, size: int, message: str) -> str:
    return f"{PREFIX} " + original_line(relpath, size, message)


def tensor_line(tensor: TensorRecord) -> str:
    """One weight under ``-v``: its shape, encoding and bytes before and after."""
    return (f"{PREFIX}   {tensor.name} {list(tensor.shape)} {tensor.encoding} "
            f"{human(tensor.original_bytes)} -> {human(tensor.stored_bytes)}")


def why_unchanged(options: ShrinkOptions) -> str:
    """Why no weight was shrunk, in the option's words."""
    if facts(options.method).unchanged:
        return facts(options.method).unchanged
    why = f"no weight has min-elements ({options.min_elements}) elements or more"
    if options.exclude_tensors or options.exclude_ops:
        why += " outside exclude-tensors / exclude-ops"
    return why


def nothing_to_shrink(options: ShrinkOptions) -> str:
    return f"nothing to shrink: {why_unchanged(options)}"


def unchanged_line(relpath: str, size: int, why: str) -> str:
    """The line of a model whose original ships because nothing qualified, it would not be smaller,
    or every choice failed its limits: why, shortened to the line's budget (:func:`unchanged_detail_line`
    has it whole)."""
    return f"{PREFIX} " + original_line(relpath, size, why)


def unchanged_detail_line(relpath: str, size: int, why: str) -> str | None:
    """What ``-v`` adds when the line had no room for the whole reason."""
    whole = f"{PREFIX} {relpath}: shipped its original ({human(size)}): {why}"
    return None if whole == unchanged_line(relpath, size, why) else whole


def kept_line(relpath: str, size: int, why: str) -> str:
    """The one short line for a model whose original ships because generated inputs could not
    verify it: why, without its figures (``-v`` has them; the record command follows the models)."""
    cut = min((i for i in (why.find(" ("), why.find(": ")) if i > 0), default=len(why))
    return f"{PREFIX} " + original_line(relpath, size, f"{why[:cut]} (see below)")


def kept_detail_line(relpath: str, size: int, why: str) -> str:
    return f"{PREFIX} {relpath}: shipped its original ({human(size)}): {why}"


def success_line(relpath: str, record: CachedShrink, cached: bool, plan: PlanEntry | None = None,
                 options: ShrinkOptions | None = None) -> str:
    """The model's one line: that it shipped shrunk, its sizes, what shipped and the verdict in words
    (``detail_line`` has the figures); a ``check --fix`` remedy is named as the choice it is (``int8
    round-to-nearest``, on the configured ``options``; with a per-tensor plan, the label says the
    tensors: ``int8 + 1 int12 tensor``) with how many tests chose it."""
    verdicts = list(record.verdicts) or ["not verified" if record.summary is None else record.summary]
    label = record.label or record.entry.method
    if plan is not None and plan.remedy is not None:
        chosen = plan.remedy.describe(options) if options is not None and not plan.tensors else label
        label = f"{chosen}, check --fix's choice"
        verdicts = [f"{fix_reason(plan)}; {verdicts[0]}", *verdicts]
    timing = "cached" if cached else seconds(record.seconds)
    return f"{PREFIX} " + model_line(relpath, record.original_size, record.shrunk_size, label, verdicts, tail=timing,
                                     keep_tail=cached)


def detail_line(relpath: str, record: CachedShrink, cached: bool) -> str:
    """What ``-v`` adds under the model's line: the compressed sizes, the verification's figures and
    the guard's comparison, what stayed float, and the time a cache hit saved."""
    parts = [size_change(*record.sizes)] if record.sizes is not None else []
    parts.append(record.summary or f"not verified ({setting('verify', False)})")
    parts += [record.kept] if record.kept else []
    parts += [f"cached: {record.seconds:.1f} s saved"] if cached else []
    return f"{PREFIX} {relpath}: " + "; ".join(parts)


FAILS_KEPT = "; FAILS verification (kept for check only)"
"""Added to the figures of a model that fails verification, which only ``check`` keeps."""


def note_line(relpath: str, note: str) -> str:
    return f"{PREFIX} {relpath}: {note}"


def cache_unused_line(relpath: str, key: str, problem: str) -> str:
    return f"{PREFIX} {relpath}: cache entry {key[:16]} is not used ({problem}); shrinking again"


def outside_line(relpath: str, target: Path) -> str:
    """A model whose path leaves the project through a link (``shipping.links``)."""
    return f"{PREFIX} {relpath} links outside the project, to {target}: that file is what ships"


def cache_hit_line(relpath: str, key: str, checked: str = "") -> str:
    """``-v``: the entry served, and what comparing it with the original found (nothing to compare
    for the model file's own bytes)."""
    return f"{PREFIX} cache hit {key[:16]} for {relpath}" + (f"; checked against the original: {checked}"
                                                            if checked else "")


def cache_unwritten_line(problem: str) -> str:
    return f"{PREFIX} could not write the cache entry: {problem}"


def cache_disabled_line() -> str:
    return f"{PREFIX} cache disabled (cache = false)"


def cache_directory_line(directory: Path) -> str:
    return f"{PREFIX} cache directory {directory}"


def record_advice_line(root: Path, inputs: Path | None, models: Sequence[str]) -> str:
    """One line per record command, however many kept models it concerns."""
    return f"{PREFIX} {_models(models)}: {record_advice(root, inputs, models=len(models))}"


def generated_line(models: Sequence[str]) -> str:
    """One line, or two where the record command (the user's own) would take the first past the budget."""
    said, hint = f"{PREFIX} {_models(models)}: verified on generated inputs only (a smoke check)", record_hint()
    return f"{said}; {hint}" if counted(f"{said}; {hint}") <= LINE_LIMIT else f"{said}\n{PREFIX} {hint}"


def weak_line(models: Sequence[str]) -> str:
    """The models whose verdict rests on few independent units (each line says what was fitted)."""
    return (f"{PREFIX} {_models(models)}: verdict on fewer than {MIN_UNITS} independent units (weak evidence); "
            "record more of the program's real use")


def _models(models: Sequence[str]) -> str:
    """The models a line after them concerns: named while they fit, else counted."""
    named = ", ".join(models)
    return named if len(models) == 1 or counted(named) <= PATH_ROOM + 20 else \
        f"{len(models)} models ({Path(models[0]).name}, ...)"


SHRUNK = ("shrunk", "cached")
AS_HELD = "pass-through"
"""The outcomes that ship shrunk bytes: shrunk now or taken from the cache, or held shrunk by the sdist."""


def total_line(shipped: Sequence[Shipped], seconds: float) -> str:
    """``total 3 models: 1 shipped shrunk, 2 shipped their original; 6.00 -> 3.00 MB (50.0%) in 2.1 s``.
    A model the sdist holds shrunk (its manifest entry names other bytes than the original's) counts as
    shrunk, against the size it had before where the manifest records it (``original_size``)."""
    before = sum(s.original_size for s in shipped)
    after = sum(s.shipped_size for s in shipped)
    shrunk = sum(s.outcome in SHRUNK for s in shipped)
    held = sum(s.outcome == AS_HELD and s.entry is not None and s.entry.shrunk_sha256 != s.entry.original_sha256
               for s in shipped)
    originals = len(shipped) - shrunk - held
    plural = "s" if len(shipped) != 1 else ""
    parts = [f"{shrunk} shipped shrunk"] if shrunk else []
    parts += [f"{held} shipped already shrunk"] if held else []
    parts += [f"{originals} shipped {'their' if originals != 1 else 'its'} original"] if originals else []
    if not shrunk and not held:
        return f"{PREFIX} total {len(shipped)} model{plural}: no model shrunk, {parts[0]} ({human(before)}) " \
               f"in {seconds:.1f} s"
    return (f"{PREFIX} total {len(shipped)} model{plural}: {', '.join(parts)}; {sizes(before, after)} "
            f"in {seconds:.1f} s")


def data_stays_line(relpath: str, data: str, size: int, readers: Sequence[str], *, configured: bool) -> str:
    """An original's data file other models still read (the first of ``readers``: ``configured``
    but shipping its original bytes, or not configured), so it stays in the archive."""
    why = "is configured but ships its original bytes" if configured else "is not configured"
    reader = readers[0]
    return (f"{PREFIX} {relpath}: {data} stays in the archive ({human(size)}): {reader} reads it too and {why}; "
            f"configure {', '.join(readers)} as well to leave it out")


def left_out_line(relpath: str, obsolete: Sequence[tuple[str, int]], own: Sequence[str]) -> str:
    """Says which of the original's data files the archive no longer holds, and where the shrunk
    model keeps its weights instead (nothing leaves an archive without a line)."""
    files = ", ".join(f"{data} ({human(size)})" for data, size in obsolete)
    where = f"in {', '.join(own)}" if own else "inside the model file"
    verb = "is" if len(obsolete) == 1 else "are"
    return (f"{PREFIX} {relpath}: {files}, the original's external data, {verb} left out of the archive: the "
            f"shrunk model holds its weights {where}")


def fix_reason(plan: PlanEntry) -> str:
    """Why ``check --fix`` chose ``plan``'s remedy, counting the tests (``-v`` and the plan file name them)."""
    regressed = plan.checked.get("regressed")
    n = len(regressed) if isinstance(regressed, list) else 0
    return "check --fix's choice" if not n else f"{n} test{'s' if n != 1 else ''} regressed with cheaper choices"


def fix_line(relpath: str, plan: PlanEntry, options: ShrinkOptions, size: int = 0, state: State = SHIPPED) -> str:
    """What a build says of a model ``check --fix`` chose a remedy for: its original (``m.onnx: shipped
    its original (6.59 MB), check --fix's choice: 3 tests regressed with cheaper choices``), or the
    choice before it is shrunk (a build's line after the shrink names it too: ``success_line``)."""
    assert plan.remedy is not None
    if plan.remedy.original:
        return original_line(relpath, size, fix_reason(plan), what=", check --fix's choice", state=state,
                             prefix=PREFIX_ROOM if state is SHIPPED else 0)
    return clipped(f"{relpath}: {plan.remedy.describe(options, plan.tensors)}, check --fix's choice: "
                   f"{fix_reason(plan)}")


def fix_detail_line(relpath: str, plan: PlanEntry, options: ShrinkOptions) -> str:
    """What ``-v`` says of a ``check --fix`` remedy: the choice and the reason it recorded, tests named."""
    assert plan.remedy is not None
    reason = plan.checked.get("reason")
    because = f" ({reason})" if isinstance(reason, str) and reason else ""
    return f"{PREFIX} {relpath}: {plan.remedy.describe(options, plan.tensors)}, as check --fix chose{because}"


def again(plan: PlanEntry) -> str:
    """The check that made ``plan`` (``--fix`` or ``--search``), with the test command it recorded."""
    command = plan.checked.get("command")
    return check_hint(command if isinstance(command, str) and command else None,
                      fix=plan.remedy is not None)


def stale_plan_line(relpath: str, name: str, method: str, stale: PlanEntry) -> str:
    return (f"{PREFIX} {relpath}: {name} holds a plan for other bytes of this model (it changed since it was "
            f"checked); shipping {method} without it; run `{again(stale)}` again")


def plan_line(relpath: str, name: str, plan: PlanEntry) -> str:
    """What a search plan sets, its first tensors named."""
    listed = ", ".join(f"{t} {e}" for _, t, e in plan.tensors[:4]) + (" ..." if len(plan.tensors) > 4 else "")
    what = f"sets {len(plan.tensors)} tensor(s): {listed}" if plan.tensors else "keeps the method as configured"
    return f"{PREFIX} {relpath}: the plan in {name} {what}"


def accepted_line(relpath: str, plan: PlanEntry) -> str:
    return f"{PREFIX} {relpath}: this is the model `check` accepted ({plan.checked.get('verdict', '')})"


def not_accepted_line(relpath: str, plan: PlanEntry) -> str:
    return (f"{PREFIX} {relpath}: differs from the model `check` accepted (the options, inputs or tool versions "
            f"changed since): its tests did not judge these bytes; run `{again(plan)}` again")


def unrecorded_acceptance_line(relpath: str, plan: PlanEntry) -> str:
    return (f"{PREFIX} {relpath}: the plan does not record which model `check` accepted, so nothing says its "
            f"tests judged these bytes; run `{again(plan)}` again")


def link_line(link: str, target: str) -> str:
    """A configured model that is a link (``bundle``): its target is shrunk, the link stays."""
    return f"{PREFIX} {link}: a link to {target}, which is shrunk (once); the link stays a link"


def link_outside_line(link: str, target: str) -> str:
    return f"{PREFIX} {link}: left as it is, a link out of the tree (to {target})"


def shared_record_line(relpath: str, distributions: Sequence[str]) -> str:
    """A changed file that several installed distributions list (``bundle``): each RECORD follows it."""
    return (f"{PREFIX} {relpath}: listed by {len(distributions)} installed distributions "
            f"({', '.join(distributions[:3])}{' ...' if len(distributions) > 3 else ''}); each RECORD now has its "
            "new sha256 and size")


def check_run_line(which: str, command: str) -> str:
    return f"check: {which}: {command}"


def left_as_is_line(relpath: str, why: str) -> str:
    """A file of a tree the engine cannot take (``bundle``): it stays; ``-v`` says the whole error."""
    short = why if len(why) <= 80 else why[:77].rstrip() + "..."
    return f"{PREFIX} {relpath}: shipped as it is, the engine cannot take it: {short}"
