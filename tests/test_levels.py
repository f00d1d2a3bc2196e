"""Every encoding the tool emits gives the same answers at every graph optimization level, in the
oldest and the newest onnxruntime a user may declare (``runtimes``), and no emitted graph holds a
pattern a runtime is known to miscompile.

Verification runs the shrunk model in the build's onnxruntime at ``ORT_ENABLE_ALL`` (it says so:
``ran in onnxruntime X (CPU, ORT_ENABLE_ALL)``). A user's runtime may fold, fuse or do neither:
onnxruntime has shipped optimizations that changed a dequantized weight's values (negative int8
weights behind ``DequantizeLinear -> Reshape`` became zero at ``ORT_ENABLE_ALL``; docs/runtimes.md).
So each encoding's shrunk model runs at ``ORT_DISABLE_ALL``, ``ORT_ENABLE_BASIC`` and
``ORT_ENABLE_ALL`` in onnxruntime 1.16.3 (the oldest a ``runtimes`` entry can name; an encoding the
tool refuses below some release is run in that release instead) and in the newest (this
environment's), and must give what verification saw within verification's own tolerances; an
encoding that computes in float must give it to within float rounding.

One model carries every weight site the encodings treat differently: a Gather table, MatMul,
Gemm(transB) and Conv weights (per-channel), a 1-D weight reshaped before its MatMul (per-tensor,
and the spot a ``DequantizeLinear -> Reshape`` would appear) and two identical weights (dedup).

A new encoding joins with one line in ``ENCODINGS``. Tier ``compat`` (the runtimes are installed once
into the test cache, like tests/test_runtime_matrix.py's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.codec import encode
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.methods.runtimes import CONV_INTEGER, DQ_MATMUL_FUSED, Targets, refusal
from hatch_shrinkray.onnxgraph.hazards import miscompiled
from hatch_shrinkray.options import OLDEST_ONNXRUNTIME

import runtimes

LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_ALL")
RUNNER = Path(__file__).resolve().parent / "runtimes" / "run_levels.py"
FLOAT_ROUNDING = 1e-4
"""The relative L2 a float-computing encoding may differ by between levels and runtimes: folding,
fusing or neither compute the same weights; only the order of float sums may change."""


@dataclass(frozen=True)
class Encoding:
    """One encoding the tool emits: the options that make it, the record label that proves the
    shrunk model holds it, and where it may run."""

    options: dict[str, Any]
    emits: tuple[str, ...]
    """Substrings of the tensors' encodings, each of which some tensor of the shrunk model must show."""
    floor: tuple[int, ...] | None = None
    """The oldest onnxruntime the tool emits it for (refused below: ``methods/runtimes.py``); None: 1.16.3."""
    float_compute: bool = True
    """It computes in float (weights decoded at load), so levels may differ by float rounding only."""
    recorded: bool = False
    """It fits a recording (the inputs of ``verify``)."""
    fitted: bool = field(default=False)
    """Its fitted choice must be the one that ships (the guard kept it)."""


ENCODINGS: dict[str, Encoding] = {
    "int8": Encoding({"method": "int8"}, ("int8 axis 0", "int8 axis 1", "int8 per-tensor")),
    "int8 fitted": Encoding({"method": "int8"}, ("int8 axis",), recorded=True, fitted=True),
    "int8 asymmetric": Encoding({"method": "int8", "scheme": "asymmetric"}, ("int8 asymmetric axis",)),
    "int8 15 levels": Encoding({"method": "int8", "levels": 15}, ("int8 15 levels axis",)),
    "int8 decode fast": Encoding({"method": "int8", "decode": "fast"}, ("DequantizeLinear",), DQ_MATMUL_FUSED,
                                 float_compute=False),
    "fp16": Encoding({"method": "fp16"}, ("fp16",)),
    "float-levels": Encoding({"method": "float-levels"}, ("float-levels 256",)),
    "int4": Encoding({"method": "int4"}, ("MatMulNBits",), float_compute=False),
    "dynamic": Encoding({"method": "dynamic"}, ("dynamic int8",), CONV_INTEGER, float_compute=False),
    "dedup": Encoding({"method": "dedup"}, ("dedup -> W2",)),
    "int4 packed": Encoding({"method": "int8", "encodings": (("*", "int4"),)}, ("int4 axis",)),
    "int6 packed": Encoding({"method": "int8", "encodings": (("*", "int6"),)}, ("int6 axis",)),
    "int10 packed": Encoding({"method": "int8", "encodings": (("*", "int10"),)}, ("int10 axis",)),
    "int12 packed": Encoding({"method": "int8", "encodings": (("*", "int12"),)}, ("int12 axis",)),
    "int16": Encoding({"method": "int8", "encodings": (("*", "int16"),)}, ("int16 axis",)),
    "auto": Encoding({"method": "auto"}, ("",), recorded=True),
}

