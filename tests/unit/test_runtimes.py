"""Target runtimes: the ``runtimes`` key / ``--runtimes`` flag, its default from the project's own
onnxruntime requirement, and the one-line refusals of what those runtimes cannot load or would
decode per inference (the versions come from tests/test_runtime_matrix.py and benchmarks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.encodings import packing
from hatch_shrinkray.methods.runtimes import DQ_MATMUL_FUSED, Targets, parse
from hatch_shrinkray.numerics.quant import NotEncodable, quantize_symmetric
from hatch_shrinkray.shipping.config import ConfigurationError, default_runtimes, load_config

from onnx_builders import conv_model, save, weight
from realmodels import magika

T = "tool.hatch.build.hooks.shrinkray"



@pytest.mark.parametrize(("dependencies", "expected"), [
    (["onnxruntime>=1.18,<2"], ("onnxruntime>=1.18",)),
    (["numpy", "onnxruntime==1.20.1; sys_platform == 'linux'", "onnxruntime-gpu~=1.22.0"], ("onnxruntime>=1.20.1",)),
    (["onnxruntime"], ("onnxruntime>=1.16.3",)),  # no floor: the oldest release tested
    (["onnxruntime<1.30"], ("onnxruntime>=1.16.3",)),
    (["numpy>=2", "not a requirement !"], ()),
    ([], ()),
])
def test_default_runtimes_come_from_the_projects_onnxruntime_requirement(dependencies: list[str],
                                                                        expected: tuple[str, ...]) -> None:
    assert default_runtimes(dependencies) == expected


def test_targets_parse_to_the_lowest_floor() -> None:
    assert parse(("onnxruntime>=1.22", "onnxruntime==1.18.1", "web")) == Targets((1, 18, 1), web=True)
    assert parse(("openvino",)) == Targets(None, openvino=True)
    assert parse(()) == Targets(None)


def test_hook_table_runtimes_key(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"x")
    config = load_config({"models": ["m.onnx"]}, tmp_path, dependencies=["onnxruntime>=1.18"])
    assert config.models[0].options.runtimes == ("onnxruntime>=1.18",)
    config = load_config({"models": ["m.onnx"], "runtimes": ["web"]}, tmp_path, dependencies=["onnxruntime>=1.18"])
    assert config.models[0].options.runtimes == ("web",)
    with pytest.raises(ConfigurationError) as info:
        load_config({"models": ["m.onnx"], "runtimes": ["onnxruntime >= 1.18", "tensorflow", 3]}, tmp_path)
    assert info.value.errors == [f"Field `{T}.runtimes` must be an array of strings"]
    with pytest.raises(ConfigurationError) as info:
        load_config({"models": ["m.onnx"], "runtimes": ["onnxruntime >= 1.18", "tensorflow"]}, tmp_path)
    assert info.value.errors == [f"Field `{T}.runtimes` entries must be 'web', 'openvino' or an onnxruntime "
                                 "version floor like 'onnxruntime>=1.18'; got 'tensorflow'"]




def test_hook_refuses_a_method_the_projects_own_onnxruntime_cannot_load(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "proj"
    (root / "src/proj/models").mkdir(parents=True)
    (root / "src/proj/__init__.py").write_text("")
    save(conv_model(), root / "src/proj/models/a.onnx")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "proj"\nversion = "0.1.0"\ndependencies = ["onnxruntime>=1.20"]\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/proj"]\n\n'
        f'[{T}]\nmodels = ["src/proj/models/*.onnx"]\nmethod = "dynamic"\n')
    with pytest.raises(SystemExit):
        next(WheelBuilder(str(root)).build(directory=str(tmp_path / "dist"), versions=["standard"]))
    err = capsys.readouterr().err
    assert ("shrinkray: src/proj/models/a.onnx: method dynamic turns Conv into ConvInteger, which onnxruntime "
            "< 1.24.1 does not implement: the model would not load in the target runtimes (onnxruntime>=1.20.0)") in err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("dist/*.whl"))


@pytest.mark.network
def test_fast_keeps_only_the_dequantize_linear_onnxruntime_fuses(tmp_path: Path) -> None:
    """Magika's second MatMul + bias becomes a Gemm before the DequantizeLinear fusion sees it: that
    weight is decoded in float, and its record says why."""
    result = shrink(magika(), tmp_path / "m.onnx", ShrinkOptions(decode="fast"))
    assert result.verification is not None and result.verification.passed
    fuses = tuple(int(p) for p in ort.__version__.split(".")[:3]) >= DQ_MATMUL_FUSED
    ops = [n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node]
    assert ops.count("DequantizeLinear") == (1 if fuses else 0)
    notes = {r.name: (r.encoding, r.note) for r in result.encoded}
    unfused = sorted(name for name, (_, note) in notes.items() if "not fused by onnxruntime" in note)
    gemm = "jax2tf_get_logits_/Const_24:0"
    assert unfused == ([gemm] if fuses else sorted([gemm, "jax2tf_get_logits_/Const:0"])), notes
    assert all("DequantizeLinear" not in notes[name][0] for name in unfused)


def test_packed_codes_need_bitshift() -> None:
    w = weight((64, 64), 3)
    q = quantize_symmetric(w, 0, 4)
    with pytest.raises(NotEncodable, match="opset >= 11"):
        packing.packed_decode(q.codes, q.scale, 4, opset=10, decoded=q.decoded, label="int4")
    dec = packing.packed_decode(q.codes, q.scale, 4, opset=11, decoded=q.decoded, label="int4")
    assert {n.op for n in dec.nodes} == {"BitShift", "Mod", "Concat", "Cast", "Sum", "Mul"}
    assert np.array_equal(packing.unpack([dec.stored["c0"]], 4, w.shape), q.codes)


def test_folded_bytes_is_what_folding_allocates() -> None:
    w = weight((256, 128), 3)
    q = quantize_symmetric(w, 0, 8)
    from hatch_shrinkray.encodings._decode import float_decode

    assert float_decode(q, w.dtype, 13, "int8").folded_bytes == 2 * 4 * w.size  # Cast + Mul, float32
    q4 = quantize_symmetric(w, 0, 4)
    dec = packing.packed_decode(q4.codes, q4.scale, 4, opset=13, decoded=q4.decoded, label="int4")
    # Mod and BitShift on the half-size planes, Concat, then Cast, Sum and Mul in float32
    assert dec.folded_bytes == w.size // 2 * 2 + w.size + 3 * 4 * w.size


def test_auto_keeps_its_load_within_the_cap() -> None:
    from hatch_shrinkray.fitting.budget import Deviation
    from hatch_shrinkray.fitting.search import Found, Option, within_load

    table = [[Option(10, 1.0, 80), Option(20, 0.5, 40), Option(40, 0.0, 0)],
             [Option(10, 1.0, 30), Option(20, 0.5, 20), Option(40, 0.0, 0)]]
    ok = Deviation(0.0, 1.0, 0.0, 0.0, 0.0, 0.0)
    found = Found((0, 0), ok, 0.0, 1)
    got = within_load(table, found, 70, lambda c: ok, lambda d: True)
    assert got.choice == (1, 0)  # 80 -> 40 saved for 10 bytes beats 30 -> 20 for 10 bytes
    assert within_load(table, found, 200, lambda c: ok, lambda d: True) is found
    assert within_load(table, found, 70, lambda c: ok, lambda d: False) is found
