"""Every line a build prints about its models, worded from shipping's typed decisions
(``outcome``): the per-model line and its ``-v`` detail, why an original ships, what a plan
does, the advice that follows the models and the total.

The verdict's words themselves (``same answers on 20 recorded calls``, what became of the
fitting) belong to the verification record (``result``), which the ``shrink`` command words the
same way; this module puts them on the build's lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.hints import check_hint, record_hint, setting
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord, human, size_change
from hatch_shrinkray.shipping.advice import record_advice
from hatch_shrinkray.shipping.cache import CachedShrink
from hatch_shrinkray.shipping.display import PREFIX
from hatch_shrinkray.shipping.outcome import Shipped
from hatch_shrinkray.shipping.plan import PlanEntry
from hatch_shrinkray.verdict import model_line, room, seconds, shortened


def sdist_original_line(relpath: str, size: int) -> str:
    return f"{PREFIX} {relpath}: sdist = \"original\"; shipping as-is ({human(size)})"


def manifest_match_line(relpath: str, size: int) -> str:
    return f"{PREFIX} {relpath}: already shrunk (manifest match); shipping as-is ({human(size)})"


def waiting_line(relpath: str, size: int, method: str) -> str:
    return f"{PREFIX} {relpath} ({human(size)}): {method}..."


def already_quantized_line(relpath: str, message: str) -> str:
    return f"{PREFIX} {relpath}: {message}; shipping it unchanged"


def tensor_line(tensor: TensorRecord) -> str:
    """One weight under ``-v``: its shape, encoding and bytes before and after."""
    return (f"{PREFIX}   {tensor.name} {list(tensor.shape)} {tensor.encoding} "
            f"{human(tensor.original_bytes)} -> {human(tensor.stored_bytes)}")


def why_unchanged(options: ShrinkOptions) -> str:
    """Why no weight was shrunk, in the option's words."""
    if options.method == "dedup":
        return "no two weights are identical"
    why = f"no weight has min-elements ({options.min_elements}) elements or more"
    if options.exclude_tensors or options.exclude_ops:
        why += " outside exclude-tensors / exclude-ops"
    return why


def nothing_to_shrink(options: ShrinkOptions) -> str:
    return f"nothing to shrink: {why_unchanged(options)}"


def unchanged_line(relpath: str, why: str) -> str:
    """The line of a model whose original ships because nothing qualified or it would not be
    smaller: why, shortened to the line's budget (:func:`unchanged_detail_line` has it whole)."""
    shipping = "; shipping the original"
    return f"{PREFIX} {relpath}: {shortened(why, room(relpath) - 2 - len(shipping))}{shipping}"


def unchanged_detail_line(relpath: str, why: str) -> str | None:
    """What ``-v`` adds when the line had no room for the whole reason."""
    whole = f"{PREFIX} {relpath}: {why}; shipping the original"
    return None if whole == unchanged_line(relpath, why) else whole


def kept_line(relpath: str, why: str) -> str:
    """The one short line for a model whose original ships because generated inputs could not
    verify it: why, without its figures (``-v`` has them; the record command follows the models)."""
    cut = min((i for i in (why.find(" ("), why.find(": ")) if i > 0), default=len(why))
    kept = "original kept: "
    return f"{PREFIX} {relpath}: {kept}{shortened(why[:cut], room(relpath) - 2 - len(kept))}"


def kept_detail_line(relpath: str, why: str) -> str:
    return f"{PREFIX} {relpath}: original kept: {why}"


def success_line(relpath: str, record: CachedShrink, cached: bool) -> str:
    """The model's one line: sizes, method and the verdict in words (``detail_line`` has the figures)."""
    verdict = record.verdict or ("not verified" if record.summary is None else record.summary)
    verdicts = [verdict, record.verdict_bare] if record.verdict_bare else [verdict]
    timing = "cached" if cached else seconds(record.seconds)
    return f"{PREFIX} " + model_line(relpath, record.original_size, record.shrunk_size, record.entry.method,
                                     verdicts, tail=timing)


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


