"""Hostile and unlucky inputs, round 3 (issue 21): every case ends in one ``error:`` line naming the
file, key, tensor or array and what to do, with nothing left behind and nothing modified; a model
or archive that would be broken is refused. The CLI runs as a user runs it (the console script, in
a fresh process); the hook through real hatchling builds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hardening import MODEL, cli, files_under, tree_digest, write_project

from onnx_builders import mlp, save

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


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}
    out.pop("SOURCE_DATE_EPOCH", None)
    return out


# ---------------------------------------------------------------------------------------------
# Numbers: NaN, inf and out-of-range values are refused with one line naming the option.


@pytest.mark.parametrize(("flags", "expected"), [
    (["--max-rel-l2", "inf"], "--max-rel-l2 must be a number from 0.0 to 1.0; got inf"),
    (["--max-rel-l2", "nan"], "--max-rel-l2 must be a number from 0.0 to 1.0; got nan"),
    (["--min-cosine", "-1"], "--min-cosine must be a number from 0.0 to 1.0; got -1.0"),
    (["--min-top1", "nan"], "--min-top1 must be a number from 0.0 to 1.0; got nan"),
    (["--budget-load", "nan"], "--budget-load must be a number from 1.0 to inf; got nan"),
    (["--budget-cosine=-inf"], "--budget-cosine must be a number from 0.0 to 1.0; got -inf"),
    (["--int-range", "0", str(2**70)], "--int-range must be two integers [low, high) with low < high"),
])
def test_shrink_refuses_nan_inf_and_out_of_range_numbers(tmp_path: Path, flags: list[str], expected: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), *flags))
    assert expected in line, line
    assert not (tmp_path / "out").exists() or files_under(tmp_path / "out") == []


@pytest.mark.parametrize(("flags", "expected"), [
    (["--max-flip-rate", "nan"], "--max-flip-rate must be a share from 0 to 1; got nan"),
    (["--threshold", "inf"], "--threshold must be a probability between 0 and 1; got inf"),
    (["--timeout", "nan"], "--timeout must be a number of seconds above 0"),
    (["--timeout", "0"], "--timeout must be a number of seconds above 0"),
])
def test_check_refuses_nan_and_out_of_range_flags(tmp_path: Path, flags: list[str], expected: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    line = one_error(cli("check", str(src), *flags, "--", PY, "-c", "pass", cwd=tmp_path))
    assert expected in line, line


def test_hook_table_refuses_inf_and_minus_one(tmp_path: Path) -> None:
    from hatch_shrinkray.shipping.config import ConfigurationError, load_config

    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["m.onnx"], "max-rel-l2": float("inf"), "min-cosine": -1,
                     "budget-agreement": float("nan")}, tmp_path)
    table = "tool.hatch.build.hooks.shrinkray"
    assert caught.value.errors == [
        f"Field `{table}.budget-agreement` must be a number from 0.0 to 1.0; got nan",
        f"Field `{table}.max-rel-l2` must be a number from 0.0 to 1.0; got inf",
        f"Field `{table}.min-cosine` must be a number from 0.0 to 1.0; got -1.0",
    ]


# ---------------------------------------------------------------------------------------------
# check: a model the command rewrites is not judged; a command that hangs is stopped.

LOADS_AND_REWRITES = textwrap.dedent('''
    import sys
    import numpy as np
    import onnx
    import onnxruntime as ort
    path = sys.argv[1]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, 256), np.float32)})
    m = onnx.load(path)
    m.doc_string = "re-exported by the test suite"
    onnx.save(m, path)
''')


def test_check_refuses_to_judge_a_model_the_command_rewrote(tmp_path: Path, env: dict[str, str]) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "rewrite.py"
    script.write_text(LOADS_AND_REWRITES)
    proc = cli("check", str(src), "--", PY, str(script), str(src), cwd=tmp_path, env=env)
    line = one_error(proc)
    assert line.startswith(f"error: m.onnx: changed while `{PY} {script} {src}` ran (run 1 of 2, with the original "
                           "models)"), line
    assert "make the command leave the model file alone" in line
    assert "REGRESSED" not in proc.stdout + proc.stderr and "hint:" not in proc.stdout


HANGS = textwrap.dedent('''
    import subprocess, sys, time
    from pathlib import Path
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(sys.argv[1]).write_text(str(child.pid))
    time.sleep(600)
''')


def test_check_stops_a_command_that_hangs_with_its_process_group(tmp_path: Path, env: dict[str, str]) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script, pid_file = tmp_path / "hang.py", tmp_path / "child.pid"
    script.write_text(HANGS)
    start = time.monotonic()
    proc = cli("check", str(src), "--timeout", "3", "--", PY, str(script), str(pid_file), cwd=tmp_path, env=env,
               timeout=120)
    assert time.monotonic() - start < 60
    line = one_error(proc)
    assert line == (f"error: `{PY} {script} {pid_file}` did not finish within 3 s; it was stopped with every process "
                    "it started (raise --timeout, or find what hangs)"), line
    grandchild = int(pid_file.read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{grandchild}").exists() or "zombie" in Path(f"/proc/{grandchild}/status").read_text()
    assert files_under(Path(env["TMPDIR"])) in ([], [".ses"])


# ---------------------------------------------------------------------------------------------
# `inputs`: only regular files, or directories of regular files; special files are one line,
# with the cache on and off, and never a hang.


def special_files(tmp_path: Path) -> dict[str, Path]:
    import socket

    fifo, sock, recording = tmp_path / "fifo.npz", tmp_path / "sock.npz", tmp_path / "recording"
    os.mkfifo(fifo)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.close()
    recording.mkdir()
    os.mkfifo(recording / "m-0123456789abcdef.npz")
    return {"/dev/zero": Path("/dev/zero"), "fifo": fifo, "socket": sock, "directory with a fifo": recording}


SPECIAL = {"/dev/zero": "names a file that is a character device, not a regular file",
           "fifo": "names a file that is a FIFO, not a regular file",
           "socket": "names a file that is a socket, not a regular file",
           "directory with a fifo": "holds m-0123456789abcdef.npz, which is a FIFO, not a regular file"}


@pytest.mark.parametrize("kind", list(SPECIAL))
def test_special_inputs_are_one_line_for_shrink_and_compare(tmp_path: Path, kind: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    inputs = special_files(tmp_path)[kind]
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--inputs", str(inputs), timeout=60))
    assert line == f"error: --inputs {SPECIAL[kind]}; " + (
        f"a recording directory holds regular .npz files: {inputs}" if kind.startswith("directory")
        else f"point it at a .npz file or a recording directory: {inputs}"), line
    line = one_error(cli("compare", str(src), str(src), "--inputs", str(inputs), timeout=60))
    assert SPECIAL[kind] in line


@pytest.mark.parametrize("cache", ["true", "false"])
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory with a fifo"])
def test_special_inputs_fail_the_build_in_one_line(tmp_path: Path, kind: str, cache: str) -> None:
    root = tmp_path / "toymodel"
    write_project(root, f'inputs = "{special_files(tmp_path)[kind]}"\ncache = {cache}\n')
    save(mlp(), root / MODEL)
    err = hook_build_error(root, tmp_path)
    assert f"Field `tool.hatch.build.hooks.shrinkray.inputs` {SPECIAL[kind]}" in err, err


# ---------------------------------------------------------------------------------------------
# Trust: cache entries and manifest matches are checked before they ship; the cache is private.


def unknown_op_model() -> bytes:
    """Well-formed protobuf, onnx.checker-free, that onnxruntime refuses: a node of an op nobody has."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], domain="hostile.example")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("hostile.example", 1)])
    return model.SerializeToString()