pytestmark = pytest.mark.compat


def levels_model() -> onnx.ModelProto:
    """Every weight site the encodings treat differently, in one small classifier (opset 17, IR 8:
    onnxruntime 1.16.3 loads it)."""
    rng = np.random.default_rng(5)

    def weight(name: str, *shape: int, scale: float | None = None) -> onnx.TensorProto:
        values = rng.standard_normal(shape) * (scale or 1 / np.sqrt(shape[0]))
        return numpy_helper.from_array(values.astype(np.float32), name)

    twice = numpy_helper.to_array(weight("W2", 256, 256))
    inits = [weight("E", 1000, 64, scale=0.5), weight("W1", 64, 256), numpy_helper.from_array(twice, "W2"),
             numpy_helper.from_array(twice.copy(), "W2b"), weight("K", 64, 32, 3, 3, scale=0.06),
             weight("G", 256, 512), weight("P", 32768, scale=1 / 16), weight("H", 128, 10),
             numpy_helper.from_array(np.array([256, 128], np.int64), "pshape"),
             numpy_helper.from_array(np.array([-1, 32, 4, 2], np.int64), "cshape")]
    node = helper.make_node
    nodes = [
        node("Gather", ["E", "ids"], ["e3"]), node("ReduceMean", ["e3"], ["e"], axes=[1], keepdims=0),
        node("Add", ["x", "e"], ["h0"]), node("MatMul", ["h0", "W1"], ["h1"]), node("Relu", ["h1"], ["r1"]),
        node("MatMul", ["r1", "W2"], ["a"]), node("MatMul", ["r1", "W2b"], ["b"]), node("Sub", ["a", "b"], ["ab"]),
        node("Add", ["a", "r1"], ["h2"]), node("Reshape", ["h2", "cshape"], ["img"]),
        node("Conv", ["img", "K"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["rc"]),
        node("Flatten", ["rc"], ["f"]),
        node("Gemm", ["f", "G"], ["g"], transB=1), node("Add", ["g", "ab"], ["g2"]),
        node("Reshape", ["P", "pshape"], ["Pr"]), node("MatMul", ["g2", "Pr"], ["m"]), node("Relu", ["m"], ["rm"]),
        node("MatMul", ["rm", "H"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "levels", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64]),
                                                helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _inputs(rng: np.random.Generator, samples: int, batch: int) -> dict[str, np.ndarray]:
    """Correlated features of unequal scale, as real activations are (what output-aware rounding uses)."""
    mix = rng.standard_normal((64, 64)) * np.exp(rng.normal(0, 1, 64))
    return {"x": (rng.standard_normal((samples, batch, 64)) @ mix).astype(np.float32),
            "ids": rng.integers(0, 1000, (samples, batch, 8)).astype(np.int64)}


@pytest.fixture(scope="module")
def shrunk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each encoding's shrunk model (verification off for the data-free ones: a level is compared
    with what verification would see, not with a limit), and the original."""
    out = tmp_path_factory.mktemp("levels")
    original = out / "original.onnx"
    onnx.save(levels_model(), str(original))
    recording = out / "recording.npz"
    np.savez(recording, **_inputs(np.random.default_rng(2), 40, 4))
    files = {"original": original}
    for name, encoding in ENCODINGS.items():
        files[name] = out / f"{name.replace(' ', '-')}.onnx"
        verify = VerifyOptions(inputs=str(recording)) if encoding.recorded else None
        result = shrink(original, files[name], ShrinkOptions(**encoding.options, verify=verify))
        labels = [t.encoding for t in result.tensors]
        assert result.kept_original is None, (name, result.kept_original)
        for label in encoding.emits:
            assert any(label in shown for shown in labels), (name, label, labels)
        if encoding.fitted:
            assert result.verification is not None and result.verification.fit is not None
            assert result.verification.fit.fit.value == "kept", (name, result.verification.fitting)
        assert miscompiled(onnx.load(str(files[name]))) is None, name
    return files


@pytest.fixture(scope="module")
def feeds() -> list[dict[str, np.ndarray]]:
    held = _inputs(np.random.default_rng(23), 6, 3)
    return [{k: v[i] for k, v in held.items()} for i in range(6)]


def _oldest(encoding: Encoding) -> str:
    """The oldest onnxruntime a user gets ``encoding`` in: 1.16.3, or the release the tool refuses it below."""
    if encoding.floor is None:
        return OLDEST_ONNXRUNTIME
    return ".".join(map(str, encoding.floor))


def _run_levels(python: Path | str, models: list[Path], feeds: list[dict[str, np.ndarray]],
                tmp: Path) -> dict[str, Any]:
    """Every model at every level in ``python``'s onnxruntime: ``{"version", "errors", "outputs":
    {(model index, level): [[arrays] per feed]}}``."""
    feeds_path, out_path = tmp / "feeds.npz", tmp / "out.npz"
    np.savez(feeds_path, **{f"{i}/{k}": v for i, f in enumerate(feeds) for k, v in f.items()})
    proc = subprocess.run([str(python), str(RUNNER), str(feeds_path), str(out_path), *map(str, models)],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert out_path.exists(), proc.stderr[-2000:]
    with np.load(out_path) as z:
        meta = json.loads(str(z["meta"]))
        outputs: dict[tuple[int, str], list[list[np.ndarray]]] = {}
        for key in z.files:
            if key == "meta":
                continue
            m, level, i, k = key.split("/")
            per_feed = outputs.setdefault((int(m), level), [[] for _ in feeds])
            per_feed[int(i)].append((int(k), z[key]))  # type: ignore[arg-type]
    for per_feed in outputs.values():
        for i, pairs in enumerate(per_feed):
            per_feed[i] = [a for _, a in sorted(pairs, key=lambda p: p[0])]  # type: ignore[arg-type, index]
    return {"version": meta["version"], "errors": meta["errors"], "outputs": outputs}


def _python(version: str) -> Path | str:
    if version == "newest":
        return sys.executable
    try:
        return runtimes.python_runtime(version)
    except runtimes.Unavailable as exc:
        pytest.skip(f"onnxruntime {version} cannot be installed here: {exc}")


@pytest.fixture(scope="module")
def ran(shrunk: dict[str, Path], feeds: list[dict[str, np.ndarray]],
        tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Outputs of every model at every level, per runtime: one process per onnxruntime release."""
    names = list(shrunk)
    wanted = {"newest": names}
    for name, encoding in ENCODINGS.items():
        wanted.setdefault(_oldest(encoding), ["original"]).append(name)
    done = {}
    for version, models in wanted.items():
        tmp = tmp_path_factory.mktemp(f"ort-{version}")
        got = _run_levels(_python(version), [shrunk[m] for m in models], feeds, tmp)
        done[version] = {"version": got["version"], "errors": {models[int(k.split("/")[0])] + "/" + k.split("/")[1]: e
                                                              for k, e in got["errors"].items()},
                         "outputs": {(models[m], level): o for (m, level), o in got["outputs"].items()}}
    return done


