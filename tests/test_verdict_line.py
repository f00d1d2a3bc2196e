"""The one line per model a newcomer reads: at most 160 characters at the default verbosity, the
verdict in words, and why output-aware rounding was skipped; the figures are one ``-v`` away and
in the manifest and JSON, and an output that was never compared has none anywhere."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import MODEL, build, cli, write_project
from onnx import helper

from hatch_shrinkray.recording.format import Recording
from hatch_shrinkray.recording.storage import write_recording
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME

from onnx_builders import init, mlp, save

LIMIT = 160


def _recorded(directory: Path, model: Path, calls: int, rows: int) -> None:
    """``calls`` independent calls of ``rows`` rows each, as `record` writes them."""
    rng = np.random.default_rng(0)
    samples = tuple({"x": rng.standard_normal((rows, 256)).astype(np.float32)} for _ in range(calls))
    directory.mkdir(parents=True, exist_ok=True)
    write_recording(directory, Recording(hashlib.sha256(model.read_bytes()).hexdigest(), model.name, ("x",), samples,
                                         calls, tuple(range(calls)), tuple(f"call:{i}" for i in range(calls))))


def test_the_build_line_is_short_and_says_why_rounding_was_not_fitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """40 recorded calls of 4 rows: enough independent calls, too few rows for 256 features."""
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    root = write_project(tmp_path / "toymodel", 'inputs = "tests/shrinkray-inputs"\n')
    save(mlp(), root / MODEL)
    _recorded(root / "tests/shrinkray-inputs", root / MODEL, 40, 4)
    build(root)
    sdist = build(root, "sdist")
    err = capsys.readouterr().err.splitlines()
    line = next(ln for ln in err if ln.startswith(f"shrinkray: {MODEL}: "))
    assert len(line) <= LIMIT, line
    assert line.startswith(f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> 77.06 KB (28.3%), int8: same labels on 40 "
                           "recorded calls; not fitted: few rows, "), line
    assert not any("cos " in ln or "rel-L2" in ln for ln in err), err
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(MANIFEST_NAME))
        verification = json.dumps(json.load(tar.extractfile(member)))  # type: ignore[arg-type]
    assert '"cosine": 0.99' in verification and "only 160 calibration rows for 256 features" in verification


def test_the_shrink_line_keeps_figures_for_v_and_none_for_an_output_never_compared(tmp_path: Path) -> None:
    model = save(mlp(), tmp_path / "m.onnx")
    _recorded(tmp_path / "rec", model, 20, 16)
    judged = cli("shrink", str(model), "-o", str(tmp_path / "a"), "--inputs", str(tmp_path / "rec"))
    assert judged.returncode == 0, judged.stderr
    line = judged.stdout.splitlines()[0]
    assert len(line) <= LIMIT + len(str(tmp_path)) * 2, line  # the paths are the user's
    assert ": shrunk, " in line and ", int8: same labels on 20 recorded calls; " in line and "cos" not in line, line
    off = cli("-v", "shrink", str(model), "-o", str(tmp_path / "b"), "--inputs", str(tmp_path / "rec"),
              "--judges", "y=off", "--json", "-")
    assert off.returncode == 0, off.stderr
    first, detail = off.stdout.splitlines()[:2]
    assert ", int8: no output compared (every judge is off)" in first, first
    assert "cos " not in off.stdout and "rel-L2" not in off.stdout and "no output compared" in detail, detail
    report = json.loads(off.stdout[off.stdout.index("\n[") + 1:])
    (output,) = report[0]["verification"]["outputs"]
    assert output["judge"] == "off" and output["cosine"] is None and output["rel_l2"] is None


def test_the_verdict_in_words() -> None:
    """Each kind of evidence, passed or failed (``check`` under ``strict`` keeps failing models), in a few
    words, one noun per unit (the evidence's) and one phrasing per verdict."""
    from hatch_shrinkray.evidence import Evidence
    from hatch_shrinkray.result import Fit, FitNote, FitReason, OutputComparison, VerifyResult
    from hatch_shrinkray.verdict import fit_words, verdict

    ok = OutputComparison("y", 0.1, 0.01, 0.9999, 1.0, 0, judge="top-1", answers=20)
    bad = OutputComparison("y", 1.0, 0.2, 0.9, 1.0, 0, failures=("rel L2 0.2 > 0.1",), judge="top-1", answers=20)
    off = OutputComparison("y", 0.0, 0.0, 1.0, None, 0, judge="off")

    def said(o: OutputComparison, evidence: Evidence | None, real: bool = True, calibration: int = 0) -> str:
        return verdict(VerifyResult((o,), 20, "rec", real=real, evidence=evidence, calibration=calibration))

    same = Evidence(20, 0, "calls", answers=20, decisions=20)
    assert said(ok, same) == "same answers on 20 recorded calls"
    assert said(ok, Evidence(40, 2, "test cases", answers=40)) == "answers changed in 2 of 40 recorded tests"
    assert said(ok, Evidence(40, 2, "test cases", answers=40, describes="segment lists")) == \
        "segment lists changed in 2 of 40 recorded tests"
    assert said(ok, Evidence(3, 0, "streams", decisions=47)) == "same answers on 3 recorded streams (weak evidence)"
    assert said(ok, Evidence(10, 0, "calls", answers=10), calibration=10) == \
        "same answers on 10 held-out calls (weak evidence)"
    assert said(ok, Evidence(20, 0, "calls")) == "within limits on 20 recorded calls (numbers only)"
    # 20 samples from 3 tests: the units judged, not the samples under the units' name (speechmos's line)
    assert said(ok, Evidence(3, 0, "test cases")) == "within limits on 3 recorded tests (numbers only)"
    assert said(ok, Evidence(1, 0, "test cases")) == "within limits on 1 recorded test (numbers only)"
    assert fit_words(FitNote(Fit.NOT_FITTED, "int8's codes", FitReason.FEW_UNITS, 1, "test cases")) == \
        "not fitted: only 1 test"
    assert said(ok, None, real=False) == "passes a smoke check on 20 generated samples"
    assert said(bad, None, real=False) == "FAILS a smoke check on 20 generated samples"
    assert said(bad, same) == "FAILS: same answers on 20 recorded calls"
    assert said(off, same) == "no output compared (every judge is off)"
    assert all(len(said(o, e)) < 80 for o in (ok, bad, off) for e in (same, None))


# ---------------------------------------------------------------------------------------------
# Never ship a result that is not smaller; say what stayed float and why.


def _mlp_with_bias() -> onnx.ModelProto:
    m = mlp(256, 256, 10)
    m.graph.node[-1].output[0] = "logits"
    m.graph.initializer.append(init("b", np.zeros(10, np.float32)))
    m.graph.node.append(helper.make_node("Add", ["logits", "b"], ["y"]))
    return m


KEPT_FLOAT = "kept float: 1 tensor below min-elements (40 B), 1 excluded by exclude-tensors (10.24 KB)"


def test_report_line_says_what_stayed_float(tmp_path: Path) -> None:
    """W1 is encoded, W2 (2560 elements) is excluded by name, the bias is below min-elements."""
    path = tmp_path / "a.onnx"
    onnx.save(_mlp_with_bias(), str(path))
    proc = cli("-v", "shrink", str(path), "-o", str(tmp_path / "out"), "--exclude-tensors", "W2", "--min-elements",
               "1000")
    assert proc.returncode == 0, proc.stderr
    line, detail = proc.stdout.splitlines()[:2]
    assert "kept float" not in line and detail.endswith(f"; {KEPT_FLOAT}"), detail


def test_build_line_says_what_stayed_float(tmp_path: Path, isolated: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """At the default verbosity the line is short; ``-v`` (HATCH_VERBOSE) adds what stayed float."""
    root = write_project(tmp_path / "toymodel", 'exclude-tensors = ["W2"]\nmin-elements = 1000\n')
    onnx.save(_mlp_with_bias(), str(root / MODEL))
    for out in ("dist", "again"):  # from the cache too
        monkeypatch.setenv("HATCH_VERBOSE", "1" if out == "again" else "0")
        build(root, out=tmp_path / out)
        lines = capsys.readouterr().err.splitlines()
        assert not any(KEPT_FLOAT in ln for ln in lines) or out == "again"
        if out == "again":
            line = next(ln for ln in lines if ln.startswith(f"shrinkray: {MODEL}: ") and "kept float" in ln)
            assert line.endswith(f"; {KEPT_FLOAT}; cached: {line.rsplit('cached: ', 1)[1]}"), line