def loads(data: bytes) -> bool:
    import onnxruntime as ort

    try:
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


def wheel_model(dist: Path) -> bytes:
    import zipfile

    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.read("toymodel/models/a.onnx")


def cached_entry(tmp_path: Path) -> tuple[Path, Path]:
    (record,) = (tmp_path / "cache").glob("*.json")
    return record.with_suffix(".onnx"), record


def test_cache_directory_is_created_private_and_refused_when_others_can_write(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    (tmp_path / "cache").chmod(0o777)
    err = hook_build_error(root, tmp_path)
    line = next(ln for ln in err.splitlines() if "cache directory" in ln)
    assert line == (f"shrinkray: the cache directory {tmp_path / 'cache'} is writable by group and others (mode "
                    "0777); whoever can write there chooses the models your builds ship, so it is not used (chmod "
                    f"700 {tmp_path / 'cache'} if it is yours, point `cache` (or HATCH_SHRINKRAY_CACHE_DIR) at a "
                    "directory of your own, or set `cache = false`)"), err


def test_a_cache_entry_onnxruntime_cannot_load_is_not_shipped(tmp_path: Path) -> None:
    import hashlib
    import json

    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    good = wheel_model(tmp_path / "dist")
    model, record = cached_entry(tmp_path)
    garbage = unknown_op_model()
    model.write_bytes(garbage)
    data = json.loads(record.read_text())
    data["entry"]["shrunk_sha256"] = hashlib.sha256(garbage).hexdigest()
    record.write_text(json.dumps(data))
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is not used (onnxruntime cannot load it: " in proc.stderr and "; shrinking again" in proc.stderr
    shipped = wheel_model(tmp_path / "dist")
    assert shipped == good and loads(shipped)
    assert model.read_bytes() == good  # the entry was written anew


def test_a_cache_record_with_terminal_escapes_is_a_miss_and_nothing_prints_them(tmp_path: Path) -> None:
    import json

    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    _, record = cached_entry(tmp_path)
    data = json.loads(record.read_text())
    data["summary"] = "cos 1.000000 \x1b[2J\x1b[31mALL GOOD\x1b[0m\r"
    data["kept"] = "kept float: nothing\nshrinkray: fake line"
    record.write_text(json.dumps(data))
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and "ALL GOOD" not in proc.stderr and "fake line" not in proc.stderr
    smoke = r", within limits on 8 generated samples \((\w+=\d+; )*a smoke check\), "
    assert re.search(smoke, proc.stderr), proc.stderr
    assert ", cached\n" not in proc.stderr  # shrunk again, not served from the entry


def test_a_manifest_in_a_checkout_is_ignored(tmp_path: Path) -> None:
    """A manifest in a source checkout (copied from an sdist, or hand-written) marking the original as
    already shrunk: hatch-shrinkray writes manifests into sdists only, so it is ignored, with a line."""
    from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, file_sha256, render

    root = write_project(tmp_path / "toymodel")
    original = save(mlp(), root / MODEL)
    digest = file_sha256(original)
    entry = ManifestEntry(original_sha256=digest, shrunk_sha256=digest, method="int8",
                          verification={"passed": True})
    (root / MANIFEST_NAME).write_text(render({MODEL: entry}))
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (f"shrinkray: {MANIFEST_NAME} is ignored: hatch-shrinkray writes it into sdists only, and this is not "
            "one (no PKG-INFO)") in proc.stderr
    assert "manifest match" not in proc.stderr
    assert len(wheel_model(tmp_path / "dist")) < original.stat().st_size / 2


def unpacked_sdist(root: Path, tmp_path: Path) -> Path:
    import tarfile

    proc = hook_build(root, tmp_path, "sdist")
    assert proc.returncode == 0, proc.stderr
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    sdist.unlink()
    return tmp_path / "unpacked/toymodel-0.1.0"


GARBAGE_INSIDE = {
    # ir_version, opset_import, then a graph whose node's attribute claims more bytes than the node has
    "a broken nested message": (b"\x08\x07" + b"\x42\x04\x0a\x00\x10\x11" + b"\x3a\x08\x0a\x06\x2a\x09\x0a\x01x\x00"
                                + b"\x00\x00", "is not an ONNX model (Node field 5 runs past its end)"),
    "an op onnxruntime does not have": (unknown_op_model(), "onnxruntime cannot load it: "),
}


@pytest.mark.parametrize("case", list(GARBAGE_INSIDE))
def test_a_manifest_match_framed_as_onnx_but_broken_inside_is_refused(tmp_path: Path, case: str) -> None:
    import hashlib
    import json

    from hatch_shrinkray.shipping.manifest import MANIFEST_NAME

    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    unpacked = unpacked_sdist(root, tmp_path)
    data, expected = GARBAGE_INSIDE[case]
    (unpacked / MODEL).write_bytes(data)
    manifest = json.loads((unpacked / MANIFEST_NAME).read_text())
    manifest[MODEL]["shrunk_sha256"] = hashlib.sha256(data).hexdigest()
    (unpacked / MANIFEST_NAME).write_text(json.dumps(manifest))
    err = hook_build_error(unpacked, tmp_path)
    line = next(ln for ln in err.splitlines() if "refusing to ship it" in ln)
    assert line.startswith(f"shrinkray: {MODEL}: matches its entry in {MANIFEST_NAME} but {expected}"), line


# ---------------------------------------------------------------------------------------------
# A data file two models read, one of them configured: it stays while a shipped model reads it.


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


@pytest.mark.parametrize("target", ["wheel", "sdist"])
def test_hook_keeps_a_data_file_an_unconfigured_model_reads(tmp_path: Path, target: str) -> None:
    import numpy as np

    root = write_project(tmp_path / "toymodel", models_glob="src/toymodel/models/a.onnx")
    models = root / "src/toymodel/models"
    shared_weights(models)
    expected = run_model(models / "b.onnx")
    before = tree_digest(root)
    proc = hook_build(root, tmp_path, target)
    assert proc.returncode == 0, proc.stderr
    assert tree_digest(root) == before
    unpacked = tmp_path / "unpacked"
    (artifact,) = (tmp_path / "dist").iterdir()
    if target == "wheel":
        import zipfile

        with zipfile.ZipFile(artifact) as zf:
            zf.extractall(unpacked)
        shipped = unpacked / "toymodel/models"
    else:
        import tarfile

        with tarfile.open(artifact) as tar:
            tar.extractall(unpacked, filter="data")
        shipped = unpacked / "toymodel-0.1.0/src/toymodel/models"
    assert sorted(p.name for p in shipped.iterdir()) == ["a.onnx", "b.onnx", "weights.bin"]
    np.testing.assert_array_equal(run_model(shipped / "b.onnx"), expected)  # b still loads, unchanged
    assert (shipped / "weights.bin").read_bytes() == (models / "weights.bin").read_bytes()
    # a's own weights are 262.14 KB of the 524.29 KB file: the report counts those, not all of it
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("shrinkray: src/toymodel/models/a.onnx: ")
                and " -> " in ln)
    assert line.startswith("shrinkray: src/toymodel/models/a.onnx: 262.29 KB -> "), line
    assert "of the input is not weights" not in line
    assert ("shrinkray: src/toymodel/models/a.onnx: src/toymodel/models/weights.bin stays in the archive (524.29 KB): "
            "src/toymodel/models/b.onnx reads it too and is not configured") in proc.stderr


def test_hook_drops_a_shared_data_file_once_every_reader_is_shrunk(tmp_path: Path) -> None:
    import zipfile

    root = write_project(tmp_path / "toymodel", models_glob="src/toymodel/models/*.onnx")
    shared_weights(root / "src/toymodel/models")
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").iterdir()
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(n for n in zf.namelist() if "/models/" in n) == ["toymodel/models/a.onnx",
                                                                      "toymodel/models/b.onnx"]
    assert "stays in the archive" not in proc.stderr


# ---------------------------------------------------------------------------------------------
# `hatch-shrinkray wheel`: entries that are not models stream through; a broken archive, a
# bad SOURCE_DATE_EPOCH or a full or read-only destination are one line, with nothing left.

WHEEL_NAME = "toymodel-0.1.0-py3-none-any.whl"
DIST_INFO = "toymodel-0.1.0.dist-info"
WHEEL_TABLE = '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'


def record_line(name: str, digest: bytes, size: int) -> str:
    import base64

    return f"{name},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{size}\n"


def make_wheel(path: Path, entries: list[tuple[str, bytes]], *, record: bytes | None = None,
               big: str | None = None) -> Path:
    """A wheel with these entries (a name may repeat), METADATA, WHEEL and a RECORD listing each
    name once; ``big`` adds a 4 GiB entry of zeros, deflated (18 MB), written and hashed in chunks."""
    import hashlib
    import warnings
    import zipfile

    metadata = b"Metadata-Version: 2.1\nName: toymodel\nVersion: 0.1.0\n"
    tags = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries = [*entries, (f"{DIST_INFO}/METADATA", metadata), (f"{DIST_INFO}/WHEEL", tags)]
    lines = {name: record_line(name, hashlib.sha256(data).digest(), len(data)) for name, data in entries}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": on purpose
        for name, data in entries:
            zf.writestr(name, data)
        if big is not None:
            info = zipfile.ZipInfo(big)
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = 1  # type: ignore[attr-defined]
            digest, chunk = hashlib.sha256(), bytes(1 << 24)
            with zf.open(info, "w", force_zip64=True) as fh:
                for _ in range(256):
                    fh.write(chunk)
                    digest.update(chunk)
            lines[big] = record_line(big, digest.digest(), 256 << 24)
        text = "".join(lines.values()) + f"{DIST_INFO}/RECORD,,\n"
        zf.writestr(f"{DIST_INFO}/RECORD", text.encode() if record is None else record)
    return path


def wheel_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "toymodel"\nversion = "0.1.0"\n\n' + WHEEL_TABLE)
    return project


def model_bytes() -> bytes:
    return mlp().SerializeToString()


@pytest.fixture(scope="module")
def big_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("big")
    return make_wheel(directory / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())], big="toymodel/big.bin")


