"""The first build without a recording is never a dead end: a model that generated inputs cannot
verify (the shrunk model fails on them, the original's outputs carry no signal there, or it does not
run on them) ships its original bytes with one line naming the `record` command for the project, and
the build succeeds; `strict` makes it a failure. Real recorded inputs that fail still fail the build.
Real hatchling builds in this process and the installed console script, on tiny models."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import REPO, build, cli, write_project
from onnx import helper

from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.recording.format import Recording
from hatch_shrinkray.recording.storage import write_recording
from hatch_shrinkray.verification.inputs import InputSpec, Sizing, generated_shapes, retries
from hatch_shrinkray.verification.silence import silent, silent_outputs

from onnx_builders import cancelling, init, mlp, model, save, vi, weight

MODELS = "src/toymodel/models"
RECORD = "hatch-shrinkray record -o tests/shrinkray-inputs -- python -m pytest tests"


def whisper() -> onnx.ModelProto:
    """y = (x @ W) * 1e-9: outputs about 1e-8 on random inputs, a map of noise."""
    return model([helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Mul", ["h", "s"], ["y"])],
                 [vi("x", ["batch", 256])], [vi("y", ["batch", 256])],
                 [init("W", weight((256, 256), 3)), init("s", np.array(1e-9, dtype=np.float32))])


def front_end(taps: int = 512) -> onnx.ModelProto:
    """A streaming audio front end: samples[batch, n] -> a ``taps``-long convolution bank."""
    return model([helper.make_node("Unsqueeze", ["samples", "axes"], ["s3"]),
                  helper.make_node("Conv", ["s3", "K"], ["y"], strides=[256])],
                 [vi("samples", ["batch", "n"])], [vi("y", ["batch", 64, "frames"])],
                 [init("K", weight((64, 1, taps), 4)), init("axes", np.array([1], dtype=np.int64))])


def fixed_reshape() -> onnx.ModelProto:
    """Runs only on exactly 1000 values, a length no generated size has."""
    return model([helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["y"])],
                 [vi("x", ["batch", "n"])], [vi("y", [1, 32])],
                 [init("W", weight((1000, 32), 5)), init("shape", np.array([1, 1000], dtype=np.int64))])


pytestmark = pytest.mark.usefixtures("isolated")


def project(root: Path, table: str = "", *, tests: bool = True, **models: onnx.ModelProto) -> Path:
    write_project(root, table)
    for name, m in models.items():
        save(m, root / MODELS / f"{name}.onnx")
    if tests:
        (root / "tests").mkdir()
    return root


def shipped(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(f"toymodel/models/{name}.onnx")


def test_unverifiable_models_ship_their_originals_with_the_record_command_and_the_build_succeeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "toymodel", cancel=cancelling(), quiet=whisper(), fixed=fixed_reshape(), a=mlp())
    wheel = build(root)
    for name in ("cancel", "quiet", "fixed"):
        assert shipped(wheel, name) == (root / MODELS / f"{name}.onnx").read_bytes(), name
    assert len(shipped(wheel, "a")) < (root / MODELS / "a.onnx").stat().st_size / 2
    err = capsys.readouterr().err.splitlines()
    kept = {line.split(": ")[1]: line for line in err if ": shipped its original (" in line}
    assert sorted(kept) == [f"{MODELS}/{n}.onnx" for n in ("cancel", "fixed", "quiet")], err
    assert all(len(line) <= 160 for line in kept.values()), kept
    assert kept[f"{MODELS}/cancel.onnx"].endswith("): int8 fails on 8 generated samples (see below)")
    assert kept[f"{MODELS}/quiet.onnx"].endswith("): its outputs carry no signal on generated inputs (see below)")
    assert kept[f"{MODELS}/fixed.onnx"].endswith("): it does not run on generated inputs (see below)")
    models = "3 models (cancel.onnx, ...)"  # each named above, one line each; here the first file by name
    assert f"shrinkray: {models}: to shrink them: `{RECORD}`, then set `inputs`" in err, err
    total = next(line for line in err if line.startswith("shrinkray: total"))
    assert total.startswith("shrinkray: total 4 models: 1 shipped shrunk, 3 shipped their original; "), total


def test_a_second_build_takes_the_kept_original_from_the_cache_and_says_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "toymodel", tests=False, quiet=whisper())
    build(root)
    first = capsys.readouterr().err.splitlines()
    build(root)
    second = capsys.readouterr().err.splitlines()
    line = (f"shrinkray: {MODELS}/quiet.onnx: shipped its original (262.28 KB): its outputs carry no signal on "
            "generated inputs (see below)")
    for err in (first, second):
        assert line in err, err
        assert f"shrinkray: {MODELS}/quiet.onnx: to shrink it: `hatch-shrinkray record -o shrinkray-inputs -- " \
               "COMMAND`, then set `inputs`" in err, err
        total = next(x for x in err if x.startswith("shrinkray: total"))
        assert total.startswith("shrinkray: total 1 model: no model shrunk, 1 shipped its original (262.28 KB) "
                                "in "), total


def test_strict_fails_the_build_instead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "toymodel", "strict = true\n", cancel=cancelling())
    with pytest.raises(SystemExit) as info:
        build(root)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert f"shrinkray: {MODELS}/cancel.onnx: failed: int8 broke its limits on 8 generated samples" in err, err
    assert "Traceback" not in err
    quiet = project(tmp_path / "quiet", "strict = true\n", quiet=whisper())
    with pytest.raises(SystemExit):
        build(quiet)
    assert "the original's outputs carry no signal (y within 1e-06 of 0)" in capsys.readouterr().err


def test_a_failure_on_recorded_inputs_falls_back_and_strict_fails_the_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Decision 8: every choice of the ladder fails on this model's recording, so its original ships, with
    one line that says so; ``strict`` fails the build instead."""
    root = project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n', cancel=cancelling())
    source = root / MODELS / "cancel.onnx"
    rng = np.random.default_rng(0)
    samples = tuple({"x": rng.standard_normal((2, 256)).astype(np.float32)} for _ in range(12))
    (root / "tests/shrinkray-inputs").mkdir()
    write_recording(root / "tests/shrinkray-inputs", Recording(
        hashlib.sha256(source.read_bytes()).hexdigest(), f"{MODELS}/cancel.onnx", ("x",), samples, 12,
        tuple(range(12)), tuple(f"call:{i}" for i in range(12))))
    wheel = build(root)
    assert shipped(wheel, "cancel") == source.read_bytes()
    err = capsys.readouterr().err
    assert (f"shrinkray: {MODELS}/cancel.onnx: shipped its original (131.23 KB): int8, int8 round-to-nearest, fp16 "
            "failed the limits on the recording") in err, err
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "strict = true\n")
    with pytest.raises(SystemExit):
        build(root)
    err = capsys.readouterr().err
    assert f"{MODELS}/cancel.onnx: failed: int8 broke its limits on 12 recorded calls; `strict = true`" in err, err