def cache_hit_line(relpath: str, key: str) -> str:
    return f"{PREFIX} cache hit {key[:16]} for {relpath}"


def cache_unwritten_line(problem: str) -> str:
    return f"{PREFIX} could not write the cache entry: {problem}"


def cache_disabled_line() -> str:
    return f"{PREFIX} cache disabled (cache = false)"


def cache_directory_line(directory: Path) -> str:
    return f"{PREFIX} cache directory {directory}"


def record_advice_line(root: Path, inputs: Path | None, models: Sequence[str]) -> str:
    """One line per record command, however many kept models it concerns."""
    return f"{PREFIX} {', '.join(models)}: {record_advice(root, inputs, models=len(models))}"


def generated_line(models: Sequence[str]) -> str:
    return f"{PREFIX} {', '.join(models)}: verified on generated inputs only, a smoke check; {record_hint()}"


def weak_line(models: Sequence[str]) -> str:
    return (f"{PREFIX} {', '.join(models)}: verified on fewer than {MIN_UNITS} independent units "
            "(streams, test cases, calls): weak evidence; record more of the program's real use "
            "(below that, nothing is fitted to the recording)")


def weak_model(relpath: str, fitted: bool) -> str:
    """A model in the weak-evidence line: a plan fitted on one half is verified on the other, where
    weak is not "nothing fitted"."""
    return f"{relpath} (its fitted choice was judged on the held-out units only)" if fitted else relpath


OUTCOME_WORDS = {"shrunk": "shrunk", "cached": "cached", "pass-through": "pass-through",
                 "kept-original": "kept original", "unchanged": "unchanged", "already-quantized": "already-quantized"}
"""The outcomes in the order the total line counts them."""


def total_line(shipped: Sequence[Shipped], seconds: float) -> str:
    """``total 3 models (1 shrunk, 2 kept original): 6 MB -> 3 MB (50.0%) in 2.1 s``; when no model
    was shrunk (now, from the cache, or before: a pass-through), it says so first."""
    before = sum(s.original_size for s in shipped)
    after = sum(s.shipped_size for s in shipped)
    counts = {o: sum(s.outcome == o for s in shipped) for o in OUTCOME_WORDS}
    plural = "s" if len(shipped) != 1 else ""
    if shipped and not any(counts[o] for o in ("shrunk", "cached", "pass-through")):
        parts = []
        if counts["kept-original"]:
            n = counts["kept-original"]
            parts.append(f"{n} kept {'their' if n != 1 else 'its'} original (the lines above say why)")
        parts += [f"{n} {OUTCOME_WORDS[o]}" for o, n in counts.items() if n and o != "kept-original"]
        return (f"{PREFIX} total {len(shipped)} model{plural}: no model was shrunk: {', '.join(parts)}; "
                f"{human(before)} in {seconds:.1f} s")
    detail = ", ".join(f"{n} {OUTCOME_WORDS[o]}" for o, n in counts.items() if n)
    ratio = f" ({100 * after / before:.1f}%)" if before else ""
    return (f"{PREFIX} total {len(shipped)} model{plural} ({detail}): {human(before)} -> {human(after)}"
            f"{ratio} in {seconds:.1f} s")


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


def fix_line(relpath: str, plan: PlanEntry, options: ShrinkOptions, size: int = 0) -> str:
    """What a build says of a model ``check --fix`` chose a remedy for, with the reason it recorded:
    ``m.onnx: int8 round-to-nearest, as check --fix chose (... regressed with the fitted codes)``."""
    assert plan.remedy is not None
    reason = plan.checked.get("reason")
    because = f" ({reason})" if isinstance(reason, str) and reason else ""
    if plan.remedy.original:
        return f"{relpath}: ships its original bytes ({human(size)}), as check --fix chose{because}"
    return f"{relpath}: {plan.remedy.describe(options, plan.tensors)}, as check --fix chose{because}"


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