def can_mount_tmpfs(directory: Path) -> bool:
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs '{directory}'"], capture_output=True, check=False)
    return probe.returncode == 0


def in_namespace(setup: str, command: str, after: str, tmp_path: Path) -> tuple[int, str, str]:
    """Run ``setup && command; after`` in a private user + mount namespace (where ``setup`` may
    mount a small tmpfs); the command's exit code, stdout and stderr."""
    from hardening import CONSOLE_SCRIPT

    full = (f"export HATCH_SHRINKRAY_CACHE_DIR='{tmp_path}/cache'; S='{CONSOLE_SCRIPT}'; {setup} && "
            f"( {command} ) > '{tmp_path}/stdout' 2> '{tmp_path}/stderr'; echo $? > '{tmp_path}/rc'; {after}")
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", full], check=True, timeout=600)
    return (int((tmp_path / "rc").read_text()), (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text())


@pytest.mark.extended
def test_wheel_streams_a_4_gib_entry_through_a_tiny_tmpdir(big_wheel: Path, tmp_path: Path) -> None:
    import zipfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    if not can_mount_tmpfs(tmp):
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    project = wheel_project(tmp_path)
    code, out, err = in_namespace(f"mount -t tmpfs -o size=32m tmpfs '{tmp}'",
                                  f"cd '{project}' && TMPDIR='{tmp}' \"$S\" wheel '{big_wheel}' -o '{tmp_path}/out'",
                                  f"ls -A '{tmp}' > '{tmp_path}/left'", tmp_path)
    assert code == 0, err
    assert "Traceback" not in err
    assert out.strip().startswith(f"{tmp_path}/out/{WHEEL_NAME}: rewrote (1 model"), out
    assert (tmp_path / "left").read_text().split() in ([], [".ses"])
    with zipfile.ZipFile(big_wheel) as before, zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as after:
        old, new = before.getinfo("toymodel/big.bin"), after.getinfo("toymodel/big.bin")
        assert (new.CRC, new.file_size, new.compress_size) == (old.CRC, old.file_size, old.compress_size)
        record = after.read(f"{DIST_INFO}/RECORD").decode()
        assert record_line("toymodel/big.bin", b"", 0).split(",")[0] in record
        big_row = next(r for r in record.splitlines() if r.startswith("toymodel/big.bin,"))
        assert big_row in before.read(f"{DIST_INFO}/RECORD").decode()
        assert len(after.read("toymodel/models/a.onnx")) < len(model_bytes()) / 2
        assert after.testzip() is None  # every entry's CRC, the big one included (streamed)


def test_wheel_writes_a_duplicated_entry_once_and_refuses_differing_copies(tmp_path: Path) -> None:
    import zipfile

    project = wheel_project(tmp_path)
    init = ("toymodel/__init__.py", b"x = 1\n")
    same = make_wheel(tmp_path / WHEEL_NAME, [init, init, ("toymodel/models/a.onnx", model_bytes())])
    proc = cli("wheel", str(same), "-o", str(tmp_path / "out"), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert (f"shrinkray: {WHEEL_NAME}: toymodel/__init__.py is in the archive more than once, with the same bytes; "
            "written once") in proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        assert [i.filename for i in zf.infolist()].count("toymodel/__init__.py") == 1
    other = tmp_path / "other"
    other.mkdir()
    differ = make_wheel(other / WHEEL_NAME, [("toymodel/__init__.py", b"x = 1\n"), ("toymodel/__init__.py", b"x = 2\n"),
                                             ("toymodel/models/a.onnx", model_bytes())])
    line = one_error(cli("wheel", str(differ), "-o", str(tmp_path / "out2"), cwd=project))
    assert line.startswith(f"error: {differ}: ") and ("does not match its RECORD hash" in line
                                                      or "more than once, with different bytes" in line), line
    assert files_under(tmp_path / "out2") == []


BROKEN = {
    "RECORD not UTF-8": ({"record": b"toymodel/__init__.py,sha256=\xff\xfe,0\n"}, "its RECORD is not UTF-8 text"),
    "a file that is also a directory": ({"extra": [("toymodel/models", b"")]},
                                        "'toymodel/models' is both a file and the directory of"),
    "a name with an empty part": ({"extra": [("toymodel//x.py", b"")]}, "is not a plain relative path"),
    "a name too long for any file system": ({"extra": [("toymodel/" + "x" * 300, b"")]},
                                            "has a part longer than 255 bytes, which no file system holds"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_wheel_is_one_line(tmp_path: Path, case: str) -> None:
    spec, expected = BROKEN[case]
    entries = [("toymodel/__init__.py", b""), ("toymodel/models/a.onnx", model_bytes()), *spec.get("extra", [])]
    wheel = make_wheel(tmp_path / WHEEL_NAME, entries, record=spec.get("record"))
    line = one_error(cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=wheel_project(tmp_path)))
    assert line.startswith(f"error: {wheel}: ") and expected in line, line
    assert files_under(tmp_path / "out") == []


@pytest.mark.parametrize(("value", "expected"), [
    ("4354819200", "SOURCE_DATE_EPOCH is '4354819200', past 2107-12-31 23:59:59, the last time a zip entry can hold"),
    ("99999999999999999999", "past 2107-12-31"),
    ("soon", "SOURCE_DATE_EPOCH must be an integer number of seconds; got 'soon'"),
])
def test_source_date_epoch_out_of_the_zip_range_is_one_line(tmp_path: Path, value: str, expected: str,
                                                            env: dict[str, str]) -> None:
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())])
    before = wheel.read_bytes()
    line = one_error(cli("wheel", str(wheel), "--in-place", cwd=wheel_project(tmp_path),
                         env={**env, "SOURCE_DATE_EPOCH": value}))
    assert expected in line, line
    assert wheel.read_bytes() == before
    assert not [p for p in wheel.parent.iterdir() if p.name.endswith(".tmp")]
    assert files_under(Path(env["TMPDIR"])) in ([], [".ses"])


