"""The hook driven through hatchling's real builders, in this process (no isolation, no network).

Each test builds a tiny project whose model is an MLP with a 256x256 float weight, so a build
takes well under a second, and inspects the archives hatchling actually wrote. The cases that start
a process (the load check of an original's bytes, a fresh interpreter) are in tests/test_hook_inprocess.py.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import MODEL, build
from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder
from onnx import helper
from toyproject import IN_SDIST, IN_WHEEL, forbid_engine, sdist_members, unpacked_sdist, write_project

import hatch_shrinkray.engine
from hatch_shrinkray.hatch.plugin import ShrinkrayBuildHook
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME

from onnx_builders import init, mlp, model, save, vi, weight


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "toymodel")


pytestmark = pytest.mark.usefixtures("isolated")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha(p.read_bytes()) if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def test_wheel_ships_exactly_one_shrunk_copy(project: Path, isolated: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    original = (project / MODEL).read_bytes()
    before = tree_digest(project)
    wheel = build(project)
    with zipfile.ZipFile(wheel) as zf:
        assert zf.namelist().count(IN_WHEEL) == 1
        shipped = zf.read(IN_WHEEL)
        assert not any(name.endswith(MANIFEST_NAME) for name in zf.namelist())
    assert len(shipped) < len(original) / 3
    onnx.checker.check_model(onnx.load_from_string(shipped))
    err = capsys.readouterr().err.splitlines()
    assert f"shrinkray: {MODEL} (" in err[0] and err[0].endswith("int8...")
    assert err[1].startswith(f"shrinkray: {MODEL}: ") and "cached" not in err[1]
    assert ": shipped shrunk, " in err[1] and err[1].endswith(
        ", int8: passes a smoke check on 8 generated samples, " + err[1].rsplit(", ", 1)[1])
    assert len(err[1]) <= 160 and "cos " not in err[1], err[1]
    assert "on 8 generated samples" in err[1]
    assert err[2] == f"shrinkray: {MODEL}: verified on generated inputs only (a smoke check)"  # and how to fix it:
    assert err[3] == ("shrinkray: record real inputs: `hatch-shrinkray record -o shrinkray-inputs -- COMMAND`, "
                      "then set `inputs` to it")  # on its own line: the two would not fit in one (decision 7)
    assert err[4].startswith("shrinkray: total 1 model: 1 shipped shrunk; ")
    assert not any("\r" in line or "\x1b" in line for line in err)
    assert tree_digest(project) == before
    assert list(isolated.iterdir()) == []


def test_a_pinned_checksum_of_the_model_is_named_by_the_hook(project: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The package's own code pins the model's md5: the build warns which file, and what the pin
    would have to say for the model it ships."""
    digest = hashlib.md5((project / MODEL).read_bytes()).hexdigest()
    (project / "src/toymodel/check.py").write_text(f'MODEL_MD5 = "{digest}"\n')
    wheel = build(project)
    shipped = zipfile.ZipFile(wheel).read(IN_WHEEL)
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "pins the" in ln]
    assert line.startswith(f"shrinkray: warning: src/toymodel/check.py pins the md5 of {MODEL}'s original bytes"), line
    assert hashlib.md5(shipped).hexdigest() in line and 'set `pins = "rewrite"`' in line
    assert zipfile.ZipFile(wheel).read("toymodel/check.py") == (project / "src/toymodel/check.py").read_bytes()