def test_an_audio_front_end_is_verified_on_a_length_its_convolution_takes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default generated length (32) is shorter than the 512-tap kernel: the build retries with
    audio lengths, shrinks the model and says which length it verified on."""
    root = project(tmp_path / "toymodel", vad=front_end())
    wheel = build(root)
    assert len(shipped(wheel, "vad")) < (root / MODELS / "vad.onnx").stat().st_size / 2
    err = capsys.readouterr().err
    assert f"shrinkray: {MODELS}/vad.onnx: the original does not run on generated inputs of the default sizes (" in err
    assert "verified on (seed 0; samples 1x16000)" in err
    assert "total 1 model: 1 shipped shrunk; " in err


def test_the_cli_keeps_the_original_and_strict_fails(tmp_path: Path) -> None:
    src = save(cancelling(), tmp_path / "cancel.onnx")
    (tmp_path / "tests").mkdir()
    kept = cli("shrink", str(src), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert (tmp_path / "out/cancel.onnx").read_bytes() == src.read_bytes()
    assert ": original written (131.23 KB): int8 fails on 8 generated samples" in kept.stdout, kept.stdout
    assert f"{src}: to shrink it: `{RECORD}`, then pass `--inputs`" in kept.stderr
    strict = cli("shrink", str(src), "-o", str(tmp_path / "strict"), "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and ": failed: int8 broke its limits on 8 generated samples" in strict.stderr, \
        strict.stderr
    assert not (tmp_path / "strict/cancel.onnx").exists()


def test_a_missing_inputs_directory_is_reported_before_the_engine_is_installed(tmp_path: Path) -> None:
    """hatchling asks the hook for its dependencies before it installs them: a table that cannot work
    stops there, in one message that says how to make the directory, with no engine imported."""
    root = project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n', a=mlp())
    script = f"""