@pytest.mark.parametrize("disk", ["full", "read-only"])
@pytest.mark.parametrize("where", ["-o", "--in-place"])
def test_wheel_onto_a_full_or_read_only_disk_is_one_line(tmp_path: Path, disk: str, where: str) -> None:
    mount = tmp_path / "disk"
    mount.mkdir()
    if not can_mount_tmpfs(mount):
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())])
    project = wheel_project(tmp_path)
    size = wheel.stat().st_size
    # full: the input fits, with 8 KiB to spare; read-only: remounted so after the input is in place
    setup = (f"mount -t tmpfs -o size={size + 8192} tmpfs '{mount}' && cp '{wheel}' '{mount}/'"
             + (f" && mount -o remount,ro '{mount}'" if disk == "read-only" else ""))
    target = f"'{mount}/{WHEEL_NAME}' --in-place" if where == "--in-place" else \
        f"'{wheel}' -o '{mount}/out'" if disk == "full" else f"'{wheel}' -o '{mount}' --force"  # over its copy
    code, _, err = in_namespace(setup, f"cd '{project}' && \"$S\" wheel {target}",
                                f"cmp '{mount}/{WHEEL_NAME}' '{wheel}' > '{tmp_path}/same' 2>&1; "
                                f"ls -A '{mount}' > '{tmp_path}/left'", tmp_path)
    assert code == 1, err
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    why = "No space left on device" if disk == "full" else "Read-only file system"
    assert f"cannot write the wheel: {why}" in errors[0] or f"cannot create the output directory: {why}" in errors[0], \
        errors[0]
    assert (tmp_path / "same").read_text() == ""  # the input (or its copy on the disk) is untouched
    assert (tmp_path / "left").read_text().split() == [WHEEL_NAME]  # no temporary file, no empty -o directory


