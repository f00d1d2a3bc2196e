"""Helpers shared by test files: projects that use the hook and their builds (in this process, or
in a fresh one as a frontend runs the backend), the console script as a user runs it and the one
``error:`` line of a failed command, and models several files' tests run.

Tests run as root in CI containers, where ``chmod 000`` does not stop reads. ``dac_dropped()``
removes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this thread's effective capabilities (and
puts them back afterwards), and ``drop_dac_in_child`` does the same for a subprocess via the
bounding set, so permission bits apply to root too. Where the kernel refuses, ``blocks_reads``
says so and the test is skipped with that reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.shipping.manifest import file_sha256

from onnx_builders import mlp, save, save_external

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


def write_project(root: Path, hook_table: str = "", *, models_glob: str = "src/toymodel/models/**/*.onnx",
                  package: str = "toymodel", wheel_table: str = "") -> Path:
    """A tiny hatchling project using the hook; put model files under ``root/src/PACKAGE/models``
    (``MODELS_DIR`` for the default package). ``hook_table`` follows the hook table's ``models``
    line (more keys, then any tables after it); ``wheel_table`` adds keys to the wheel target's."""
    (root / f"src/{package}/models").mkdir(parents=True, exist_ok=True)
    (root / f"src/{package}/__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling", "hatch-shrinkray-core"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["src/{package}"]\n{wheel_table}\n'
        f'[tool.hatch.build.hooks.shrinkray]\nmodels = ["{models_glob}"]\n' + hook_table)
    return root


def backend_project(root: Path, table: str = "") -> Path:
    """A hatchling project without the hook (a backend that knows nothing of us) shipping ``mlp()`` at
    ``toymodel/models/a.onnx``; ``table`` follows (``[tool.hatch-shrinkray]`` for ``wheel``)."""
    from onnx_builders import mlp, save

    (root / "src/toymodel/models").mkdir(parents=True)
    (root / "src/toymodel/__init__.py").write_text("")
    save(mlp(), root / "src/toymodel/models/a.onnx")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/toymodel"]\n' + (f"\n{table}" if table else ""))
    return root


COUNTS_ITS_RUNS = textwrap.dedent('''
    import sys
    from pathlib import Path

    import numpy as np
    import onnxruntime as ort

    ROOT = Path(__file__).resolve().parent
    with open(ROOT / "runs.log", "a") as fh:
        fh.write("run\\n")
''')
"""The start of a project's own check script (at the project's root) that counts its runs in
``runs.log``, for ``runs``; the script's checks follow it."""


def runs(root: Path) -> int:
    """How many times the project's command ran: the lines of its ``runs.log`` (0 before the first)."""
    path = root / "runs.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def build(root: Path, target: str = "wheel", out: Path | None = None, version: str = "standard") -> Path:
    """A real hatchling build in this process (the hook aborts with SystemExit on user errors)."""
    builder = (WheelBuilder if target == "wheel" else SdistBuilder)(str(root))
    directory = out or root.parent / "dist"
    return Path(next(builder.build(directory=str(directory), versions=[version])))


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


PY = sys.executable

BUILD = textwrap.dedent("""
    import sys
    from hatchling.builders.sdist import SdistBuilder
    from hatchling.builders.wheel import WheelBuilder
    builder = (WheelBuilder if sys.argv[2] == "wheel" else SdistBuilder)(sys.argv[1])
    print(next(builder.build(directory=sys.argv[3], versions=["standard"])))
""")


def hook_build(root: Path, tmp_path: Path, target: str = "wheel",
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A real hatchling build of ``root`` in a fresh process (as a frontend runs the backend)."""
    temp = tmp_path / "build-tmp"
    temp.mkdir(exist_ok=True)
    environment = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp),
                   **(env or {})}
    return subprocess.run([PY, "-c", BUILD, str(root), target, str(tmp_path / "dist")], capture_output=True,
                          text=True, check=False, timeout=600, env=environment)


def hook_build_error(root: Path, tmp_path: Path, target: str = "wheel") -> str:
    """The stderr of a build that must fail cleanly: no traceback, no artifact, nothing left in TMPDIR,
    the project untouched."""
    before = tree_digest(root)
    proc = hook_build(root, tmp_path, target)
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert files_under(tmp_path / "dist") == []
    assert files_under(tmp_path / "build-tmp") in ([], [".ses"])
    assert tree_digest(root) == before
    return proc.stderr


def one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``error:`` line of a failed command (and no traceback)."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def shared_weights(models: Path) -> tuple[object, object]:
    """``a.onnx`` and ``b.onnx`` whose weights both live in one ``weights.bin`` (a valid layout: the
    data file written once, each model pointing into it)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    models.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    wa, wb = (rng.standard_normal((256, 256)).astype(np.float32) * 0.05 for _ in range(2))
    with open(models / "weights.bin", "wb") as fh:
        fh.write(wa.tobytes())
        fh.write(wb.tobytes())
    built = []
    for name, w, offset in (("a", wa, 0), ("b", wb, wa.nbytes)):
        tensor = numpy_helper.from_array(w, "W")
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(w.nbytes))):
            tensor.external_data.add(key=key, value=value)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 256])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 256])], [tensor])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
        (models / f"{name}.onnx").write_bytes(model.SerializeToString())
        built.append(onnx.load(str(models / f"{name}.onnx")))
    return built[0], built[1]


def run_model(path: Path) -> object:
    import numpy as np
    import onnxruntime as ort

    x = np.random.default_rng(9).standard_normal((3, 256)).astype(np.float32)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


RUNTIME_NEEDS_A_VERSION = ("entry 'onnxruntime' needs a version: the oldest release your users run, like "
                           "'onnxruntime>=1.18'")


def external_data_model(models: Path) -> Path:
    """``a.onnx`` with its weights in ``a.onnx.data``."""
    return save_external(mlp(256, 512), models / "a.onnx")


LEFT_OUT = ("a.onnx.data ({size}), the original's external data, is left out of the archive: the shrunk model "
            "holds its weights inside the model file")


X = {"x": np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)}


def _out(tmp_path: Path, m: onnx.ModelProto, **kw: object) -> Path:
    dest = tmp_path / "out.onnx"
    shrink(save(m, tmp_path / "in.onnx"), dest, ShrinkOptions(**kw))  # type: ignore[arg-type]
    return dest


def hatchling_member(data: bytes) -> int:
    """The compressed size of ``data`` as hatchling's WheelArchive.add_file writes it: a ZipFile opened
    with ZIP_DEFLATED and no level, fed 16 KiB at a time."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo("pkg/model.onnx", (2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w") as out:
            for i in range(0, len(data), 16384):
                out.write(data[i:i + 16384])
    return zipfile.ZipFile(buf).getinfo("pkg/model.onnx").compress_size
