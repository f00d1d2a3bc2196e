"""Hand what ships to hatchling: every file is force-included at its project-relative path.

A shrunk file lives in a work directory outside the project, so hatchling drops the original from
the archive and holds exactly one copy; a file that ships as it is is named too, which keeps it in
the archive even if a ``.gitignore`` would drop it. Only ``build_data["force_include"]`` is mutated
(never reassigned, which would drop hatchling's own entries). An sdist also gets the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.config import HookConfig
from hatch_shrinkray.shipping.display import PREFIX, Display, writing_to
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, render
from hatch_shrinkray.shipping.outcome import Shipped


def check_outside(workdir: Path, root: Path) -> None:
    """Refuse a work directory inside the project: hatchling would then ship both copies."""
    work, project = os.path.realpath(workdir), os.path.realpath(root)
    if os.path.commonpath([work, project]) == project:
        raise ShrinkrayError(f"the temporary directory {work} is inside the project {project}",
                             hint="point TMPDIR somewhere outside the project")


def include(shipped: list[Shipped], config: HookConfig, build_data: dict[str, Any], workdir: Path,
            app: Display, *, others: Sequence[tuple[str, Path]] = ()) -> None:
    """Register every shipped file, ``others`` (``(project path, file whose bytes go there)``: the
    package's files rewritten for the shrunk models) and, for an sdist, the manifest with hatchling."""
    force_include: dict[str, str] = build_data["force_include"]
    for relpath, path in [*(f for model in shipped for f in model.files), *others]:
        force_include[str(path)] = relpath
    entries: dict[str, ManifestEntry] = {m.relpath: m.entry for m in shipped if m.entry is not None}
    if config.target == "sdist" and entries:
        manifest = workdir / MANIFEST_NAME
        with writing_to(workdir):
            manifest.write_text(render(entries), encoding="utf-8", newline="\n")
        force_include[str(manifest)] = MANIFEST_NAME
        app.display_debug(f"{PREFIX} wrote {MANIFEST_NAME} ({len(entries)} entries)")
