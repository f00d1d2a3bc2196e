"""A cache entry is never taken on its word: a forged entry whose record, digests, size and load note
all agree (what a CI cache restored from a less trusted workflow can hold) never reaches a wheel,
through the hook or ``hatch-shrinkray wheel``; the build says in one line why the entry is not used,
drops it and shrinks again. A cache directory others can write, or one inside such a directory, is
refused in one line with the fix."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import MODEL, backend_project, cli, hook_build, write_project
from hatchling.builders.wheel import WheelBuilder
from onnx import numpy_helper

from onnx_builders import mlp, save

pytestmark = pytest.mark.process

LINE_MAX = 160


def zero_weights(data: bytes) -> bytes:
    """The same graph with every initializer zero: it loads, runs, and answers nothing."""
    model = onnx.load_from_string(data)
    for init in model.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), init.name))
    return model.SerializeToString()


def other_model(_: bytes) -> bytes:
    """Another model with the same inputs and outputs (other weights)."""
    other = mlp()
    for init in other.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init)[::-1].copy(), init.name))
    return other.SerializeToString()


FORGERIES = {"zero weights": zero_weights, "another model": other_model}


def forge(cache: Path, make: object, **record_changes: object) -> bytes:
    """Replace the one entry's model with ``make(old bytes)`` and make everything the reader checks
    agree with it: the record's digest and size, and a note that this onnxruntime loads it."""
    (record,) = cache.glob("*.json")
    model = record.with_suffix(".onnx")
    forged = make(model.read_bytes())  # type: ignore[operator]
    model.write_bytes(forged)
    data = json.loads(record.read_text())
    sha = hashlib.sha256(forged).hexdigest()
    data["entry"]["shrunk_sha256"] = sha
    data["shrunk_size"] = len(forged)
    data.update(record_changes)
    record.write_text(json.dumps(data))
    import onnxruntime

    (cache / f"{sha}.loads").write_text(f"{sha} loads in onnxruntime {onnxruntime.__version__}\n")
    return forged


def in_wheel(dist: Path, name: str) -> bytes:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def refused_entry(stderr: str) -> str:
    line = next(ln for ln in stderr.splitlines() if "is not used (" in ln)
    assert len(line) - len(MODEL) + 40 <= LINE_MAX, line
    return line


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_forged_entry_never_reaches_the_hooks_wheel(forgery: str, tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    good = in_wheel(tmp_path / "dist", "toymodel/models/a.onnx")
    forged = forge(tmp_path / "cache", FORGERIES[forgery])
    for path in (tmp_path / "dist").iterdir():
        path.unlink()

    again = hook_build(root, tmp_path)
    assert again.returncode == 0, again.stderr
    line = refused_entry(again.stderr)
    assert "(outputs differ from the original's (y)); shrinking again" in line, line
    assert line.endswith("; shrinking again"), line
    shipped = in_wheel(tmp_path / "dist", "toymodel/models/a.onnx")
    assert shipped == good != forged
    assert ", cached" not in again.stderr
    # the forged entry is gone, the good one took its place: the next build is served from it
    (model,) = (tmp_path / "cache").glob("*.onnx")
    assert model.read_bytes() == good
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    served = hook_build(root, tmp_path, env={"HATCH_VERBOSE": "1"})
    assert served.returncode == 0 and ", cached" in served.stderr, served.stderr
    assert in_wheel(tmp_path / "dist", "toymodel/models/a.onnx") == good


def test_a_record_that_says_the_original_ships_over_other_bytes_is_refused(tmp_path: Path) -> None:
    """A forged record that claims the original was kept (so nothing would be compared) over bytes
    that are not the original's."""
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    good = in_wheel(tmp_path / "dist", "toymodel/models/a.onnx")
    forge(tmp_path / "cache", zero_weights, kept_original="int8 would not make it smaller")
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    again = hook_build(root, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "(it claims the original over other bytes); shrinking again" in refused_entry(again.stderr)
    assert in_wheel(tmp_path / "dist", "toymodel/models/a.onnx") == good


WHEEL_TABLE = '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_forged_entry_never_reaches_a_rewritten_wheel(forgery: str, tmp_path: Path, env: dict[str, str]) -> None:
    project = backend_project(tmp_path / "toymodel", WHEEL_TABLE)
    built = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    first = cli("wheel", str(built), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert first.returncode == 0, first.stderr
    good = in_wheel(tmp_path / "out", "toymodel/models/a.onnx")
    forged = forge(tmp_path / "cache", FORGERIES[forgery])

    again = cli("wheel", str(built), "-o", str(tmp_path / "out"), "--force", cwd=project, env=env)
    assert again.returncode == 0, again.stderr
    assert "outputs differ from the original's (y)" in refused_entry(again.stderr)
    assert in_wheel(tmp_path / "out", "toymodel/models/a.onnx") == good != forged


def test_a_genuine_hit_is_compared_and_says_so(tmp_path: Path) -> None:
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    assert hook_build(root, tmp_path).returncode == 0
    for path in (tmp_path / "dist").iterdir():
        path.unlink()
    served = hook_build(root, tmp_path, env={"HATCH_VERBOSE": "1"})
    assert served.returncode == 0, served.stderr
    assert ", cached" in served.stderr, served.stderr
    hit = next(ln for ln in served.stderr.splitlines() if "cache hit " in ln)
    assert f"for {MODEL}; checked against the original: cos " in hit and "on 8 generated samples" in hit, hit


def test_a_cache_inside_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    """ssh's rule: someone who can write a parent can rename the cache away and put another in its
    place. A sticky parent (``/tmp``) lets nobody rename what is not theirs."""
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = {"HATCH_SHRINKRAY_CACHE_DIR": str(shared / "cache")}
    err = hook_build_error_with(root, tmp_path, env)
    line = next(ln for ln in err.splitlines() if "cache's parent" in ln)
    assert line == (f"shrinkray: cache's parent {shared} is writable by group and others (mode 0777): others could "
                    "pick what ships (chmod go-w it)"), err
    assert len(line) - len(str(shared)) + 40 <= LINE_MAX
    assert not (shared / "cache").exists()

    shared.chmod(0o1777)
    built = hook_build(root, tmp_path, env=env)
    assert built.returncode == 0, built.stderr
    assert (shared / "cache").stat().st_mode & 0o777 == 0o700


def hook_build_error_with(root: Path, tmp_path: Path, env: dict[str, str]) -> str:
    proc = hook_build(root, tmp_path, env=env)
    assert proc.returncode != 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr
