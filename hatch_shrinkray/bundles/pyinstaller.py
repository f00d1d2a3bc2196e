"""PyInstaller: the models a spec file collects, shrunk before they are packed.

A onefile app carries its files inside the executable, so they must be shrunk before PyInstaller
packs them; a spec file says what is packed in ``a.datas`` (``(name in the app, source file, kind)``
entries), and one line after ``Analysis`` maps each model of it to a verified shrunk copy::

    from hatch_shrinkray import shrink_datas
    a.datas = shrink_datas(a.datas)

The copies are written under PyInstaller's work directory (``build/<name>/shrinkray``) and cached as
every build's are, so the next build packs the same bytes at once. Each model goes through exactly
what ``bundle`` and the Hatch hook do (``shipping.ship``), with the other files the spec collects as
the archive's (their external data, their pins).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping.config import ENGINE_KEYS, CommandLine, load_config
from hatch_shrinkray.shipping.datafiles import ProjectTree
from hatch_shrinkray.shipping.display import PREFIX
from hatch_shrinkray.shipping.layout import Layout
from hatch_shrinkray.shipping.pins import SUFFIXES, report_pins, shrunk_models
from hatch_shrinkray.shipping.project import find_table
from hatch_shrinkray.shipping.ship import ship_models

LOG = logging.getLogger("hatch_shrinkray")
DATA = "DATA"
EVERY_MODEL = "**/*.onnx"

Entry = tuple[str, str, str]
"""A TOC entry of PyInstaller: ``(name in the app, source file, typecode)``."""


class _Log:
    """The five display calls, through PyInstaller's log (its format, its ``--log-level``)."""

    def display_info(self, message: str = "") -> None:
        LOG.info(message)

    display_waiting = display_success = display_info

    def display_warning(self, message: str = "") -> None:
        LOG.warning(message)

    def display_debug(self, message: str = "", level: int = 1) -> None:
        LOG.debug(message)


def shrink_datas(datas: Sequence[Any], *, models: Sequence[str] = (EVERY_MODEL,), project: str | os.PathLike[str] = ".",
                 workdir: str | os.PathLike[str] | None = None, **options: Any) -> list[Any]:
    """``datas`` (a spec's ``a.datas``) with every model that ``models`` globs select (names in the
    app, ``**`` allowed) pointing at its shrunk copy, and the data files a shrunk model no longer
    reads left out. ``options`` are the keys of the ``[tool.hatch-shrinkray]`` table (``inputs``,
    ``method``, ``strict``, ...; ``-`` or ``_``), over the table of ``project``'s pyproject.toml when
    it has one; relative paths are the project's. A model that fails its verification ends the
    build with a ShrinkrayError, as a Hatch build would."""
    entries = [tuple(e) for e in datas]
    work = _work_directory(workdir)
    stage = work / "collected"
    shutil.rmtree(stage, ignore_errors=True)
    chosen = _stage(entries, stage)
    if not chosen:
        return list(datas)
    root = Path(project).resolve()
    raw, table = find_table(root, required=False)
    settings = {key.replace("_", "-"): value for key, value in options.items()}
    unknown = sorted(set(settings) - set(ENGINE_KEYS) - {"pins", "cache", "plan"})
    if unknown:
        raise ShrinkrayError(f"shrink_datas() takes no option {', '.join(unknown)}",
                             hint=f"its options are the [tool.hatch-shrinkray] keys: {', '.join(sorted(ENGINE_KEYS))}")
    table_keys = {k: v for k, v in (raw or {}).items() if k != "models"}
    table_keys.update({k: settings.pop(k) for k in ("pins", "cache", "plan") if k in settings})
    if isinstance(settings.get("inputs"), (str, os.PathLike)):
        settings["inputs"] = str((root / Path(settings["inputs"])).resolve())
    flags = CommandLine(settings, {k: f"shrink_datas({k.replace('-', '_')}=...)" for k in settings}, tuple(models),
                        "shrink_datas(models=...)")
    config = load_config(table_keys, root, "bundle", table or "shrink_datas()", models_root=stage, flags=flags,
                         layout=Layout())
    shipped = ship_models(config, stage, work / "models", _Log(), {}, tree=ProjectTree(stage))
    replace = {rel: path for m in shipped if m.new_bytes for rel, path in m.files}
    members = [(name, (stage / name).stat().st_size, (stage / name).read_bytes) for name in sorted(chosen)
               if PurePosixPath(name).suffix.lower() in SUFFIXES]
    replace.update({f.file: f.path for f in report_pins(members, shrunk_models(shipped, stage),
                                                        config.pins == "rewrite", work / "pins", _Log())})
    dropped = {rel for m in shipped for rel in m.obsolete}
    out: list[Any] = []
    for entry, original in zip(entries, datas, strict=True):
        name = PurePosixPath(str(entry[0])).as_posix()
        if name in dropped:
            continue
        out.append((entry[0], str(replace[name]), entry[2]) if name in replace and entry[2] == DATA else original)
    known = {PurePosixPath(str(e[0])).as_posix() for e in entries}
    out += [(name, str(path), DATA) for name, path in sorted(replace.items()) if name not in known]
    LOG.info(f"{PREFIX} {len(replace)} file(s) of the app now come from {work}")
    return out


def _stage(entries: Sequence[tuple[Any, ...]], stage: Path) -> dict[str, Path]:
    """Hard links (or copies) of the data files in and under each directory that holds an ``.onnx``
    entry, at their names in the app: the models, their external data and their packages' text
    files, as ``ship_models`` reads a tree. Returns name -> source."""
    data = {PurePosixPath(str(e[0])).as_posix(): Path(str(e[1])) for e in entries if len(e) == 3 and e[2] == DATA}
    dirs = {PurePosixPath(name).parent for name in data if name.lower().endswith(".onnx")}
    tops = {d.parent if d.parent != PurePosixPath(".") else d for d in dirs}
    chosen = {name: src for name, src in data.items()
              if any(PurePosixPath(name).is_relative_to(top) for top in tops) and src.is_file()}
    for name, src in chosen.items():
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:
            shutil.copy2(src, target)
    return chosen


def _work_directory(workdir: str | os.PathLike[str] | None) -> Path:
    """``workdir``, else PyInstaller's work directory of this build (``build/<name>``), else a new
    temporary directory (the spec is being run outside PyInstaller)."""
    if workdir is None:
        conf: Mapping[str, Any] = {}
        with contextlib.suppress(ImportError):
            conf = importlib.import_module("PyInstaller.config").CONF
        workpath = conf.get("workpath")
        base = Path(workpath) if workpath else Path(tempfile.mkdtemp(prefix="hatch-shrinkray-pyinstaller-"))
    else:
        base = Path(workdir)
    work = base / "shrinkray"
    work.mkdir(parents=True, exist_ok=True)
    return work
