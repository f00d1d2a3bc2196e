"""Files written before the codec (``tests/persisted``, written by main at 971e0a2 with its own
``to_dict`` methods) read back, and writing what they hold gives the same bytes: manifests and cache
records of real builds, plans of both versions, and the records of the cases a build rarely meets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatch_shrinkray.codec import decode, encode
from hatch_shrinkray.evidence import Evidence
from hatch_shrinkray.footprint import Footprint, Memory
from hatch_shrinkray.options import Remedy
from hatch_shrinkray.result import (
    Fit,
    FitNote,
    FitReason,
    OutputComparison,
    TensorRecord,
    VerificationRecord,
    VerifyResult,
)
from hatch_shrinkray.shipping.cache import CachedShrink
from hatch_shrinkray.shipping.manifest import ManifestEntry, load_manifest, render
from hatch_shrinkray.shipping.plan import read_plan
from hatch_shrinkray.shipping.plan import render as render_plan
from hatch_shrinkray.shrink_result import Failed, KeptFloat, ShrinkResult
from hatch_shrinkray.sizes import Sizes

HERE = Path(__file__).parent / "persisted"


def cache_text(record: CachedShrink) -> str:
    return json.dumps(encode(record), sort_keys=True, indent=2)  # as ShrinkCache.put writes it


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.glob("manifest-*.json")))
def test_a_manifest_reads_and_writes_the_same_bytes(name: str) -> None:
    entries = load_manifest(HERE / name)
    assert entries and all(isinstance(e, ManifestEntry) for e in entries.values())
    assert render(entries) == (HERE / name).read_text()


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.glob("cache-*.json")))
def test_a_cache_record_reads_and_writes_the_same_bytes(name: str) -> None:
    text = (HERE / name).read_text()
    record = decode(CachedShrink, json.loads(text))
    assert cache_text(record) == text


def test_a_build_s_verification_is_typed_after_reading() -> None:
    (entry,) = load_manifest(HERE / "manifest-memory.json").values()
    verification = entry.verification
    assert isinstance(verification, VerificationRecord) and verification.passed and verification.real_inputs
    assert isinstance(verification.evidence, Evidence) and verification.evidence.weak  # 1 unit: fewer than needed
    assert isinstance(verification.memory, Memory) and verification.memory.runs == 100
    assert verification.fit is Fit.NOT_FITTED
    assert verification.outputs[0].name == "y" and verification.outputs[0].top1 == 1.0
    (unverified,) = load_manifest(HERE / "manifest-noverify.json").values()
    assert unverified.verification is None


def test_plans_of_both_versions_read() -> None:
    v1, v2 = read_plan(HERE / "plan-v1.json"), read_plan(HERE / "plan-v2.json")
    assert v1 == {sha: entry for sha, entry in v2.items() if entry.remedy is None}
    assert render_plan(v2) == (HERE / "plan-v2.json").read_text()
    assert {e.model[-6:]: e.remedy for e in v2.values()} == {
        "a.onnx": None, "b.onnx": Remedy(rounding="nearest"), "d.onnx": Remedy(method="fp16"),
        "e.onnx": Remedy(original=True), "f.onnx": Remedy(target="wheel")}
    assert v2["a" * 64].tensors == (("main", "W1", "int10"), ("main", "W2", "fp16"))


def edge_cases() -> tuple[VerifyResult, VerifyResult]:
    """The records ``tests/persisted/README.md`` built with main's classes, built again with these."""
    o1 = OutputComparison("y", float("nan"), float("inf"), float("-inf"), None, 3, ("rel-L2 inf > 0.1",),
                          changed=(True, False), waived=("max-rel-l2 0.2",), unchecked="constant")
    o2 = OutputComparison("z", 0.5, 0.01, 0.99, 0.9, 0, judge="off", agreement_kind="top-1", positions=10, flips=1)
    full = VerifyResult(
        (o1, o2), 5, "generated (5 samples)", real=False, calibration=2, notes=("a note", "b"),
        evidence=Evidence(3, 1, "streams", answers=4, changed_answers=1, decisions=9, flips=2, real=False,
                          describes="lines"),
        fitting="kept", fit=FitNote(Fit.KEPT, "auto's plan", FitReason.FEW_UNITS, 3, "calls", Fit.NOT_KEPT),
        streams=3, symbols=(("batch", 2), ("seq", 7)), floor="budget",
        memory=Memory(Footprint(1, 2, 3, 0.5, 0.25), Footprint(4, 5, 6, 0.125, 1.5), 10, "x", 7, 9, ("W",)),
        runtime="onnxruntime 1.0")
    return full, VerifyResult((), 0, "data.npz", checker="light")


def test_a_verification_is_written_as_main_wrote_it() -> None:
    full, bare = edge_cases()
    for name, verification in (("full", full), ("bare", bare)):
        text = (HERE / f"verify-{name}.json").read_text()
        assert json.dumps(encode(verification.record()), sort_keys=True, indent=2) + "\n" == text
        assert encode(decode(VerificationRecord, json.loads(text))) == json.loads(text)
    entry = ManifestEntry("a" * 64, "b" * 64, "int8", {"k": [1, 2]}, {"onnx": "1"}, bare.record(), None)
    record = CachedShrink(entry, 10, 5, 1.25, "cos", kept="kept float: 1", kept_original="why", unverified=True,
                          sizes=(Sizes(10, 9, 8), Sizes(5, 4, 3, True)), label="int8", verdicts=("a", "b"))
    assert cache_text(record) == (HERE / "cache-synthetic.json").read_text()
    bare_record = CachedShrink(ManifestEntry("a" * 64, "a" * 64, "fp16"), 10, 10, 0.0, None)
    assert cache_text(bare_record) == (HERE / "cache-synthetic-bare.json").read_text()
    assert render({"b.onnx": entry, "a.onnx": bare_record.entry}) == (HERE / "manifest-synthetic.json").read_text()


def test_shrink_json_s_report_is_written_as_main_wrote_it() -> None:
    full, _ = edge_cases()
    tensor = TensorRecord("W", "main", "initializer", (2, 3), "float32", 24, 6, "int8", max_abs_error=float("nan"))
    result = ShrinkResult("a.onnx", None, "int8", 10, 5, (tensor,), 1.23456, full, {"method": "int8"}, ("a.data",),
                          "why", True, (KeptFloat(2, "small", 100),), 3, {"a.onnx": "c" * 64}, Sizes(1, 2, 3),
                          Sizes(1, 1, 1, True), "int8 rtn", (Failed("int4", "worse"),))
    text = json.dumps([encode(result)], indent=2, sort_keys=True)
    assert text == (HERE / "report-synthetic.json").read_text()