# ---------------------------------------------------------------------------------------------
# Tracebacks that are now one line: sample files, generated inputs, plans, check's report files.


def npy(header: bytes) -> bytes:
    padded = header + b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded


@pytest.mark.parametrize(("header", "why"), [
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 256), ", "EOF in multi-line statement"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 256), 'x': '''", "EOF in multi-line string"),
])
def test_a_malformed_npy_header_is_one_line(tmp_path: Path, header: bytes, why: str) -> None:
    import zipfile

    src = save(mlp(), tmp_path / "m.onnx")
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as zf:
        zf.writestr("x.npy", npy(header))
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--inputs", str(tmp_path / "bad.npz")))
    assert line == (f"error: {tmp_path / 'bad.npz'}: array 'x' is corrupt: its .npy header cannot be parsed ({why}) "
                    "(write it with numpy.savez(path, input_name=array, ...) or record it with `hatch-shrinkray "
                    "record`)"), line
    assert files_under(tmp_path / "out") == []


def test_a_wrong_shape_calibration_sample_is_one_line(tmp_path: Path) -> None:
    import hashlib

    import numpy as np

    from hatch_shrinkray.verification.recordings import Recording, write_recording

    src = save(mlp(), tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((2, 256)).astype(np.float32)} for _ in range(8)]
    samples[0] = {"x": rng.standard_normal((2, 128)).astype(np.float32)}  # sample 0 calibrates (every 4th is held out)
    (tmp_path / "rec").mkdir()
    recording = write_recording(tmp_path / "rec", Recording(hashlib.sha256(src.read_bytes()).hexdigest(), "m.onnx",
                                                            ("x",), tuple(samples), 8, tuple(range(8))))
    for method in ("int8", "auto"):
        line = one_error(cli("shrink", str(src), "-o", str(tmp_path / method), "--method", method,
                             "--inputs", str(tmp_path / "rec")))
        assert line.startswith(f"error: {os.path.relpath(recording)}: array 'x' (sample 0) has shape (2, 128) but "
                               "the input takes (batch, 256)") or line.startswith(
            f"error: {recording}: array 'x' (sample 0) has shape (2, 128)"), line


