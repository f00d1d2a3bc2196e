"""One vocabulary across commands (issue 22 item 4): the same model selection and inputs resolution in
``shrink``, ``wheel``, ``check`` and the hook; flags override the table key by key; verdict lines;
hints quoting the user's command; no internal names; files with the user's umask.

Every CLI case runs the installed console script in a fresh process, as a user runs it.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import build, cli
from hatchling.builders.wheel import WheelBuilder

from onnx_builders import mlp, run, save

MODEL = "toymodel/models/a.onnx"
SOURCE = f"src/{MODEL}"


def write_project(root: Path, table: str) -> Path:
    (root / "src/toymodel/models").mkdir(parents=True)
    (root / "src/toymodel/__init__.py").write_text("")
    save(mlp(), root / SOURCE)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/toymodel"]\n\n' + table)
    return root


def recorded_inputs(root: Path) -> None:
    """``inputs.npz``: 3 samples of the model's one input (generated inputs would be 8)."""
    import onnx

    graph = onnx.load(root / SOURCE).graph
    (x,) = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    dims = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    feeds = np.random.default_rng(0).standard_normal((3, *dims)).astype(np.float32)
    run(root / SOURCE, {x.name: feeds[0]})  # the samples are valid inputs
    np.savez(root / "inputs.npz", **{x.name: feeds})


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    return {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}


def wheel_of(project: Path) -> Path:
    return Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))


def test_wheel_flags_override_the_table_key_by_key(tmp_path: Path, env: dict[str, str]) -> None:
    """--models and --method change those keys; the table's `inputs` and tolerances stay."""
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'
                                            'inputs = "inputs.npz"\nmin-elements = 1\n')
    recorded_inputs(project)
    wheel = wheel_of(project)
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--models", "toymodel/**/*.onnx",
               "--method", "fp16", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert ", fp16: " in done.stderr
    assert "3 recorded samples" in done.stderr or "3 real samples" in done.stderr, done.stderr
    assert "generated inputs" not in done.stderr


def test_wheel_method_auto_with_a_table(tmp_path: Path, env: dict[str, str]) -> None:
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'
                                            'inputs = "inputs.npz"\n')
    recorded_inputs(project)
    wheel = wheel_of(project)
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--method", "auto", cwd=project, env=env,
               timeout=900)
    assert done.returncode == 0, done.stderr
    assert "auto" in done.stderr
    assert (tmp_path / "out" / wheel.name).is_file()


def test_wheel_takes_source_paths_and_the_hook_takes_wheel_paths(tmp_path: Path, env: dict[str, str]) -> None:
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["src/toymodel/models/*.onnx"]\n')
    wheel = wheel_of(project)
    from_table = cli("wheel", str(wheel), "-o", str(tmp_path / "one"), cwd=project, env=env)
    assert from_table.returncode == 0, from_table.stderr
    assert f"shrinkray: {MODEL}: " in from_table.stderr
    flag = cli("wheel", str(wheel), "-o", str(tmp_path / "two"), "--models", "src/toymodel/**/*.onnx",
               cwd=project, env=env)
    assert flag.returncode == 0, flag.stderr
    assert f"shrinkray: {MODEL}: " in flag.stderr

    hooked = write_project(tmp_path / "h", '[tool.hatch.build.hooks.shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n')
    with zipfile.ZipFile(build(hooked, out=tmp_path / "dist")) as zf:
        assert len(zf.read(MODEL)) < 0.3 * (hooked / SOURCE).stat().st_size


def test_check_takes_wheel_paths_and_the_table_options(tmp_path: Path, env: dict[str, str]) -> None:
    """`check MODEL` in a project selects by either spelling and keeps the table's other keys."""
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["src/toymodel/models/*.onnx"]\n'
                                            'method = "fp16"\n')
    command = ["--", sys.executable, "-c", "pass"]
    done = cli("check", MODEL, *command, cwd=project, env=env)
    assert "no such model file" not in done.stderr, done.stderr
    assert "matches no file" not in done.stderr, done.stderr
    assert ", fp16: " in done.stderr, done.stderr
    flagged = cli("check", SOURCE, "--method", "int8", *command, cwd=project, env=env)
    assert ", int8: " in flagged.stderr, flagged.stderr


