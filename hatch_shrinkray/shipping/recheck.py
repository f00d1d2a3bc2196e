"""A cache hit is checked before it ships: the cached model runs beside the original on the inputs
the build verifies with, and ships only where that verification passes.

An entry's record and digests say only what whoever wrote the entry wanted them to say: a CI cache
restored from a less trusted workflow, or a forged entry whose manifest and digests agree, would
otherwise ship any bytes at all. Comparing outputs with the original ties the bytes to this
build's own model and limits; it costs the verification's inference, not a shrink. Bytes that are
the model file's own (a model with nothing to shrink) need no check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.shipping.requirements import engine_missing


@dataclass(frozen=True)
class Rechecked:
    """What comparing a cache entry's model with the original found."""

    problem: str | None
    """Why the entry may not ship, in a few words (its outputs differ, or it cannot be checked);
    None: it passed."""
    summary: str = ""
    """The check's figures, or what failed and why, for ``-v``."""


def recheck(original: Path, cached: Path, options: ShrinkOptions, *, label: str, sha256: str) -> Rechecked:
    """Run ``original`` and ``cached`` on the inputs ``options`` verify with (generated inputs under
    the default limits where verification is off: the user chose not to verify what is shrunk, not
    to ship whatever a cache holds) and judge them as the build does."""
    try:
        from hatch_shrinkray.verification.runner import reference_outputs, verify_against
    except ModuleNotFoundError as exc:
        raise engine_missing(exc) or exc from exc

    verify = options.verify or VerifyOptions()
    try:
        reference = reference_outputs(original, label, verify, sha256=sha256, name=label)
        result = verify_against(reference, cached, label, verify)
    except ShrinkrayError as exc:
        return Rechecked("it cannot be compared with the original", exc.message)
    if not result.passed:
        failed = next(o for o in result.outputs if not o.ok)
        return Rechecked(f"outputs differ from the original's ({failed.name})",
                         f"{failed.name} {failed.failures[0]} on {result.basis(symbols=False)}")
    return Rechecked(None, result.summary())