@pytest.mark.network
@pytest.mark.parametrize("name", list(ENCODINGS))
def test_an_encoding_gives_the_same_answers_at_every_level_and_runtime(name: str,
                                                                       ran: dict[str, dict[str, Any]]) -> None:
    encoding = ENCODINGS[name]
    oldest = _oldest(encoding)
    if encoding.floor is not None:  # the tool refuses it for a user who declares an older onnxruntime
        below = (encoding.floor[0], encoding.floor[1] - 1)
        assert refusal(levels_model(), encoding.options["method"], encoding.options.get("decode", "float"),
                       Targets(below)) is not None, name
    verified = ran["newest"]["outputs"][(name, "ORT_ENABLE_ALL")]  # what verification ran and saw
    limits = VerifyOptions()
    for version in ("newest", oldest):
        where = ran[version]
        for level in LEVELS:
            assert f"{name}/{level}" not in where["errors"], (version, level, where["errors"][f"{name}/{level}"])
            rel, cos = runtimes.deviation(where["outputs"][(name, level)], verified)
            said = f"{name} in onnxruntime {where['version']} at {level}: rel L2 {rel:.2e}, cosine {cos:.6f}"
            assert rel <= limits.rel_l2_limit and cos >= limits.cosine_limit, said
            if encoding.float_compute:
                assert rel <= FLOAT_ROUNDING, said
            # and the original, in the same runtime at the same level, is as far from it as verification found
            original, seen = where["outputs"][("original", level)], ran["newest"]["outputs"][("original", LEVELS[-1])]
            here = runtimes.deviation(where["outputs"][(name, level)], original)[0]
            assert here <= 1.25 * runtimes.deviation(verified, seen)[0] + 1e-3, said