def test_pins_rewrite_ships_a_rewritten_copy_and_leaves_the_project_file(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``pins = "rewrite"``: the wheel and the sdist ship the pinning file naming the shipped model's
    md5 (once each), one line says so per archive, and the project's own file is never touched."""
    project = write_project(tmp_path / "toymodel", 'pins = "rewrite"\n')
    digest = hashlib.md5((project / MODEL).read_bytes()).hexdigest()
    pinning = project / "src/toymodel/check.py"
    pinning.write_text(f'MODEL_MD5 = "{digest}"  # checked before loading\n')
    before = tree_digest(project)
    with zipfile.ZipFile(build(project)) as zf:
        assert zf.namelist().count("toymodel/check.py") == 1
        expected = f'MODEL_MD5 = "{hashlib.md5(zf.read(IN_WHEEL)).hexdigest()}"  # checked before loading\n'
        assert zf.read("toymodel/check.py").decode() == expected
    members = sdist_members(build(project, "sdist"))
    assert members["toymodel-0.1.0/src/toymodel/check.py"].decode() == expected
    assert tree_digest(project) == before and pinning.read_text().startswith(f'MODEL_MD5 = "{digest}"')
    err = capsys.readouterr().err.splitlines()
    line = f'shrinkray: src/toymodel/check.py: the pin of {MODEL} now names the shrunk model\'s md5 (pins = "rewrite")'
    assert err.count(line) == 2 and not any("warning" in ln for ln in err), err


def test_sdist_ships_shrunk_model_and_manifest(project: Path) -> None:
    members = sdist_members(build(project, "sdist"))
    shipped = members[IN_SDIST]
    assert len(shipped) < (project / MODEL).stat().st_size / 3
    assert "toymodel-0.1.0/pyproject.toml" in members
    manifest = json.loads(members[f"toymodel-0.1.0/{MANIFEST_NAME}"])
    entry = manifest[MODEL]
    assert set(entry) == {"original_sha256", "shrunk_sha256", "method", "options", "versions", "verification",
                          "original_size"}
    assert entry["original_size"] == (project / MODEL).stat().st_size
    assert entry["shrunk_sha256"] == sha(shipped)
    assert entry["original_sha256"] == sha((project / MODEL).read_bytes())
    assert entry["method"] == "int8"
    assert set(entry["versions"]) == {"hatch-shrinkray", "onnx", "onnxruntime"}
    assert entry["verification"]["passed"] is True


def test_manifest_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same inputs, another checkout path and a cold cache: byte-identical manifest and model."""
    for name in ("one", "two"):
        root = write_project(tmp_path / name / "toymodel", 'inputs = "data/inputs.npz"\n')
        (root / "data").mkdir()
        np.savez(root / "data/inputs.npz", x=np.ones((2, 256), dtype=np.float32))
    first = sdist_members(build(tmp_path / "one/toymodel", "sdist"))
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "other-cache"))
    second = sdist_members(build(tmp_path / "two/toymodel", "sdist"))
    key = f"toymodel-0.1.0/{MANIFEST_NAME}"
    assert first[key] == second[key]
    assert str(tmp_path).encode() not in first[key]
    assert first[IN_SDIST] == second[IN_SDIST]


def test_wheel_from_sdist_is_a_pass_through(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    sdist = build(project, "sdist")
    unpacked = tmp_path / "unpacked"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    root = unpacked / "toymodel-0.1.0"
    capsys.readouterr()
    forbid_engine(monkeypatch)
    wheel = build(root, out=tmp_path / "wheel-dist")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.namelist().count(IN_WHEEL) == 1
        assert zf.read(IN_WHEEL) == (root / MODEL).read_bytes()
        assert not any(name.endswith(MANIFEST_NAME) for name in zf.namelist())
    err = capsys.readouterr().err
    assert f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> 77.06 KB (28.3%), already shrunk" in err
    assert "total 1 model: 1 shipped already shrunk; 272.54 -> 77.06 KB (28.3%)" in err


def test_pass_through_survives_gitignored_models(project: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Big models are often VCS-ignored; the sdist carries .gitignore, so the wheel build must
    force-include the pre-shrunk file or it silently ships no model at all."""
    (project / ".gitignore").write_text("*.onnx\n")
    sdist = build(project, "sdist")
    assert IN_SDIST in sdist_members(sdist)
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    forbid_engine(monkeypatch)
    wheel = build(tmp_path / "unpacked/toymodel-0.1.0", out=tmp_path / "wheel-dist")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.namelist().count(IN_WHEEL) == 1


def test_second_build_is_served_from_the_cache(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    first = build(project, out=tmp_path / "one")
    capsys.readouterr()
    forbid_engine(monkeypatch)
    second = build(project, out=tmp_path / "two")
    with zipfile.ZipFile(first) as a, zipfile.ZipFile(second) as b:
        assert a.read(IN_WHEEL) == b.read(IN_WHEEL)
    err = capsys.readouterr().err
    assert ", int8: passes a smoke check on 8 generated samples, cached\n" in err
    assert "total 1 model: 1 shipped shrunk; " in err
    assert len(list((tmp_path / "cache").glob("*.onnx"))) == 1


def test_cache_false_does_no_caching(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel", "cache = false\n")
    build(root)
    assert not (tmp_path / "cache").exists()


def test_verification_failure_fails_cleanly(tmp_path: Path, isolated: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """With ``strict``, a model that fails even on generated inputs fails the build (without it, the
    original ships: tests/test_first_build.py), and leaves nothing behind."""
    root = write_project(tmp_path / "toymodel",
                         'max-rel-l2 = 0.0\nmin-cosine = 1.0\nstrict = true\njudges = { y = "values" }\n')
    before = tree_digest(root)
    out = tmp_path / "dist"
    for target in ("wheel", "sdist"):
        with pytest.raises(SystemExit) as info:
            build(root, target, out)
        assert info.value.code == 1
        err = capsys.readouterr().err
        assert f"shrinkray: {MODEL}: failed: int8 broke its limits on 8 generated samples" in err
        assert "rel L2" in err and "FAIL" in err and "Traceback" not in err
        assert not out.exists() or list(out.iterdir()) == []
    assert tree_digest(root) == before
    assert list(isolated.iterdir()) == []
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("*.onnx"))


def test_bad_config_lists_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", 'methd = "int8"\nlevels = 1\nmodels2 = []\n')
    with pytest.raises(SystemExit):
        build(root)
    table = "tool.hatch.build.hooks.shrinkray"
    assert capsys.readouterr().err.splitlines() == [
        "shrinkray: Invalid configuration for build hook `shrinkray`:",
        f"- Unknown field `{table}.methd`; did you mean `method`?",
        f"- Unknown field `{table}.models2`; did you mean `models`?",
        f"- Field `{table}.levels` must be an integer from 3 to 255 with method int8 (255: plain int8); got 1",
    ]


def test_target_level_table_is_named_in_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel")
    with (root / "pyproject.toml").open("a") as fh:
        fh.write('\n[tool.hatch.build.targets.wheel.hooks.shrinkray]\nmodels = ["nope/*.onnx"]\n')
    with pytest.raises(SystemExit):
        build(root)
    assert ("Field `tool.hatch.build.targets.wheel.hooks.shrinkray.models` pattern `nope/*.onnx` "
            "matches no file") in capsys.readouterr().err


def test_editable_build_ships_nothing_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editable installs serve models from the tree; a forced copy would land in site-packages.

    ``dev-mode-dirs`` picks hatchling's explicit editable mode, which needs no ``editables``.
    """
    root = write_project(tmp_path / "toymodel")
    with (root / "pyproject.toml").open("a") as fh:
        fh.write('\n[tool.hatch.build]\ndev-mode-dirs = ["src"]\n')
    forbid_engine(monkeypatch)
    with zipfile.ZipFile(build(root, version="editable")) as zf:
        assert not [n for n in zf.namelist() if n.endswith(".onnx")]


def test_sdist_original_ships_originals_and_wheel_shrinks(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel", 'sdist = "original"\n')
    original = (root / MODEL).read_bytes()
    members = sdist_members(build(root, "sdist"))
    assert members[IN_SDIST] == original
    assert f"toymodel-0.1.0/{MANIFEST_NAME}" not in members
    with zipfile.ZipFile(build(root)) as zf:
        assert len(zf.read(IN_WHEEL)) < len(original) / 3


def test_external_data_of_the_original_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model saved with a ``.data`` sidecar: the shrunk copy is self-contained, so shipping the
    sidecar too would put the original weights back into the archive."""
    root = write_project(tmp_path / "toymodel")
    onnx.save_model(mlp(), str(root / MODEL), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="a.onnx.data", size_threshold=0)
    sidecar = (root / MODEL).with_name("a.onnx.data")
    assert sidecar.stat().st_size > 200_000
    members = sdist_members(build(root, "sdist"))
    assert IN_SDIST in members and f"{IN_SDIST}.data" not in members
    with zipfile.ZipFile(build(root)) as zf:
        assert f"{IN_WHEEL}.data" not in zf.namelist()
        shipped = onnx.load_from_string(zf.read(IN_WHEEL))
    onnx.checker.check_model(shipped, full_check=True)
    with tarfile.open(next((tmp_path / "dist").glob("*.tar.gz"))) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    forbid_engine(monkeypatch)
    with zipfile.ZipFile(build(tmp_path / "unpacked/toymodel-0.1.0", out=tmp_path / "again")) as zf:
        assert [n for n in zf.namelist() if "models/" in n] == [IN_WHEEL]


def quantized_model() -> onnx.ModelProto:
    """A QDQ model: its weights are already int8, so shrinking it again must be refused."""
    return model(
        [helper.make_node("DequantizeLinear", ["Wq", "s", "z"], ["W"]),
         helper.make_node("MatMul", ["x", "W"], ["y"])],
        [vi("x", [1, 256])], [vi("y", [1, 256])],
        [init("Wq", (weight((256, 256)) * 2000).clip(-127, 127).astype(np.int8)),
         init("s", np.array(0.0005, dtype=np.float32)), init("z", np.array(0, dtype=np.int8))])


def test_already_quantized_input_is_shipped_unchanged(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", onnx_model=quantized_model())
    with zipfile.ZipFile(build(root)) as zf:
        assert zf.read(IN_WHEEL) == (root / MODEL).read_bytes()
    err = capsys.readouterr().err
    assert f"shrinkray: {MODEL}: shipped its original (65.69 KB): already quantized: it contains" in err
    assert "no model shrunk, 1 shipped its original" in err


def hook_for(root: Path, target: str = "wheel") -> ShrinkrayBuildHook:
    builder = (WheelBuilder if target == "wheel" else SdistBuilder)(str(root))
    return ShrinkrayBuildHook(str(root), builder.config.hook_config["shrinkray"], builder.config,
                              builder.metadata, "", builder.PLUGIN_NAME)


def test_dependencies_only_when_work_is_pending(project: Path, tmp_path: Path) -> None:
    assert "onnxruntime>=1.22" in hook_for(project).dependencies()
    with tarfile.open(build(project, "sdist")) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert hook_for(tmp_path / "unpacked/toymodel-0.1.0").dependencies() == []


def test_other_targets_are_left_alone(project: Path) -> None:
    hook = ShrinkrayBuildHook(str(project), {"models": ["src/**/*.onnx"]}, None, None, "", "binary")
    build_data: dict[str, dict[str, str]] = {"force_include": {}}
    hook.initialize("standard", build_data)
    assert build_data == {"force_include": {}}
    assert hook.dependencies() == []


# --- the model changes while the build reads it (a re-export or a git checkout mid-build) --------


def swap_before_the_engine_reads(monkeypatch: pytest.MonkeyPatch, path: Path, replacement: onnx.ModelProto) -> None:
    """Between the hook hashing ``path`` and the engine reading it, ``replacement`` is written
    there: the real engine then reads the new bytes (deterministic stand-in for the race)."""
    real = hatch_shrinkray.engine.shrink

    def swapped(source: object, destination: object, options: object, **kwargs: bool) -> object:
        save(replacement, path)
        return real(source, destination, options, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hatch_shrinkray.engine, "shrink", swapped)


def test_a_model_swapped_mid_build_never_poisons_the_cache(project: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    original = (project / MODEL).read_bytes()
    other = mlp(256, 128)
    swap_before_the_engine_reads(monkeypatch, project / MODEL, other)
    sdist = sdist_members(build(project, "sdist", tmp_path / "racy"))
    monkeypatch.undo()
    # What was shipped is described truthfully: the shrink of the bytes that were read.
    entry = json.loads(sdist[f"toymodel-0.1.0/{MANIFEST_NAME}"])[MODEL]
    assert entry["original_sha256"] == sha(other.SerializeToString())
    assert entry["shrunk_sha256"] == sha(sdist[IN_SDIST])
    # The old bytes come back (git checkout again): their build must not be served the other
    # model from the cache; it must ship what a cold cache ships.
    (project / MODEL).write_bytes(original)
    with zipfile.ZipFile(build(project, out=tmp_path / "warm")) as zf:
        warm = zf.read(IN_WHEEL)
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cold-cache"))
    with zipfile.ZipFile(build(project, out=tmp_path / "cold")) as zf:
        assert warm == zf.read(IN_WHEEL)


# --- what a manifest match is trusted with -------------------------------------------------------


def point_manifest_at(root: Path, data: bytes) -> None:
    """Replace the model with ``data`` and make the manifest entry name exactly those bytes."""
    (root / MODEL).write_bytes(data)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest[MODEL]["shrunk_sha256"] = sha(data)
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))


@pytest.mark.parametrize("data", [b"#!/bin/sh\necho not a model\n", b"\x08\x07" + b"\x00" * 64],
                         ids=["shell-script", "protobuf-garbage"])
def test_a_manifest_match_that_is_not_an_onnx_model_is_refused(project: Path, tmp_path: Path, data: bytes,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    root = unpacked_sdist(project, tmp_path)
    point_manifest_at(root, data)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        build(root, out=tmp_path / "wheel-dist")
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("shrinkray: ") and "manifest" in ln)
    assert line.startswith(f"shrinkray: {MODEL}: matches its entry in {MANIFEST_NAME} but is not an ONNX model"), line
    assert line.endswith(")"), line
    assert not (tmp_path / "wheel-dist").exists() or list((tmp_path / "wheel-dist").iterdir()) == []


def test_a_manifest_entry_whose_verification_failed_is_refused(project: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = unpacked_sdist(project, tmp_path)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest[MODEL]["verification"]["passed"] = False
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    capsys.readouterr()
    with pytest.raises(SystemExit):
        build(root, out=tmp_path / "wheel-dist")
    assert "records a failed verification" in capsys.readouterr().err
