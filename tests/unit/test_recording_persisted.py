"""Recordings written by ``hatch-shrinkray record`` and a bundle journal written by main before they moved
onto the codec (tests/persisted/README.md says how) read back, and writing what they hold gives the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hatch_shrinkray.bundles.commit import JOURNAL, Journal, recover
from hatch_shrinkray.codec import encode, loads
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.recording.format import check_meta, meta_of
from hatch_shrinkray.recording.storage import read_recording, write_recording

PERSISTED = Path(__file__).parent.parent / "persisted"


@pytest.mark.parametrize("name", ["recording-calls.npz", "recording-stream.npz"])
def test_a_recording_of_main_reads_and_writes_back_the_same_bytes(name: str, tmp_path: Path) -> None:
    rec = read_recording(PERSISTED / name)
    with np.load(PERSISTED / name) as data:
        written = str(data["__meta__"])
    assert json.dumps(encode(meta_of(rec)), sort_keys=True) == written
    again = write_recording(tmp_path, rec, name=name)
    assert again.read_bytes() == (PERSISTED / name).read_bytes()


def test_the_stream_recording_keeps_its_streams_and_extra_keys() -> None:
    rec = read_recording(PERSISTED / "recording-stream.npz")
    assert rec.feedback == (("state", "stateN"),) and rec.streams == ((0,), (1, 2), (3,), (4, 5, 6, 7))
    assert rec.extra == {"stream_steps": [1, 2, 1, 4]} and rec.calls == 8
    assert set(rec.samples[1]) == {"x", "state"} and set(rec.samples[2]) == {"x"}


def test_a_version_1_metadata_reads_with_one_call_per_sample() -> None:
    meta = check_meta({"format": "hatch-shrinkray-recording", "version": 1, "model_sha256": "a" * 64,
                       "inputs": ["x"], "samples": 3}, "old.npz")
    assert (meta.calls, meta.picked, meta.model, meta.units, meta.extra) == (3, (0, 1, 2), "<bytes>", (), {})


def test_bad_metadata_names_every_problem_in_one_error() -> None:
    bad = {"format": "hatch-shrinkray-recording", "version": 2, "model_sha256": "xyz", "inputs": ["x", "x"],
           "samples": "2", "calls": -1, "skipped": {"a": 1}}
    with pytest.raises(ShrinkrayError) as caught:
        check_meta(bad, "r.npz")
    message = caught.value.message
    assert message.startswith("not a readable recording: ") and caught.value.path == "r.npz"
    for field in ("model_sha256: expected a sha256", "samples: expected", "calls: expected a number >= 0",
                  "skipped: expected a list"):
        assert field in message, message
    with pytest.raises(ShrinkrayError, match="inputs: must name each input once"):
        check_meta({**bad, "model_sha256": "a" * 64, "samples": 2, "calls": 2, "skipped": []}, "r.npz")


def test_a_journal_of_main_reads_and_writes_back_the_same_bytes() -> None:
    text = (PERSISTED / "journal-keep.json").read_text()
    journal = loads(Journal, text)
    assert journal.keep and [(c.path, c.leaves, c.existed) for c in journal.changes] == [
        ("a.onnx", False, True), ("b.onnx", True, True), ("c.onnx", False, False)]
    assert json.dumps(encode(journal), indent=1, sort_keys=True) == text


def test_a_damaged_journal_names_every_problem(tmp_path: Path) -> None:
    (tmp_path / JOURNAL).write_text('{"format": "hatch-shrinkray-bundle-journal", "keep": 1, "changes": [{"path": 2}]}')
    with pytest.raises(ShrinkrayError) as caught:
        recover(tmp_path)
    for problem in ("keep: expected true or false", "changes[0].path: expected a string", "changes[0].leaves: missing"):
        assert problem in caught.value.message, caught.value.message
