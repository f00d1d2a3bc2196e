"""Builds that trust a shrink cache entry or an sdist manifest match only after checking it, and a cache
directory that is private (each in a fresh process; the cache's key, entries and the manifest's
determinism are in tests/unit/test_cache_manifest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hardening import MODEL, hook_build, hook_build_error, write_project

from hatch_shrinkray.result import VerificationRecord

from onnx_builders import mlp, save

# ---------------------------------------------------------------------------------------------
# Trust: cache entries and manifest matches are checked before they ship; the cache is private.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


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


@pytest.mark.process
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
    assert line == (f"shrinkray: cache directory {tmp_path / 'cache'} is writable by group and others (mode 0777): "
                    "others could pick what ships (chmod go-w it)"), err
    assert len(line) - len(str(tmp_path / "cache")) + 40 <= 160


@pytest.mark.process
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


@pytest.mark.process
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
    assert ": passes a smoke check on 8 generated samples, " in proc.stderr, proc.stderr
    assert ", cached\n" not in proc.stderr  # shrunk again, not served from the entry


@pytest.mark.process
def test_a_manifest_in_a_checkout_is_ignored(tmp_path: Path) -> None:
    """A manifest in a source checkout (copied from an sdist, or hand-written) marking the original as
    already shrunk: hatch-shrinkray writes manifests into sdists only, so it is ignored, with a line."""
    from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, file_sha256, render

    root = write_project(tmp_path / "toymodel")
    original = save(mlp(), root / MODEL)
    digest = file_sha256(original)
    entry = ManifestEntry(original_sha256=digest, shrunk_sha256=digest, method="int8",
                          verification=VerificationRecord(passed=True))
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


@pytest.mark.process
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
