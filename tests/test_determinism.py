"""Reproducible builds: the same input and options give byte-identical output, run after run and
process after process (another hash seed, another working directory, another output path), for
every method.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.options import METHODS

from onnx_builders import const, init, model, vi, weight

EVERY_METHOD = ("int8", "fp16", "float-levels", "dedup", "dynamic", "int4", "auto")
EXTRA_OPTIONS: dict[str, dict[str, object]] = {"int8-asymmetric": {"method": "int8", "scheme": "asymmetric"},
                                               "int8-fast": {"method": "int8", "decode": "fast"},
                                               "int8-generated-inputs": {"method": "int8"}}
"""Every variant runs on real sample inputs (so int8 uses output-aware rounding) except the last."""

LOOSE = {"max_rel_l2": 0.5, "min_cosine": 0.9, "min_agreement": 0.5}
"""int4 on four stacked random layers is far from the original; determinism is what is tested here."""

CHILD = r"""
import hashlib, json, sys
from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
src, out_dir, variants, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
loose = json.loads(sys.argv[5])
digests = {}
for name, kw in variants.items():
    dest = f"{out_dir}/{name}.onnx"
    samples = None if name.endswith("generated-inputs") else inputs
    shrink(src, dest, ShrinkOptions(**kw, verify=VerifyOptions(inputs=samples, **loose)))
    digests[name] = hashlib.sha256(open(dest, "rb").read()).hexdigest()
print(json.dumps(digests))
"""


def verify_options(name: str, inputs: Path) -> VerifyOptions:
    return VerifyOptions(inputs=None if name.endswith("generated-inputs") else inputs, **LOOSE)  # type: ignore[arg-type]


BUDGET = {"budget_agreement": 0.0}
"""The methods narrower than int8 would fall back to round-to-nearest int8, which keeps more of these answers;
a budget lets each ship its own bytes (decision 3), whose determinism is tested here."""


def variants() -> dict[str, dict[str, object]]:
    narrower = ("int4", "dynamic", "float-levels")
    return {**{m: {"method": m, **(BUDGET if m in narrower else {})} for m in EVERY_METHOD}, **EXTRA_OPTIONS}


def test_every_method_is_covered() -> None:
    assert set(EVERY_METHOD) == set(METHODS), "a new method needs a determinism check"


def mixed_model() -> onnx.ModelProto:
    """MatMul weights (int4/dynamic), a tied copy (dedup), a Constant node, a 4-D Conv weight."""
    w1 = weight((256, 256), 1)
    w3 = weight((256, 128), 3)
    conv = weight((64, 8, 3, 3), 4)
    return model(
        [const("W2", weight((256, 256), 2)),
         helper.make_node("MatMul", ["x", "W1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
         helper.make_node("MatMul", ["r1", "W1b"], ["h2"]), helper.make_node("Relu", ["h2"], ["r2"]),
         helper.make_node("MatMul", ["r2", "W2"], ["h3"]), helper.make_node("MatMul", ["h3", "W3"], ["y"]),
         helper.make_node("Conv", ["img", "K"], ["z"], pads=[1, 1, 1, 1])],
        [vi("x", ["b", 256]), vi("img", ["b", 8, 16, 16])], [vi("y", ["b", 128]), vi("z", ["b", 64, 16, 16])],
        [init("W1", w1), init("W1b", w1.copy()), init("W3", w3), init("K", conv)])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("src") / "m.onnx"
    onnx.save(mixed_model(), str(path))
    rng = np.random.default_rng(7)
    # evidence.MIN_UNITS samples: enough independent evidence for int8 to fit its rounding.
    np.savez(path.with_name("samples.npz"), x=rng.standard_normal((16, 64, 256)).astype(np.float32),
             img=rng.standard_normal((16, 2, 8, 16, 16)).astype(np.float32))
    return path


@pytest.fixture(scope="module")
def in_process(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each variant shrunk twice in this process, into differently named directories."""
    out: dict[str, list[str]] = {}
    for run in ("first", "second"):
        directory = tmp_path_factory.mktemp(run)
        for name, kw in variants().items():
            dest = directory / f"{name}.onnx"
            opts = ShrinkOptions(**kw, verify=verify_options(name, source.with_name("samples.npz")))  # type: ignore[arg-type]
            result = shrink(source, dest, opts)
            assert result.verification is not None and result.verification.passed, name
            out.setdefault(name, []).append(sha(dest))
    return out


@pytest.fixture(scope="module")
def other_process(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out_dir = tmp_path_factory.mktemp("child")
    env = {**os.environ, "PYTHONHASHSEED": "4242", "OMP_NUM_THREADS": "1"}
    args = [str(source), str(out_dir), json.dumps(variants()), str(source.with_name("samples.npz")), json.dumps(LOOSE)]
    proc = subprocess.run([sys.executable, "-c", CHILD, *args],
                          capture_output=True, text=True, check=False, timeout=300, env=env,
                          cwd=tmp_path_factory.mktemp("cwd"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    digests: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return digests


@pytest.mark.parametrize("name", list(variants()))
def test_same_bytes_run_after_run(name: str, in_process: dict[str, list[str]]) -> None:
    first, second = in_process[name]
    assert first == second


@pytest.mark.parametrize("name", list(variants()))
def test_same_bytes_in_another_process(name: str, in_process: dict[str, list[str]],
                                       other_process: dict[str, str]) -> None:
    assert other_process[name] == in_process[name][0]


def test_methods_really_differ(in_process: dict[str, list[str]]) -> None:
    """Guard against a vacuous pass (e.g. every method writing the input unchanged). ``auto``
    picks among the other encodings per tensor, so it may equal one of them. int8 with real inputs
    (output-aware rounding) and without (round-to-nearest) differ too."""
    fixed = {k: v for k, v in in_process.items() if k != "auto"}
    assert len({v[0] for v in fixed.values()}) == len(fixed)


def test_wheel_and_sdist_are_byte_identical_across_builds(tmp_path: Path) -> None:
    """Two `python -m hatchling build` processes, from two checkouts at different paths and with
    cold caches: the same wheel and sdist bytes (hatchling's reproducible mode plus ours)."""
    from hardening import MODEL, write_project

    digests = []
    for name in ("one", "two"):
        root = write_project(tmp_path / name / "toymodel")
        onnx.save(mixed_model(), str(root / MODEL))
        dist = tmp_path / name / "dist"
        env = {**os.environ, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / name / "cache"),
               "PYTHONHASHSEED": str(len(name))}
        env.pop("SOURCE_DATE_EPOCH", None)
        proc = subprocess.run([sys.executable, "-m", "hatchling", "build", "-d", str(dist)], cwd=root, env=env,
                              capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 0, proc.stderr
        digests.append({p.name: sha(p) for p in sorted(dist.iterdir())})
    assert len(digests[0]) == 2
    assert digests[0] == digests[1]