def test_shrink_in_a_project_uses_its_table_and_the_flags(tmp_path: Path, env: dict[str, str]) -> None:
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["src/toymodel/models/*.onnx"]\n'
                                            'inputs = "inputs.npz"\nmethod = "fp16"\n')
    recorded_inputs(project)
    done = cli("shrink", SOURCE, "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert "fp16" in done.stdout and "3 recorded" in done.stdout + done.stderr, done.stdout + done.stderr
    flagged = cli("shrink", SOURCE, "-o", str(tmp_path / "out2"), "--method", "int8", cwd=project, env=env)
    assert flagged.returncode == 0, flagged.stderr
    assert "int8" in flagged.stdout and "3 recorded" in flagged.stdout + flagged.stderr, flagged.stdout


def test_dynamic_keeps_a_nan_weight_instead_of_failing_on_it(tmp_path: Path, env: dict[str, str]) -> None:
    """quantize_dynamic fails on a NaN weight with "scale issue" (and its messages name the renamed
    copy it was given, ``~sr0~1``): the weight stays float, the rest is quantized."""
    from onnx import helper

    from onnx_builders import init, model, vi

    rng = np.random.default_rng(0)
    mask = rng.standard_normal((64, 64)).astype(np.float32)
    mask[3, 3] = np.nan
    net = model([helper.make_node("MatMul", ["x", "mask.weight"], ["m"], name="masking"),
                 helper.make_node("MatMul", ["x", "dense.weight"], ["y"], name="dense")],
                [vi("x", [1, 64])], [vi("y", [1, 64]), vi("m", [1, 64])],
                [init("mask.weight", mask), init("dense.weight", rng.standard_normal((64, 64)).astype(np.float32))])
    save(net, tmp_path / "m.onnx")
    done = cli("-v", "shrink", "m.onnx", "-o", "out", "--method", "dynamic", "--min-elements", "1",
               "--max-rel-l2", "0.5", "--min-cosine", "0.9", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "~sr" not in done.stdout + done.stderr
    assert "mask.weight" in done.stdout and "NaN or inf" in done.stdout, done.stdout


def test_files_we_write_get_the_users_umask(tmp_path: Path, env: dict[str, str]) -> None:
    """A rewritten wheel and a JSON report get the mode any file the user writes gets (mkstemp
    would make them 0600); the plan file's mode is checked in tests/test_check.py."""
    project = write_project(tmp_path / "p", '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n')
    wheel = wheel_of(project)
    mask = os.umask(0o22)
    os.umask(mask)
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / wheel.name).stat().st_mode & 0o777 == 0o666 & ~mask
    report = cli("shrink", str(project / SOURCE), "-o", str(tmp_path / "shrunk"), "--json", str(tmp_path / "r.json"),
                 cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_failure_hint_quotes_the_users_command_and_names_the_method(tmp_path: Path, env: dict[str, str]) -> None:
    save(mlp(), tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).standard_normal((6, 1, 256)).astype(np.float32))
    done = cli("shrink", "m.onnx", "-o", "out", "--levels", "7", "--max-rel-l2", "0.01", "--inputs", "in.npz",
               "--strict", cwd=tmp_path, env=env)
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert "failed: int8 with 7 levels broke its limits on 6 recorded samples; `--strict`: no fallback" in first, first
    assert ("hatch-shrinkray check --fix m.onnx --levels 7 --max-rel-l2 0.01 --inputs in.npz --strict -- python -m "
            "pytest" in done.stderr), done.stderr
    fell = cli("shrink", "m.onnx", "-o", "out", "--levels", "7", "--max-rel-l2", "0.01", "--inputs", "in.npz",
               cwd=tmp_path, env=env)  # without strict, the limit the user set makes it fall back (decision 8)
    assert fell.returncode == 0, fell.stderr
    assert ": shrunk, 272.54 -> " in fell.stdout, fell.stdout
    assert ": int8 with 7 levels failed: y: rel L2 " in fell.stdout, fell.stdout


def test_record_says_why_it_exits_non_zero(tmp_path: Path, env: dict[str, str]) -> None:
    done = cli("record", "-o", "rec", "--", sys.executable, "-c", "import sys; sys.exit(3)", cwd=tmp_path, env=env)
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1].startswith("verdict: exit 3: the command's own exit code, passed through"), \
        done.stderr
