"""The models ``check`` swaps in: each configured model shrunk as the configuration (and the plan
file) says, through the cache, written into a work directory: what the build ships, a choice that
fails its limits on the recording having fallen back as in the build. Under ``strict`` (where the
build would fail instead) the failing model is written anyway, for the package's tests to judge; it
is never cached and never ships.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hatch_shrinkray.capture.swap import Target
from hatch_shrinkray.hints import setting
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import Fit, VerificationRecord
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.display import Display, Sanitized
from hatch_shrinkray.shipping.manifest import file_sha256
from hatch_shrinkray.shipping.outcome import Shipped
from hatch_shrinkray.shipping.ship import ship_models
from hatch_shrinkray.shipping.wording import total_line
from hatch_shrinkray.verdict import kind


@dataclass(frozen=True)
class Prepared:
    relpath: str
    source: Path
    sha256: str
    options: ShrinkOptions
    """The options it was shrunk with: the configuration's, with the plan file's plan for these bytes."""
    shrunk: Path | None
    """None when nothing was shrunk (no weight qualified, or already quantized): nothing to swap."""
    original_size: int
    shrunk_size: int
    verification: str
    """The verification's summary (``FAILS`` when it failed, under ``strict``), or why none ran."""
    passed: bool
    outcome: str = "shrunk"
    """What a build ships for it (``shipping.ship.Shipped.outcome``): ``kept-original`` when the plan's
    remedy ships the original or generated inputs could not verify the shrunk model (see
    ``planned``), ``unchanged`` or ``already-quantized`` when nothing was shrunk."""
    fitted: bool = False
    """Its codes were fitted to the recording (output-aware rounding or ``auto``'s plan, kept by the
    do-no-harm guard): what ``rounding = "nearest"`` would undo."""
    planned: bool = False
    """A ``kept-original`` the plan file's remedy chose (else: one the build could not verify)."""

    @property
    def ships_original(self) -> bool:
        """A build ships its original bytes although it has weights to shrink: nothing to check."""
        return self.outcome == "kept-original"

    def target(self) -> Target:
        assert self.shrunk is not None
        judges = self.options.verify.judges if self.options.verify is not None else ()
        return Target(self.sha256, self.relpath, os.path.realpath(self.source), str(self.shrunk), judges)


@dataclass(frozen=True)
class Configured:
    """The models to check: one project (``--project``) or model files named on the command line."""

    config: HookConfig
    roots: tuple[Path, ...]
    """Per model, the directory its ``relpath`` is relative to."""

    def entries(self) -> list[tuple[Path, ModelEntry]]:
        return list(zip(self.roots, self.config.models, strict=True))


def prepare(configured: Configured, workdir: Path, app: Display,
            plans: Mapping[str, tuple[tuple[str, str, str], ...]] | None = None,
            chosen: Mapping[str, ShrinkOptions] | None = None) -> list[Prepared]:
    """Shrink every configured model into ``workdir``; ``plans`` (by sha256) replaces the plan file's
    plan, ``chosen`` (by sha256) the options altogether (``check --fix``'s candidate remedies). A
    candidate plan is shrunk ``strict`` (with ``keep_failed``, a choice past its limits is kept, not
    fallen back from), so the tests judge the encoding the plan names."""
    out = []
    every: list[Shipped] = []
    start = time.perf_counter()
    for index, (root, entry) in enumerate(configured.entries()):
        sha = file_sha256(root / entry.relpath)
        options = entry.options
        planned = False
        config = replace(configured.config, models=(entry,))
        if chosen is not None and sha in chosen:
            options = chosen[sha]
            config = replace(config, models=(replace(entry, options=options),), plans={})
        elif plans is not None and sha in plans:  # a candidate plan is judged as written, never its fallback
            options = replace(options, plan=plans[sha], strict=True)
            config = replace(config, models=(replace(entry, options=options),), plans={})
        elif sha in configured.config.plans:
            options = configured.config.plans[sha].apply(options)
            planned = configured.config.plans[sha].ships_original
        (shipped,) = ship_models(config, root, workdir / str(index), app, {}, keep_failed=True, total=False)
        every.append(shipped)
        entry_record = shipped.entry
        changed = [path for rel, path in shipped.files if rel == entry.relpath and shipped.new_bytes]
        verification = entry_record.verification if entry_record is not None else None
        passed = verification is None or verification.passed
        summary = _summary(verification, shipped.outcome, planned)
        fitted = shipped.new_bytes and verification is not None and verification.fit is Fit.KEPT
        out.append(Prepared(entry.relpath, root / entry.relpath, sha, options, changed[0] if changed else None,
                            shipped.original_size, shipped.shipped_size, summary, passed, shipped.outcome, fitted,
                            planned))
    if every:
        Sanitized(app).display_success(total_line(every, time.perf_counter() - start))
    return out


def _summary(verification: VerificationRecord | None, outcome: str, planned: bool) -> str:
    if outcome in ("unchanged", "already-quantized"):
        return f"nothing to check ({outcome})"
    if outcome == "kept-original":
        return "nothing to check (ships its original bytes, as " + (
            "check --fix chose)" if planned else "generated inputs could not verify it)")
    if verification is None:
        return f"not verified ({setting('verify', False)})"
    source = "recorded" if verification.real_inputs else "generated"
    evidence = verification.evidence
    if evidence is not None and verification.real_inputs and evidence.unit_kind != "units":
        basis = f"{evidence.units} {source} {kind(evidence.unit_kind)}"
    else:
        basis = f"{verification.samples} {source} samples"
    return ("passes" if verification.passed else "FAILS") + f" its limits on {basis}"


def only(configured: Configured, prepared: Prepared) -> Configured:
    """The configuration of ``prepared``'s model alone (to shrink it again another way)."""
    index = next(i for i, m in enumerate(configured.config.models) if m.relpath == prepared.relpath
                 and configured.roots[i] / m.relpath == prepared.source)
    return Configured(replace(configured.config, models=(configured.config.models[index],)),
                      (configured.roots[index],))
