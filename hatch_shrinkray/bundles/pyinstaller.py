"""PyInstaller: the models a spec file collects, shrunk before they are packed.

A onefile app carries its files inside the executable, so they must be shrunk before PyInstaller
packs them; a spec file says what is packed in ``a.datas`` (``(name in the app, source file, kind)``
entries), and one line after ``Analysis`` maps each model of it to a verified shrunk copy::

    from hatch_shrinkray import shrink_datas
    a.datas = shrink_datas(a.datas)

The files the spec collects around each model are copied under PyInstaller's work directory
(``build/<name>/shrinkray``) at their names in the app, and ``hatch-shrinkray bundle --in-place``
shrinks that tree (the same decisions, cache, lines, pins and external data as every build). It runs
in a process of its own: what PyInstaller itself writes (its bytecode, marshalled by a process
whose memory the engine would otherwise have touched) is then the same whether the shrink ran or
came from the cache, and a second build with the same inputs is the same bytes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.files import file_sha256
from hatch_shrinkray.option_table import BY_KEY
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME

DATA = "DATA"
EVERY_MODEL = "**/*.onnx"


def shrink_datas(datas: Sequence[Any], *, models: Sequence[str] = (EVERY_MODEL,), project: str | os.PathLike[str] = ".",
                 workdir: str | os.PathLike[str] | None = None, **options: Any) -> list[Any]:
    """``datas`` (a spec's ``a.datas``) with every model that ``models`` globs select (names in the
    app, ``**`` allowed) pointing at its shrunk copy, and the data files a shrunk model no longer
    reads left out. ``options`` are the keys of the ``[tool.hatch-shrinkray]`` table that have a
    flag (``inputs``, ``method``, ``strict``, ``pins``, ...; ``-`` or ``_``), over the table of
    ``project``'s pyproject.toml when it has one; relative paths are the project's. A model that
    fails its verification ends the build with a ShrinkrayError, as a Hatch build would."""
    root = Path(project).resolve()
    flags = _flags(options, root)
    stage = _work_directory(workdir) / "collected"
    shutil.rmtree(stage, ignore_errors=True)
    chosen = _stage([tuple(e) for e in datas], stage)
    if not chosen:
        return list(datas)
    command = [sys.executable, "-m", "hatch_shrinkray", "bundle", str(stage), "--in-place", "--project", str(root),
               *(token for glob in models for token in ("--models", glob)), *flags]
    if subprocess.run(command, check=False).returncode != 0:
        raise ShrinkrayError("the app's models could not be shrunk (the lines above say why)",
                             hint=f"fix what they name, or leave shrink_datas() out of the spec; the command was: "
                                  f"{' '.join(command[2:])}")
    changed = {name for name, source in chosen.items()
               if (stage / name).is_file() and file_sha256(stage / name) != file_sha256(source)}
    out: list[Any] = []
    for entry in datas:
        name = PurePosixPath(str(entry[0])).as_posix()
        if name in chosen and not (stage / name).is_file():
            continue  # a data file the shrunk model no longer reads
        out.append((entry[0], str(stage / name), entry[2]) if name in changed and entry[2] == DATA else entry)
    added = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
    out += [(name, str(stage / name), DATA) for name in added if name not in chosen and name != MANIFEST_NAME]
    return out


def _flags(options: Mapping[str, Any], root: Path) -> list[str]:
    """``options`` as ``hatch-shrinkray bundle`` flags (a path relative to ``root``)."""
    tokens: list[str] = []
    unknown = []
    for name, value in options.items():
        key = name.replace("_", "-")
        if key == "pins":
            tokens += ["--pins", str(value)]
            continue
        option = BY_KEY.get(key)
        if option is None or not option.flags:
            unknown.append(name)
            continue
        flag = option.flags[0]
        if option.kind == "boolean":
            tokens += [flag] if value == option.const else []
        elif option.kind == "path":
            tokens += [flag, str(root / Path(value))]
        elif option.kind == "strings":
            tokens += [t for item in value for t in (flag, str(item))]
        elif option.kind in ("dims", "encodings", "judges"):
            tokens += [t for k, v in dict(value).items() for t in (flag, f"{k}={v}")]
        elif option.kind == "range":
            tokens += [flag, *map(str, value)]
        else:
            tokens += [flag, str(value)]
    if unknown:
        raise ShrinkrayError(f"shrink_datas() takes no option {', '.join(unknown)}",
                             hint="its options are the [tool.hatch-shrinkray] keys that have a flag "
                                  "(hatch-shrinkray bundle --help); set the others in that table")
    return tokens


def _stage(entries: Sequence[tuple[Any, ...]], stage: Path) -> dict[str, Path]:
    """Copies of the data files in and under the package of each ``.onnx`` entry, at their names in
    the app: the models, their external data and their packages' text files. Returns name -> source."""
    data = {PurePosixPath(str(e[0])).as_posix(): Path(str(e[1])) for e in entries if len(e) == 3 and e[2] == DATA}
    dirs = {PurePosixPath(name).parent for name in data if name.lower().endswith(".onnx")}
    tops = {d.parent if d.parent != PurePosixPath(".") else d for d in dirs}
    chosen = {name: src for name, src in data.items()
              if any(PurePosixPath(name).is_relative_to(top) for top in tops) and src.is_file()}
    for name, src in chosen.items():  # copies: the tree is shrunk in place, the collected files never are
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
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