import sys
from hatchling.builders.wheel import WheelBuilder
builder = WheelBuilder({str(root)!r})
try:
    print(builder.config.dynamic_dependencies)
except SystemExit as exc:
    print("exit", exc.code)
print("engine imported:", sorted(m for m in ("onnx", "onnxruntime", "numpy") if m in sys.modules))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=REPO)
    assert proc.stdout.splitlines() == ["exit 1", "engine imported: []"], proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "shrinkray: Invalid configuration for build hook `shrinkray`:",
        "- Field `tool.hatch.build.hooks.shrinkray.inputs` names a recording that does not exist yet: "
        f"tests/shrinkray-inputs; make it with `{RECORD}` and commit it, or remove the key to verify on generated "
        "inputs"], proc.stderr


def test_audio_lengths_are_tried_on_waveforms_only_and_in_a_bounded_list() -> None:
    wave = InputSpec("samples", "tensor(float)", ("batch", "n"))
    state = InputSpec("state", "tensor(float)", (2, "batch", 128))
    tokens = InputSpec("ids", "tensor(int64)", ("batch", "seq"))
    options = VerifyOptions()
    assert [r.text() for r in retries([wave, state], options)] == \
        ["16000 (audio length)", "512 (audio length)", "224", "16", "1", "224 on every axis", "16 on every axis",
         "1 on every axis"]
    assert generated_shapes([wave], options, Sizing(16000, audio=True))[0] == {"samples": (1, 16000)}
    assert generated_shapes([state], options, Sizing(16000, audio=True))[0] == generated_shapes([state], options)[0]
    assert [r.retry for r in retries([tokens], options)] == [224, 16, 1, 224, 16, 1]
    assert [r.retry for r in retries([wave], VerifyOptions(default_dim=512))] == [16000, 224, 16, 1, 224, 16, 1]
    assert retries([InputSpec("x", "tensor(float)", (1, 64))], options) == []


def test_the_silence_rule() -> None:
    assert silent([np.full((2, 3), 2.7e-7, np.float32), np.zeros((2, 3), np.float32)]) == "within 1e-06 of 0"
    assert silent([np.full(4, 0.5, np.float32) + np.float32(1e-7) * np.arange(4, dtype=np.float32)]) == \
        "constant (0.5)"
    assert silent([np.array([np.nan, np.inf])]) == "non-finite everywhere"
    assert silent([np.array([3, 3, 3])]) == "constant"
    assert silent([np.array([1e-3, 0.0], np.float32)]) == ""
    assert silent([np.array([1e4, 1e4 + 1], np.float32)]) == ""
    assert silent_outputs(["y", "z"], [[np.zeros(2), np.array([1, 2])]]) == ""
    assert silent_outputs(["y", "z"], [[np.zeros(2), np.array([1, 1])]]) == "y within 1e-06 of 0; z constant"


def test_strict_is_an_option_of_every_command_that_shrinks() -> None:
    for command in ("shrink", "wheel", "check"):
        assert "--strict" in cli(command, "--help").stdout, command