@pytest.mark.parametrize(("flags", "names"), [
    (["--samples", "100000000000"], "lower `--samples`"),
    (["--default-dim", "100000000"], "lower `--samples` or `--default-dim`"),
    (["--dim", "batch=100000000"], "lower `--samples` or `--dim batch=N`"),
])
def test_generated_inputs_too_large_to_allocate_are_one_line(tmp_path: Path, flags: list[str], names: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    start = time.monotonic()
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), *flags, timeout=120))
    assert time.monotonic() - start < 60
    assert line.startswith(f"error: {src}: generated inputs would take "), line
    assert f"over the 1 GB they may take; {names} (or verify on real inputs" in line, line


def test_generated_inputs_too_large_name_the_toml_key_that_set_them(tmp_path: Path) -> None:
    override = ('[[tool.hatch.build.hooks.shrinkray.overrides]]\nmodels = ["src/toymodel/models/a.onnx"]\n'
                "dims = { batch = 100000000 }\n")
    root = write_project(tmp_path / "toymodel", f"samples = 4\n\n{override}")
    save(mlp(), root / MODEL)
    err = hook_build_error(root, tmp_path)
    line = next(ln for ln in err.splitlines() if "generated inputs would take" in ln)
    assert line.startswith(f"shrinkray: {MODEL}: generated inputs would take 409.6 GB (4 samples of x 100000000x256)")
    assert ("lower `tool.hatch.build.hooks.shrinkray.samples` or "
            "`tool.hatch.build.hooks.shrinkray.overrides[0].dims.batch`") in line, line


def test_an_int_range_no_input_value_fits_is_one_line(tmp_path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
                               helper.make_node("MatMul", ["f", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, ["b", 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 256])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "u8.onnx"))
    line = one_error(cli("shrink", str(tmp_path / "u8.onnx"), "-o", str(tmp_path / "out"), "--int-range", "300", "400"))
    assert line == (f"error: {tmp_path / 'u8.onnx'}: `--int-range` [300, 400) holds no value of input 'x', which is "
                    "uint8 (give a range the input's type can hold)"), line


PLAN_HINT = ("(hatch-shrinkray check --fix (or --search) writes it; fix the entry, or delete the file and run check "
             "--fix again)")


