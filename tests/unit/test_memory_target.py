"""Target ``memory`` in this process: what the declared runtimes let it emit, what it keeps packed and
counts as memory, the option and its rung on the fallback ladder (the figures measured in fresh
processes, and the judging against round-to-nearest int8, are in tests/test_memory_target.py)."""

from __future__ import annotations

from pathlib import Path

import onnx

from hatch_shrinkray import ShrinkOptions, shrink
from hatch_shrinkray.codec import decode, encode
from hatch_shrinkray.methods import resident
from hatch_shrinkray.option_table import option_errors
from hatch_shrinkray.options import Remedy
from hatch_shrinkray.registry import ORIGINAL, ladder
from hatch_shrinkray.sizes import Sizes
from hatch_shrinkray.verification.memory import withheld

from onnx_builders import embedder, op_types


def test_the_declared_runtimes_decide_what_is_emitted(tmp_path: Path) -> None:
    src, _ = embedder(tmp_path, rows=512, width=64)
    m = onnx.load(str(src))
    old = ShrinkOptions(target="memory", runtimes=("onnxruntime>=1.16.3",), verify=None, min_elements=1000)
    eight = "not packed: MatMulNBits 8-bit needs onnxruntime>=1.22.0 (onnxruntime>=1.16.3 targeted)"
    assert resident.withheld(m, old) == {("main", "W1"): eight, ("main", "W2"): eight}
    r = shrink(src, tmp_path / "old.onnx", old)
    assert "MatMulNBits" not in op_types(tmp_path / "old.onnx")
    assert all("MatMulNBits" not in t.encoding for t in r.tensors)
    assert withheld(r.tensors) == (eight.removeprefix("not packed: "),)
    four = ShrinkOptions(method="int4", target="memory", runtimes=("onnxruntime>=1.16.3",), verify=None,
                         min_elements=1000)
    gather = "not packed: GatherBlockQuantized 4-bit needs onnxruntime>=1.23.0 (onnxruntime>=1.16.3 targeted)"
    assert resident.withheld(m, four) == {("main", "E"): gather}
    r = shrink(src, tmp_path / "four.onnx", four)
    assert {t.name: t.encoding for t in r.tensors}["W1"] == "MatMulNBits 4-bit, block 32"
    assert op_types(tmp_path / "four.onnx") >= {"MatMulNBits", "Gather"}
    new = ShrinkOptions(method="int4", target="memory", runtimes=("onnxruntime>=1.23", "web"), verify=None,
                        min_elements=1000)
    assert resident.withheld(m, new) == {}
    shrink(src, tmp_path / "new.onnx", new)
    assert "GatherBlockQuantized" in op_types(tmp_path / "new.onnx")
    assert resident.withheld(m, ShrinkOptions(runtimes=("onnxruntime>=1.16.3",))) == {}  # not the memory target


def test_the_memory_target_is_an_option_and_counts_the_wheel_for_the_never_larger_rule() -> None:
    assert option_errors(ShrinkOptions(target="memory")) == []
    sizes = Sizes(raw=100, wheel=60, web=50)
    assert sizes.of("memory") == 60


def test_the_ladder_climbs_to_float_in_memory_before_fp16() -> None:
    """What ``check --fix`` climbs and a build falls back along (``registry.ladder``)."""
    memory = ShrinkOptions(target="memory")
    floor = Remedy(method="int8", rounding="nearest", target="wheel")
    assert ladder(memory) == [Remedy(rounding="nearest"), floor, Remedy(method="fp16"), ORIGINAL]
    assert floor.describe(memory) == "int8 round-to-nearest, float in memory"
    assert floor.apply(memory).target == "wheel"
    assert decode(Remedy, encode(floor)) == floor
    four = ladder(ShrinkOptions(method="int4", target="memory"))
    assert four[:2] == [Remedy(method="int8", rounding="nearest"), floor]  # int8 packed first, then float
    assert floor not in ladder(ShrinkOptions()) and floor not in ladder(ShrinkOptions(method="fp16", target="memory"))


def test_memory_bytes_count_what_a_process_holds(tmp_path: Path) -> None:
    from hatch_shrinkray.fitting.candidates import fp32
    from hatch_shrinkray.onnxgraph.graph import find_sites

    src, _ = embedder(tmp_path, rows=512, width=64)
    sites = {s.name: s for s in find_sites(onnx.load(str(src)))}
    w1 = sites["W1"]
    cands = resident.candidates(w1, w1.array(), _ctx(w1), ShrinkOptions(method="auto", target="memory"), moments=None,
                                lay=None)
    assert [c.kind for c in cands] == ["MatMulNBits 8-bit", "MatMulNBits 4-bit"]
    assert [resident.memory_bytes(w1, c) for c in cands] == [c.stored_bytes for c in cands]
    assert resident.memory_bytes(w1, fp32(w1.array())) == w1.nbytes  # type: ignore[arg-type]
    assert resident.candidates(w1, w1.array(), _ctx(w1), ShrinkOptions(method="auto"), moments=None, lay=None) == []


def _ctx(site: object) -> object:
    from hatch_shrinkray.onnxgraph.encoding import EncodeContext

    return EncodeContext(ShrinkOptions(), 17, tuple(n for n, _ in site.consumers), 1, "")  # type: ignore[attr-defined]
