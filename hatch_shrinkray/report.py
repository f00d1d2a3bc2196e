"""Human and JSON reports: sizes raw and compressed, what happened per tensor, verification."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import RECORD_HINT
from hatch_shrinkray.result import ShrinkResult, VerifyResult, human, render_table

BROTLI_QUALITY = 9  # q11 is 20-45x slower for < 1% on weight data (see the encodings note)
ZSTD_LEVEL = 19


def _compressors() -> dict[str, Callable[[bytes], int]]:
    out: dict[str, Callable[[bytes], int]] = {"gzip-9": lambda b: len(gzip.compress(b, 9, mtime=0))}
    try:
        import zstandard

        out[f"zstd-{ZSTD_LEVEL}"] = lambda b: len(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(b))
    except ImportError:
        pass
    try:
        import brotli

        out[f"brotli-{BROTLI_QUALITY}"] = lambda b: len(brotli.compress(b, quality=BROTLI_QUALITY))
    except ImportError:
        pass
    return out


def compressed_sizes(paths: Sequence[Path]) -> dict[str, int]:
    """Raw and compressed sizes of a model (its data files included), with what is installed."""
    data = b"".join(Path(p).read_bytes() for p in paths)
    sizes = {"raw": len(data)}
    for name, fn in _compressors().items():
        sizes[name] = fn(data)
    return sizes


table = render_table


def encoded_summary(result: ShrinkResult) -> str:
    """``39 tensors int8``; with tensors a plan or ``encodings`` gave another encoding, each named by
    its own (``38 tensors int8, 1 tensor fp16``). ``auto`` chooses per tensor: ``12 tensors auto``."""
    counts: dict[str, int] = {result.method: 0}
    for record in result.encoded:
        kind = result.method if result.method == "auto" else record.encoding.split(" ")[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} tensor{'s' if n != 1 else ''} {kind}" for kind, n in counts.items()
                     if n or (kind == result.method and len(counts) == 1))


def one_line(result: ShrinkResult) -> str:
    """``model.onnx: 21.23 MB -> 5.98 MB (28.2%), 39 tensors int8, cos 0.999, 1.2 s; kept float: ...``."""
    text = (f"{result.source}: {human(result.original_size)} -> {human(result.shrunk_size)} "
            f"({100 * result.ratio:.1f}%)")
    if result.kept_original is not None:
        text += f", original kept: {result.kept_original}"
    else:
        text += f", {encoded_summary(result)}"
        text += f", {result.verification.summary()}" if result.verification is not None else ", not verified"
    text += f", {result.seconds:.1f} s"
    kept = result.kept_summary()
    return f"{text}; {kept}" if kept else text


def shrink_report(result: ShrinkResult, sizes: dict[str, dict[str, int]] | None = None,
                  tensors: bool = True) -> str:
    parts = [one_line(result)]
    if sizes:
        kinds = list(next(iter(sizes.values())))
        rows = [["", *kinds]]
        for label, s in sizes.items():
            rows.append([label, *(human(s[k]) for k in kinds)])
        if len(sizes) == 2:
            a, b = sizes.values()
            rows.append(["ratio", *(f"{100 * b[k] / a[k]:.1f}%" if a[k] else "-" for k in kinds)])
        parts.append(table(rows))
    if tensors and result.tensors:
        rows = [["tensor", "scope", "shape", "bytes", "stored", "encoding", "rel err", "note"]]
        for t in result.tensors:
            rows.append([t.name, t.scope, "x".join(map(str, t.shape)) or "scalar", human(t.original_bytes),
                         human(t.stored_bytes), t.encoding,
                         f"{t.rel_rms_error:.2e}" if t.encoding != "kept" else "-", t.note])
        parts.append(table(rows))
    if not result.encoded and result.kept_original is None:
        parts.append("nothing to shrink: no float tensor reached min-elements "
                     f"({result.options.get('min_elements')}); the output equals the input")
    if result.verification is not None:
        parts.append(verification_report(result.verification))
    return "\n\n".join(parts)


def verification_report(verification: VerifyResult) -> str:
    """The comparison table under a heading that says what it rests on, with any notes, and the
    suggestion to record real inputs when they were generated."""
    lines = [f"verification on {verification.basis()}, {verification.input_source}:", verification.table()]
    lines += [f"note: {n}" for n in verification.notes]
    if not verification.real:
        lines.append(f"note: generated inputs are a smoke check, not evidence; {RECORD_HINT}")
    return "\n".join(lines)


def result_json(result: ShrinkResult, sizes: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    out = result.to_dict()
    if sizes:
        out["sizes"] = sizes
    return out

