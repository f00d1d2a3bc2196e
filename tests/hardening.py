"""Shared helpers for the hardening tests (bad inputs, external data, nothing lost, determinism).

Tests run as root in CI containers, where ``chmod 000`` does not stop reads. ``dac_dropped()``
removes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this thread's effective capabilities (and
puts them back afterwards), and ``drop_dac_in_child`` does the same for a subprocess via the
bounding set, so permission bits apply to root too. Where the kernel refuses, ``blocks_reads``
says so and the test is skipped with that reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray.shipping.manifest import file_sha256

REPO = Path(__file__).resolve().parent.parent
MODEL = "src/toymodel/models/a.onnx"
MODELS_DIR = "src/toymodel/models"

_CAP_VERSION_3 = 0x20080522
_DAC_BITS = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
_PR_CAPBSET_DROP = 24


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def dac_dropped() -> Iterator[None]:
    """Permission bits apply to this thread while inside (a no-op for non-root users)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        yield
        return
    libc = _libc()
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        yield
        return
    saved = data[0].effective
    data[0].effective &= ~_DAC_BITS
    changed = libc.capset(ctypes.byref(header), data) == 0
    try:
        yield
    finally:
        if changed:
            data[0].effective = saved
            libc.capset(ctypes.byref(header), data)


def drop_dac_in_child() -> None:
    """``preexec_fn`` for subprocesses: root's exec'd program starts without DAC override."""
    if sys.platform == "linux" and os.geteuid() == 0:
        libc = _libc()
        for cap in (1, 2):
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


def blocks_reads(directory: Path) -> bool:
    """Whether ``chmod 000`` actually stops this process from reading, with DAC dropped."""
    probe = directory / ".probe"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        with dac_dropped():
            probe.read_bytes()
        return False
    except PermissionError:
        return True
    finally:
        probe.chmod(0o644)
        probe.unlink()


def write_project(root: Path, hook_table: str = "", *, models_glob: str = "src/toymodel/models/**/*.onnx") -> Path:
    """A tiny hatchling project using the hook; put model files under ``root/MODELS_DIR``."""
    (root / MODELS_DIR).mkdir(parents=True, exist_ok=True)
    (root / "src/toymodel/__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling", "hatch-shrinkray-core"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/toymodel"]\n\n'
        f'[tool.hatch.build.hooks.shrinkray]\nmodels = ["{models_glob}"]\n' + hook_table)
    return root


def build(root: Path, target: str = "wheel", out: Path | None = None) -> Path:
    """A real hatchling build in this process (the hook aborts with SystemExit on user errors)."""
    builder = (WheelBuilder if target == "wheel" else SdistBuilder)(str(root))
    directory = out or root.parent / "dist"
    return Path(next(builder.build(directory=str(directory), versions=["standard"])))


sha256_file = file_sha256  # the engine's own streaming digest


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root``: content hash for files, mode for all (catches chmod too)."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        st = p.lstat()
        if p.is_symlink():
            out[rel] = f"link {os.readlink(p)}"
        elif p.is_file():
            out[rel] = f"{oct(st.st_mode)} {sha256_file(p)}"
        else:
            out[rel] = f"{oct(st.st_mode)} dir"
    return out


def files_under(directory: Path) -> list[str]:
    """Files (not directories) under ``directory``, relative; [] if it does not exist."""
    if not directory.exists():
        return []
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if not p.is_dir())


ONNXRUNTIME_FILES = {".ses"}
"""What onnxruntime itself leaves in $TMPDIR (1.32's telemetry SDK keeps its session id in
``.ses`` from the moment it is imported): not ours, and not a leftover of one run."""


def leftovers(tmp: Path) -> list[str]:
    """Entries of a private $TMPDIR after a run, ignoring onnxruntime's own files."""
    return sorted(p.name for p in tmp.iterdir() if p.name not in ONNXRUNTIME_FILES)


CONSOLE_SCRIPT = Path(sys.executable).parent / ("hatch-shrinkray.exe" if os.name == "nt" else "hatch-shrinkray")
"""The installed console script, beside the interpreter running the tests (the venv's ``bin``)."""


def cli(*args: str, cwd: Path | None = None, drop_dac: bool = False, timeout: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hatch-shrinkray ...`` as a user runs it: the installed console script, in a fresh process."""
    assert CONSOLE_SCRIPT.is_file(), f"{CONSOLE_SCRIPT} is missing: install the project (pip install -e .)"
    return subprocess.run([str(CONSOLE_SCRIPT), *args], capture_output=True, text=True,
                          check=False, timeout=timeout, cwd=cwd, env=env,
                          preexec_fn=drop_dac_in_child if drop_dac else None)