@pytest.mark.parametrize(("text", "why"), [
    ("[" * 100_000 + "]" * 100_000, "the plan is not a plan: its JSON is nested too deeply"),
    ('{"format": "hatch-shrinkray-plan", "version": 1, "models": {"' + "0" * 64 + '": {"model": "m", '
     '"method": "int8", "tensors": [], "checked": "abc"}}}',
     "`models.0000000000000000` is not shaped like a plan entry (tensors must be a list and checked an object)"),
    ('{"format": "hatch-shrinkray-plan", "version": 1, "models": {"' + "0" * 64 + '": {"model": "m", '
     '"method": "int8", "tensors": [{"scope": "main", "tensor": ["W1"], "encoding": "fp16"}]}}}',
     "`models.0000000000000000` is not shaped like a plan entry (['W1'] is not a string)"),
])
def test_a_junk_plan_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    (tmp_path / "plan.json").write_text(text)
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(tmp_path / "plan.json")))
    assert line == f"error: {tmp_path / 'plan.json'}: {why} {PLAN_HINT}", line


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_plan_that_is_a_special_file_is_one_line(tmp_path: Path, special: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    plan = Path("/dev/zero") if special == "/dev/zero" else tmp_path / "plan.json"
    if special == "fifo":
        os.mkfifo(plan)
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(plan), timeout=60))
    kind = "a character device" if special == "/dev/zero" else "a FIFO"
    assert line == f"error: {plan}: cannot read the plan: is {kind}, not a regular file {PLAN_HINT}", line


WRITES_JUNK_REPORTS = textwrap.dedent('''
    import os, sys
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, 256), np.float32)})
    directory = os.environ["HATCH_SHRINKRAY_OUTCOMES"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "zz-junk.json"), "w") as fh:
        fh.write(sys.argv[2])
''')


@pytest.mark.parametrize("junk", ["[" * 100_000, '{"tests": {"t": {"no outcome": 1}}}', "not json"])
def test_check_with_damaged_report_files_is_one_line(tmp_path: Path, env: dict[str, str], junk: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "junk.py"
    script.write_text(WRITES_JUNK_REPORTS)
    line = one_error(cli("check", str(src), "--", PY, str(script), str(src), junk, cwd=tmp_path, env=env))
    assert line.startswith("error: a report the command's processes wrote is damaged (zz-junk.json: "), line
    assert line.endswith("nothing can be judged from this run (something in the command wrote into hatch-shrinkray's "
                         "temporary report directory; run check again)"), line


# ---------------------------------------------------------------------------------------------
# Words: `shrink --plan` says whether it ships the bytes `check` accepted and names each encoding;
# a plan naming a tensor the model does not have is an error.


def write_a_plan(path: Path, model: Path, tensors: tuple[tuple[str, str, str], ...], **checked: str) -> Path:
    from hatch_shrinkray.files import file_sha256
    from hatch_shrinkray.shipping.plan import PlanEntry, write_plan

    write_plan(path, {file_sha256(model): PlanEntry(model.name, "int8", tensors, dict(checked))})
    return path


def test_shrink_plan_says_whether_it_ships_what_check_accepted(tmp_path: Path) -> None:
    from hatch_shrinkray.files import file_sha256

    src = save(mlp(), tmp_path / "m.onnx")
    plan = write_a_plan(tmp_path / "plan.json", src, (("main", "W1", "fp16"),), shrunk_sha256="0" * 64)
    proc = cli("shrink", str(src), "-o", str(tmp_path / "one"), "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert ", 1 tensor fp16, " in proc.stdout and "tensor int8" not in proc.stdout, proc.stdout
    assert (f"shrinkray: {src}: differs from the model `check` accepted (the options, inputs or tool versions changed "
            "since): its tests did not judge these bytes") in proc.stderr, proc.stderr
    shipped = file_sha256(tmp_path / "one" / "m.onnx")
    write_a_plan(plan, src, (("main", "W1", "fp16"),), shrunk_sha256=shipped, verdict="0 of 3 tests regressed")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "two"), "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert f"shrinkray: {src}: this is the model `check` accepted (0 of 3 tests regressed)" in proc.stderr


def test_a_plan_naming_a_tensor_the_model_lacks_is_an_error(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    plan = write_a_plan(tmp_path / "plan.json", src, (("main", "W1", "fp16"), ("main", "W9", "int10")))
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(plan)))
    assert line == (f"error: {src}: the plan in {plan} names tensor 'W9' in 'main', which the model does not have (the "
                    "plan was edited or made for another model; find one again with `hatch-shrinkray check --search "
                    f"{src} --plan {plan} -- python -m pytest`, or delete its entry)"), line
    assert files_under(tmp_path / "out") == []
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    write_a_plan(root / "shrinkray-plan.json", root / MODEL, (("main", "W9", "fp16"),))
    err = hook_build_error(root, tmp_path)
    assert (f"shrinkray: {MODEL}: the plan in shrinkray-plan.json names tensor 'W9' in 'main', which the model does "
            "not have") in err, err


