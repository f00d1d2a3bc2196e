"""Models stored as ``.onnx`` + external data file(s), through the console script and in builds in a fresh
process: an output's data file replaced, sizes reported with the data files, a data file two models
read, a cached original that reads its data file, the line for what is left out (the in-process
cases are in tests/unit/test_external_data.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hardening import (
    LEFT_OUT,
    MODEL,
    MODELS_DIR,
    X,
    cli,
    external_data_model,
    files_under,
    hook_build,
    run_model,
    shared_weights,
    tree_digest,
    write_project,
)

from hatch_shrinkray.result import human

from onnx_builders import close, mlp, run, save_external


@pytest.mark.process
def test_shrinking_in_place_of_an_older_output_replaces_its_data_file(tmp_path: Path, small_limit: None) -> None:
    """A second run over an existing output (CLI --force) leaves exactly one consistent pair."""
    m = mlp(256, 512)
    src = save_external(m, tmp_path / "in" / "m.onnx")
    out = tmp_path / "out"
    assert cli("shrink", str(src), "-o", str(out), "--method", "fp16").returncode == 0
    proc = cli("shrink", str(src), "-o", str(out), "--method", "int8", "--force")
    assert proc.returncode == 0, proc.stderr
    assert files_under(out) == ["m.onnx", "m.onnx.data"] or files_under(out) == ["m.onnx"]
    close(run(m, X), run(out / "m.onnx", X))


@pytest.mark.process
def test_cli_reports_sizes_with_the_data_files(tmp_path: Path) -> None:
    m = mlp(256, 512)
    src = save_external(m, tmp_path / "in" / "m.onnx")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "out"), "--sizes")
    assert proc.returncode == 0, proc.stderr
    total = src.stat().st_size + src.with_name("m.onnx.data").stat().st_size
    assert f": shrunk, {total / 1000:.2f} -> " in proc.stdout, proc.stdout


# ---------------------------------------------------------------------------------------------
# A data file two models read, one of them configured: it stays while a shipped model reads it.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.process
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
    assert line.startswith("shrinkray: src/toymodel/models/a.onnx: shipped shrunk, 262.29 -> "), line
    assert "of the input is not weights" not in line
    assert ("shrinkray: src/toymodel/models/a.onnx: src/toymodel/models/weights.bin stays in the archive (524.29 KB): "
            "src/toymodel/models/b.onnx reads it too and is not configured") in proc.stderr


@pytest.mark.process
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
# Other tracebacks and hangs of the same kind.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.process
def test_a_cached_unchanged_model_with_external_data_is_served_without_a_word(tmp_path: Path) -> None:
    """Nothing to shrink: the cache holds the model file itself, which reads its data file from
    beside the original; the load check of cached bytes does not apply to the user's own file."""
    import zipfile

    root = write_project(tmp_path / "toymodel", "min-elements = 100000000\n")
    save_external(mlp(256, 512), root / MODEL)
    for _ in range(2):
        proc = hook_build(root, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "is not used" not in proc.stderr and "shipped its original" in proc.stderr, proc.stderr
        (wheel,) = (tmp_path / "dist").iterdir()
        with zipfile.ZipFile(wheel) as zf:  # the second build once dropped the data file the original reads
            assert {"toymodel/models/a.onnx", "toymodel/models/a.onnx.data"} <= set(zf.namelist())
        wheel.unlink()
    assert len(list((tmp_path / "cache").glob("*.onnx"))) == 1


# ---------------------------------------------------------------------------------------------
# Every file a rewrite leaves out gets a line: the original's external data, in the hook and in
# `hatch-shrinkray wheel`.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.process
def test_hook_names_the_external_data_it_leaves_out(tmp_path: Path) -> None:
    import zipfile

    root = write_project(tmp_path / "toymodel")
    model = external_data_model(root / MODELS_DIR)
    weighs = model.stat().st_size + model.with_name("a.onnx.data").stat().st_size
    proc = hook_build(root, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = f"shrinkray: src/toymodel/models/a.onnx: src/toymodel/models/{LEFT_OUT.format(size='544.77 KB')}"
    assert line in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    # The line before the shrink weighs the model as the line after it does: with its data file.
    assert f"shrinkray: src/toymodel/models/a.onnx ({human(weighs)}): int8..." in proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "dist").iterdir()
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(n for n in zf.namelist() if "/models/" in n) == ["toymodel/models/a.onnx"]
