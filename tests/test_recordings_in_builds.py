"""Recordings in builds (issue 19 items 4/5): never packed into the sdist or the wheel unless included
on purpose, not needed to build a wheel from our sdist, and a recording directory that lacks a model
falls back to generated inputs with a warning (data-free methods) or stops with one line (``auto``).
Real hatchling builds in this process, as ``tests/test_hook_inprocess.py`` drives them."""

from __future__ import annotations

import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import MODEL, MODELS_DIR, build, cli, hook_build, write_project

from hatch_shrinkray.recording.format import Recording
from hatch_shrinkray.recording.storage import write_recording

from onnx_builders import mlp, save
from realmodels import silero_vad

IN_WHEEL = "toymodel/models/a.onnx"


pytestmark = pytest.mark.usefixtures("isolated")


def recorded(root: Path, directory: str, model: Path) -> Path:
    """A recording of ``model`` in ``root/directory``, as `record` writes it."""
    import hashlib

    rng = np.random.default_rng(0)
    samples = tuple({"x": rng.standard_normal((2, 256)).astype(np.float32)} for _ in range(12))
    label = model.relative_to(root).as_posix() if model.is_relative_to(root) else model.name
    rec = Recording(hashlib.sha256(model.read_bytes()).hexdigest(), label, ("x",), samples, 12, tuple(range(12)),
                    tuple(f"call:{i}" for i in range(12)))
    (root / directory).mkdir(parents=True, exist_ok=True)
    return write_recording(root / directory, rec)


def members(path: Path) -> list[str]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    with tarfile.open(path) as tar:
        return [m.name.split("/", 1)[1] for m in tar.getmembers()]


@pytest.mark.parametrize("where", ["tests/shrinkray-inputs", "src/toymodel/recordings"])
def test_recordings_are_not_shipped_and_a_wheel_from_the_sdist_needs_none(tmp_path: Path, where: str,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", f'inputs = "{where}"\n')
    save(mlp(), root / MODEL)
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests/test_a.py").write_text("def test(): pass\n")
    recording = recorded(root, where, root / MODEL)
    sdist = build(root, "sdist")
    wheel = build(root, "wheel")
    assert "int8: same labels on 12 recorded calls (weak evidence, nothing fitted)" in \
        capsys.readouterr().err  # too few units to fit: verified on all 12
    shipped = members(sdist) + members(wheel)
    assert not any(recording.name in m for m in shipped), shipped
    assert "tests/test_a.py" in members(sdist)  # the rest of tests/ still ships
    assert any(m.endswith(".shrinkray-manifest.json") for m in members(sdist))

    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    unpacked = tmp_path / "unpacked/toymodel-0.1.0"
    assert not (unpacked / where).exists()
    again = build(unpacked, "wheel", tmp_path / "again")
    with zipfile.ZipFile(again) as zf, zipfile.ZipFile(wheel) as first:
        assert zf.read(IN_WHEEL) == first.read(IN_WHEEL)
    assert "already shrunk (its manifest names these bytes)" in capsys.readouterr().err


def test_recordings_included_on_purpose_are_shipped(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel", 'inputs = "data/inputs"\n')
    save(mlp(), root / MODEL)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text + '\n[tool.hatch.build.targets.sdist]\n'
                                         'include = ["src", "data/inputs", "pyproject.toml"]\n')
    recording = recorded(root, "data/inputs", root / MODEL)
    assert f"data/inputs/{recording.name}" in members(build(root, "sdist"))


def test_a_directory_without_the_model_falls_back_to_generated_inputs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n')
    save(mlp(), root / MODEL)
    other = save(mlp(256, 128), tmp_path / "other.onnx")
    recorded(root, "tests/shrinkray-inputs", other)
    wheel = build(root)
    with zipfile.ZipFile(wheel) as zf:
        assert IN_WHEEL in zf.namelist()
    err = capsys.readouterr().err
    assert "on 8 generated samples" in err
    assert (f"shrinkray: {MODEL}: tests/shrinkray-inputs holds no recording of it: verified on "
            "generated inputs instead") in err  # the directory as the project's setting names it


@pytest.mark.network
def test_an_unrecorded_model_that_fails_its_smoke_check_ships_the_original_and_the_build_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first build after `record` on silero-vad stopped on a model its tests never ran: int8 on
    generated noise drifts past the limits (a recurrent model fed noise), which proves nothing about
    the shrunk model. The build ships that model's original bytes, says why and how to shrink it, and
    shrinks the recorded one as before; the CLI does the same with exit 0."""
    root = write_project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n')
    vad = root / "src/toymodel/models/vad.onnx"
    vad.write_bytes(silero_vad().read_bytes())
    save(mlp(), root / MODEL)
    recorded(root, "tests/shrinkray-inputs", root / MODEL)
    wheel = build(root)
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("toymodel/models/vad.onnx") == vad.read_bytes()
        assert len(zf.read(IN_WHEEL)) < (root / MODEL).stat().st_size / 2
    err = capsys.readouterr().err
    assert ("shrinkray: src/toymodel/models/vad.onnx: shipped its original (2.33 MB): int8 fails on 8 generated "
            "samples (see below)\n") in err, err
    assert "shrinkray: src/toymodel/models/vad.onnx: tests/shrinkray-inputs holds no recording of it; to shrink it: " \
           "`hatch-shrinkray record -o tests/shrinkray-inputs -- python -m pytest tests`\n" in err, err
    assert "shrinkray: total 2 models: 1 shipped shrunk, 1 shipped its original; " in err
    proc = cli("shrink", str(vad), "-o", str(tmp_path / "out"), "--inputs", str(root / "tests/shrinkray-inputs"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out/vad.onnx").read_bytes() == vad.read_bytes()
    assert ": original written (2.33 MB): int8 fails on 8 generated samples" in proc.stdout, proc.stdout
    strict = cli("shrink", str(vad), "-o", str(tmp_path / "out2"), "--strict")  # every model shrunk, or a failure
    assert strict.returncode == 1 and ": failed: int8 broke its limits on 8 generated samples" in strict.stderr


def test_auto_without_a_recording_of_its_model_falls_back_to_int8_and_says_so(tmp_path: Path) -> None:
    """A model the recorded program never ran (the first build after `record` often has one): auto has
    nothing to fit, so it ships round-to-nearest int8, verified on generated inputs, and the line says
    both, with the command that records it; the build goes on."""
    model_path = save(mlp(), tmp_path / "a.onnx")
    other = save(mlp(256, 128), tmp_path / "other.onnx")
    recorded(tmp_path, "rec", other)
    plain = cli("shrink", str(model_path), "-o", str(tmp_path / "plain"), "--method", "int8", "--no-verify")
    assert plain.returncode == 0, plain.stderr
    proc = cli("shrink", str(model_path), "-o", str(tmp_path / "out"), "--method", "auto", "--inputs",
               str(tmp_path / "rec"))
    assert proc.returncode == 0, proc.stderr
    assert ", int8: passes a smoke check on 8 generated samples; not fitted: no recording of it" in \
        proc.stdout.splitlines()[0], proc.stdout
    assert "holds no recording of it" in proc.stdout
    assert "hatch-shrinkray record -o" in proc.stdout and "generated" in proc.stdout
    assert (tmp_path / "out/a.onnx").read_bytes() == (tmp_path / "plain/a.onnx").read_bytes()
    assert "Traceback" not in proc.stderr


def test_record_lists_configured_models_that_never_ran(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n')
    used = save(mlp(), root / MODEL)
    save(mlp(256, 64), root / "src/toymodel/models/unused.onnx")
    script = root / "use.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np, onnxruntime as ort
        ort.InferenceSession({str(used)!r}).run(None, {{"x": np.ones((1, 256), np.float32)}})
    """))
    proc = cli("record", "-o", str(root / "tests/shrinkray-inputs"), "--", sys.executable, str(script), cwd=root)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["model", "recording", "calls", "ran", "kept", "bytes", "skipped"]
    assert lines[1].split()[0] == MODEL  # relative to the project root
    assert lines[2].split()[:4] == ["src/toymodel/models/unused.onnx", "(never", "ran)", "0"]
    assert any(line.startswith("note: src/toymodel/models/unused.onnx was never loaded")
               for line in lines), proc.stdout