def test_wheel_keeps_a_data_file_an_unconfigured_model_reads(tmp_path: Path) -> None:
    import zipfile

    import numpy as np

    models = tmp_path / "models"
    shared_weights(models)
    expected = run_model(models / "b.onnx")
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b"")] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "b.onnx", "weights.bin")])
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
                                            '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/a.onnx"]\n')
    proc = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert ("shrinkray: toymodel/models/a.onnx: toymodel/models/weights.bin stays in the archive (524.29 KB): "
            "toymodel/models/b.onnx reads it too and is not configured") in proc.stderr
    assert "shrinkray: toymodel/models/a.onnx: 262.29 KB -> " in proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        zf.extractall(tmp_path / "unpacked")
    shipped = tmp_path / "unpacked/toymodel/models"
    assert sorted(p.name for p in shipped.iterdir()) == ["a.onnx", "b.onnx", "weights.bin"]
    np.testing.assert_array_equal(run_model(shipped / "b.onnx"), expected)


# ---------------------------------------------------------------------------------------------
# Other tracebacks and hangs of the same kind.


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_model_path_that_is_a_special_file_is_one_line(tmp_path: Path, special: str) -> None:
    path = Path(special) if special == "/dev/zero" else tmp_path / "m.onnx"
    if special == "fifo":
        os.mkfifo(path)
    kind = "a character device" if special == "/dev/zero" else "a FIFO"
    for args in (["info", str(path)], ["shrink", str(path), "-o", str(tmp_path / "out")],
                 ["compare", str(path), str(path)]):
        line = one_error(cli(*args, timeout=60))
        assert line == f"error: {path}: is {kind}, not an .onnx file (pass the model file itself)", line


def test_a_pyproject_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = one_error(cli("check", "--", PY, "-c", "pass", cwd=tmp_path))
    assert line == f"error: {tmp_path / 'pyproject.toml'}: invalid TOML: nested too deeply", line


def test_check_json_onto_a_full_device_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is Linux-only")
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "run.py"
    script.write_text("import sys, numpy as np, onnxruntime as ort\n"
                      "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
                      ".run(None, {'x': np.ones((1, 256), np.float32)})\n")
    line = one_error(cli("check", str(src), "--json", "/dev/full", "--", PY, str(script), str(src), cwd=tmp_path,
                         env=env))
    assert line == ("error: /dev/full: cannot write the report: No space left on device (free some space or choose "
                    "another --json path)"), line


def test_a_cached_unchanged_model_with_external_data_is_served_without_a_word(tmp_path: Path) -> None:
    """Nothing to shrink: the cache holds the model file itself, which reads its data file from
    beside the original; the load check of cached bytes does not apply to the user's own file."""
    import zipfile

    import onnx

    root = write_project(tmp_path / "toymodel", "min-elements = 100000000\n")
    path = root / MODEL
    onnx.save(mlp(256, 512), str(path), save_as_external_data=True, location="a.onnx.data", size_threshold=1024)
    for _ in range(2):
        proc = hook_build(root, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "is not used" not in proc.stderr and "shipping the original" in proc.stderr, proc.stderr
        (wheel,) = (tmp_path / "dist").iterdir()
        with zipfile.ZipFile(wheel) as zf:  # the second build once dropped the data file the original reads
            assert {"toymodel/models/a.onnx", "toymodel/models/a.onnx.data"} <= set(zf.namelist())
        wheel.unlink()
    assert len(list((tmp_path / "cache").glob("*.onnx"))) == 1


def test_a_wheel_whose_entries_overlap_is_refused_before_reading_them(tmp_path: Path) -> None:
    """The zip-bomb layout: a second central-directory entry pointing at the first one's bytes (a
    thousand of them would make the RECORD check read the same data a thousand times)."""
    import struct

    wheel = make_wheel(tmp_path / "in.zip", [("toymodel/__init__.py", b""), ("toymodel/models/a.onnx", model_bytes()),
                                             ("toymodel/big.bin", bytes(1 << 20))])
    data = wheel.read_bytes()
    end = data.rfind(b"PK\x05\x06")
    size, offset = struct.unpack("<II", data[end + 12:end + 20])
    directory, records, pos = data[offset:offset + size], [], 0
    while pos < len(directory):
        n, m, k = struct.unpack("<HHH", directory[pos + 28:pos + 34])
        records.append(directory[pos:pos + 46 + n + m + k])
        pos += 46 + n + m + k
    clone = next(r for r in records if b"toymodel/big.bin" in r).replace(b"big.bin", b"big.bim")
    tail = bytearray(data[end:])
    count = struct.unpack("<H", tail[8:10])[0] + 1
    tail[8:16] = struct.pack("<HHI", count, count, size + len(clone))
    bomb = tmp_path / WHEEL_NAME
    bomb.write_bytes(data[:offset] + directory + clone + bytes(tail))
    line = one_error(cli("wheel", str(bomb), "-o", str(tmp_path / "out"), cwd=wheel_project(tmp_path)))
    assert line == (f"error: {bomb}: entries 'toymodel/big.bin' and 'toymodel/big.bim' overlap in the archive (this "
                    "is how zip bombs are made; do not install it)"), line
