"""Human and JSON reports: sizes raw and compressed, what happened per tensor, verification."""

from __future__ import annotations

from pathlib import Path

from hatch_shrinkray.hints import record_hint
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.result import VerifyResult, human, render_table
from hatch_shrinkray.shrink_result import ShrinkResult
from hatch_shrinkray.sizes import BROTLI_HINT, Sizes
from hatch_shrinkray.verdict import WRITTEN, line_words, model_line, original_line, seconds

table = render_table


def encoded_summary(result: ShrinkResult) -> str:
    """``39 tensors int8``; with tensors a plan or ``encodings`` gave another encoding, each named by
    its own (``38 tensors int8, 1 tensor fp16``). ``auto`` chooses per tensor: ``12 tensors auto``."""
    counts: dict[str, int] = {result.method: 0}
    planned = bool(facts(result.method).plan)
    for record in result.encoded:
        kind = result.method if planned else record.encoding.split(" ")[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} tensor{'s' if n != 1 else ''} {kind}" for kind, n in counts.items()
                     if n or (kind == result.method and len(counts) == 1))


def one_line(result: ShrinkResult) -> str:
    """``m.onnx: shrunk, 21.2 -> 5.98 MB (28.2%), int8: same answers on 20 recorded calls, 1.2 s``: what
    became of the model and the verdict in words (:func:`detail_line` has the figures; it was written
    under ``--output`` by its own name, and the JSON report says where)."""
    path = result.source
    if result.kept_original is not None:
        return original_line(path, result.original_size, result.kept_original, prefix=0, state=WRITTEN)
    if not result.encoded:
        return original_line(path, result.original_size, nothing_to_shrink(result), prefix=0, state=WRITTEN)
    label, verdicts = line_words(result)
    return model_line(path, result.original_size, result.shrunk_size, label, verdicts, tail=seconds(result.seconds),
                      prefix=0, state=WRITTEN)


def nothing_to_shrink(result: ShrinkResult) -> str:
    return f"nothing to shrink: no float tensor reached min-elements ({result.options.get('min_elements')})"


def detail_line(result: ShrinkResult) -> str:
    """What ``-v`` adds: the compressed sizes, what was encoded, the verification's figures (the
    guard's comparison included) and what stayed float."""
    parts = [p for p in (result.size_text(), encoded_summary(result), result.fallback_text()) if p]
    if result.verification is not None:
        parts.append(result.verification.summary())
    if result.kept_summary():
        parts.append(result.kept_summary())
    return f"{result.source}: " + "; ".join(parts)


def sizes_table(original: Sizes, shrunk: Sizes, target: str | None = None) -> str:
    """Raw, wheel and web bytes of both models and their ratios; the target's column is marked."""
    def head(kind: str, label: str) -> str:
        return f"{label} (target)" if kind == target else label

    kinds = (("disk", "raw"), ("wheel", "wheel (deflate 6)"), ("web", "web (brotli 11)"))
    rows = [["", *(head(k, label) for k, label in kinds)]]
    for name, s in (("original", original), ("shrunk", shrunk)):
        rows.append([name, *(("~" if k == "web" and s.web_estimated else "") + f"{s.of(k)} ({human(s.of(k))})"
                             for k, _ in kinds)])
    rows.append(["ratio", *(f"{100 * shrunk.of(k) / original.of(k):.1f}%" if original.of(k) else "-"
                            for k, _ in kinds)])
    text = table(rows)
    if original.web_estimated or shrunk.web_estimated:
        text += ("\n~ web estimated (LZMA: 0.91-1.16x of brotli 11 measured, median 1.02); --sizes "
                 f"measures it ({BROTLI_HINT})")
    return text


def shrink_report(result: ShrinkResult, sizes: bool = False, verbose: bool = False) -> str:
    """The one line, then (``sizes``) the size table and (``verbose``) the figures, the tensors and
    the verification table; the verification's notes always."""
    parts = [one_line(result)]
    if verbose:
        parts[0] += "\n" + detail_line(result)
    if sizes and result.original_sizes is not None and result.shrunk_sizes is not None:
        parts.append(sizes_table(result.original_sizes, result.shrunk_sizes, result.target))
    if verbose and result.tensors:
        rows = [["tensor", "scope", "shape", "bytes", "stored", "encoding", "rel err", "note"]]
        rows += [[t.name, t.scope, "x".join(map(str, t.shape)) or "scalar", human(t.original_bytes),
                  human(t.stored_bytes), t.encoding, f"{t.rel_rms_error:.2e}" if t.encoding != "kept" else "-", t.note]
                 for t in result.tensors]
        parts.append(table(rows))
    if not result.encoded and result.kept_original is None:
        parts.append(f"{nothing_to_shrink(result)}; the output equals the input")
    if result.verification is not None:
        notes = verification_notes(result.verification)
        if verbose:
            parts.append(verification_report(result.verification))
        elif notes:
            parts.append("\n".join(notes))
    return "\n\n".join(parts)


def verification_report(verification: VerifyResult) -> str:
    """The comparison table under a heading that says what it rests on, with any notes, and the
    suggestion to record real inputs when they were generated."""
    lines = [f"verification on {verification.basis()}, {verification.input_source}:", verification.table()]
    return "\n".join(lines + verification_notes(verification))


def verification_notes(verification: VerifyResult) -> list[str]:
    """The verification's notes, and the suggestion to record real inputs when they were generated."""
    lines = [f"note: {n}" for n in verification.notes]
    if not verification.real:
        lines.append(f"note: a smoke check; {record_hint()}")
    return lines


def model_files(path: Path) -> list[Path]:
    """A model file and its external-data files (what a wheel ships for it)."""
    from hatch_shrinkray.onnxgraph.modelio import external_data_files

    return [path, *external_data_files(path)]