def test_the_build_states_the_level_it_verified_at(shrunk: dict[str, Path]) -> None:
    result = shrink(shrunk["original"], None, ShrinkOptions(method="int8"))
    assert result.verification is not None
    assert result.verification.runtime == f"onnxruntime {ort.__version__} (CPU, ORT_ENABLE_ALL)"
    assert encode(result.verification.record())["runtime"] == result.verification.runtime
    assert result.verification.summary().endswith(f"; ran in {result.verification.runtime}")


def test_a_dequantize_linear_before_a_reshape_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoding that put a ``DequantizeLinear`` before a Reshape (here ``decode = "fast"`` made to
    decode every weight so, and to keep every one) is refused before anything is written."""
    import hatch_shrinkray.methods.int8
    from hatch_shrinkray.encodings.int8 import Int8Encoder

    monkeypatch.setattr(Int8Encoder, "_fast", staticmethod(lambda w, ctx: True))
    monkeypatch.setattr(hatch_shrinkray.methods.int8, "keep_fused", lambda model, records: records)
    original = tmp_path / "original.onnx"
    onnx.save(levels_model(), str(original))
    with pytest.raises(ShrinkrayError) as caught:
        shrink(original, tmp_path / "out" / "model.onnx", ShrinkOptions(method="int8", decode="fast", verify=None))
    line = f"error: {'p' * 40}: {caught.value.message} ({caught.value.hint})"
    assert caught.value.message == ("shrunk graph has DequantizeLinear -> Reshape (onnxruntime miscompiles it); "
                                    "nothing written"), caught.value.message
    assert len(line.replace("Reshape", "Transpose")) <= 160, line
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_the_pattern_is_found_through_identity_and_in_branches() -> None:
    """What the check looks for: a DequantizeLinear whose output reaches a data-movement op, directly,
    through Identity nodes, or from inside an If branch; not one that feeds a MatMul."""
    def graph(nodes: list[onnx.NodeProto], name: str = "g") -> onnx.GraphProto:
        inits = [numpy_helper.from_array(np.array([12, -45, 7, -3], np.int8), "q"),
                 numpy_helper.from_array(np.float32(0.02), "s"), numpy_helper.from_array(np.array([2, 2]), "shape")]
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                 inits)

    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["w"], name="dq")
    direct = helper.make_model(graph([dq, helper.make_node("Reshape", ["w", "shape"], ["y"], name="r")]))
    found = miscompiled(direct)
    assert found is not None and (found[0].name, found[1].op_type) == ("dq", "Reshape")
    through = graph([dq, helper.make_node("Identity", ["w"], ["i"]), helper.make_node("Transpose", ["i"], ["y"])])
    assert miscompiled(helper.make_model(through)) is not None
    branch = helper.make_graph([helper.make_node("Unsqueeze", ["w", "axes"], ["u"])], "b", [],
                               [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
                               [numpy_helper.from_array(np.array([0]), "axes")])
    with_if = graph([dq, helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)])
    assert miscompiled(helper.make_model(with_if)) is not None
    fine = graph([dq, helper.make_node("MatMul", ["w", "w"], ["y"])])
    assert miscompiled(helper.make_model(fine)) is None