# ---------------------------------------------------------------------------------------------
# Every file a rewrite leaves out gets a line: the original's external data, in the hook and in
# `hatch-shrinkray wheel`.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.parametrize(("inputs", "target", "said"), [
    ("tests/shrinkray-inputs", "sdist", True),  # an sdist takes the whole project
    ("tests/shrinkray-inputs", "wheel", False),  # never in the wheel: nothing to say
    ("src/toymodel/recordings", "wheel", True),  # inside the package
])
def test_hook_names_a_recording_it_leaves_out_of_the_archive(tmp_path: Path, inputs: str, target: str,
                                                             said: bool) -> None:
    import tarfile
    import zipfile

    import numpy as np

    from hatch_shrinkray.recording.format import Recording
    from hatch_shrinkray.recording.storage import write_recording

    root = write_project(tmp_path / "toymodel", f'inputs = "{inputs}"\n')
    save(mlp(), root / MODELS_DIR / "a.onnx")
    (root / inputs).mkdir(parents=True)
    write_recording(root / inputs, Recording("0" * 64, "other.onnx", ("x",), ({"x": np.zeros((1, 4), np.float32)},),
                                             1, (0,), ("call:0",)))
    proc = hook_build(root, tmp_path, target)
    assert proc.returncode == 0, proc.stderr
    line = (f"shrinkray: {inputs} (")
    printed = [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith(line)]
    assert len(printed) == int(said), proc.stdout + proc.stderr
    if said:
        assert printed[0].endswith(f"is left out of the {target}: recorded inputs are for building, not shipping "
                                   "(`include` ships it)")
    (archive,) = (tmp_path / "dist").iterdir()
    if target == "wheel":
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
    else:
        with tarfile.open(archive) as tf:
            names = tf.getnames()
    assert not [n for n in names if "recordings" in n or "shrinkray-inputs" in n], names
