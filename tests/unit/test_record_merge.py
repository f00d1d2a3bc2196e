"""``capture.merge.merge`` against its contract, on parts written by hand (no processes, no files).

A part is what one process of a ``record`` run kept of one model (``recorder.part_of``): its metadata
and its samples, calls numbered within the part. ``merge`` orders the parts by content, numbers the
calls across them, keeps repeated feeds and repeated streams once, makes the model's path relative to
the project, and counts every call it did not keep under the reason it was left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hatch_shrinkray.codec import decode, encode
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.format import BYTES_MODEL, Meta
from hatch_shrinkray.recording.merge import OTHER_FEEDBACK, REPEATED_STREAM, Part, merge
from hatch_shrinkray.recording.select import BYTE_CAP, REJECTED, REPEATED, SAMPLE_CAP, Sample

FEEDBACK = [["state_out", "state_in"]]
ROOT = Path("/project")


def sample(call: int, feed: str, nbytes: int = 100) -> Sample:
    """A sample of the feed named ``feed`` (equal names: equal feeds)."""
    return Sample(call, ((0, "", feed.encode()),), f"digest-of-{feed}", nbytes, nbytes)


def part(feeds: list[str], *, labels: list[str] | None = None, model: str = "/project/models/m.onnx",
         calls: int | None = None, skipped: list[list[Any]] | None = None, tests: list[str] | None = None,
         streams: list[list[int]] | None = None, feedback: list[list[str]] | None = None,
         **extra: Any) -> Part:
    """A part whose calls ``0..n-1`` fed ``feeds``; stateless unless ``streams`` (positions) is given."""
    samples = [sample(call, feed) for call, feed in enumerate(feeds)]
    if streams is None:
        units = labels or [f"call:{call}" for call in range(len(feeds))]
    else:
        units = [f"stream:{k}" for k, stream in enumerate(streams) for _ in stream]
    meta = {"model_sha256": "a" * 64, "model": model, "inputs": ["x"], "calls": len(feeds) if calls is None else calls,
            "samples": len(samples), "picked": [s.call for s in samples], "units": units,
            "feedback": (feedback or FEEDBACK) if streams is not None else [], "streams": streams or [],
            "skipped": skipped or [], "tests": tests or [], **extra}
    return Part(decode(Meta, meta), samples)


def kept_feeds(merged: Any) -> list[bytes]:
    return [stored[0][2] for stored in merged.samples]


def test_calls_are_numbered_across_the_parts_in_the_order_of_their_content() -> None:
    a, b = part(["a0", "a1", "a2"]), part(["b0", "b1"])
    first, second = sorted([a, b], key=lambda p: p.content)
    merged = merge([a, b], Caps(), ROOT)
    assert encode(merged.meta)["calls"] == 5
    assert encode(merged.meta)["picked"] == [0, 1, 2, 3, 4]
    assert kept_feeds(merged) == [s.stored[0][2] for s in [*first.samples, *second.samples]]
    assert encode(merged.meta)["units"] == [f"call:{c}" for c in range(5)]  # standalone calls renumbered


def test_the_order_of_the_parts_does_not_change_the_recording() -> None:
    parts = [part(["a0", "a1"], tests=["test:a"], labels=["test:a"] * 2), part(["b0"]), part(["c0", "c1", "c2"])]
    one, other = merge(parts, Caps(), ROOT), merge(parts[::-1], Caps(), ROOT)
    assert (one.meta, one.samples, one.seen, one.kept, one.short) == (
        other.meta, other.samples, other.seen, other.kept, other.short)


def test_a_repeated_feed_is_kept_once_by_its_first_call() -> None:
    merged = merge([part(["x", "y", "z", "x", "y"])], Caps(), ROOT)
    assert encode(merged.meta)["picked"] == [0, 1, 2]
    assert dict(encode(merged.meta)["skipped"]) == {REPEATED: 2}
    assert encode(merged.meta)["samples"] == 3


def test_a_feed_repeated_in_another_process_is_kept_once() -> None:
    merged = merge([part(["x", "y"]), part(["x", "z"])], Caps(), ROOT)
    assert sorted(kept_feeds(merged)) == [b"x", b"y", b"z"]
    assert dict(encode(merged.meta)["skipped"]) == {REPEATED: 1}


def test_every_call_not_kept_is_counted_under_its_reason() -> None:
    """The processes kept 3 of 10 calls and counted none: the 7 others were thinned to stay within the
    byte bound, which the choice did not reach by samples."""
    merged = merge([part(["a", "b", "c"], calls=10)], Caps(), ROOT)
    assert dict(encode(merged.meta)["skipped"]) == {BYTE_CAP: 7}
    assert merged.meta.samples + sum(n for _, n in merged.meta.skipped) == merged.meta.calls


def test_calls_thinned_when_the_samples_bound_was_reached_count_under_it() -> None:
    merged = merge([part(["a", "b", "c", "d"], calls=9)], Caps.hard(samples=2), ROOT)
    assert encode(merged.meta)["samples"] == 2
    assert dict(encode(merged.meta)["skipped"]) == {SAMPLE_CAP: 7}


def test_feeds_onnxruntime_rejected_are_not_calls() -> None:
    """``REJECTED`` counts feeds ``run()`` refused: reported, but not among the calls to account for."""
    merged = merge([part(["a", "b"], skipped=[[REJECTED, 5]])], Caps(), ROOT)
    assert dict(encode(merged.meta)["skipped"]) == {REJECTED: 5}


def test_the_skipped_counts_of_the_parts_add_up_and_zero_counts_are_dropped() -> None:
    merged = merge([part(["a"], calls=3, skipped=[["over the byte cap", 2], ["unused", 0]]),
                    part(["b"], calls=2, skipped=[["over the byte cap", 1]])], Caps(), ROOT)
    assert encode(merged.meta)["skipped"] == [["over the byte cap", 3]]


@pytest.mark.parametrize(("model", "expected"), [
    ("/project/models/m.onnx", "models/m.onnx"),
    ("/elsewhere/models/m.onnx", "m.onnx"),
    ("/project/../project/m.onnx", "m.onnx"),
    (BYTES_MODEL, BYTES_MODEL),
])
def test_the_model_is_named_relative_to_the_project_else_by_its_file_name(model: str, expected: str) -> None:
    assert merge([part(["a"], model=model)], Caps(), ROOT).meta.model == expected


def test_a_path_outranks_a_session_made_from_bytes() -> None:
    merged = merge([part(["a"], model=BYTES_MODEL), part(["b"], model="/project/m.onnx")], Caps(), ROOT)
    assert encode(merged.meta)["model"] == "m.onnx"
    assert merged.source == "/project/m.onnx"  # for the coverage table, never written to the file
    assert merge([part(["a"], model=BYTES_MODEL)], Caps(), ROOT).source == ""


def test_what_ran_is_told_in_tests_when_tests_ran_else_in_calls() -> None:
    assert merge([part(["a", "b"])], Caps(), ROOT).seen == "2 calls"
    assert merge([part(["a"])], Caps(), ROOT).seen == "1 calls"
    one = part(["a", "b"], labels=["test:t"] * 2, tests=["test:t"])
    assert merge([one], Caps(), ROOT).seen == "1 test"
    two = part(["c"], labels=["test:u"], tests=["test:u", "test:t"])
    assert merge([one, two], Caps(), ROOT).seen == "2 tests"


def test_what_was_kept_names_the_tests_it_came_from() -> None:
    merged = merge([part(["a", "b", "c"], labels=["test:t", "test:t", "test:u"], tests=["test:t", "test:u"])],
                   Caps(), ROOT)
    assert merged.kept == "3 samples from 2 tests"
    assert encode(merged.meta)["units"] == ["test:t", "test:t", "test:u"]
    assert merge([part(["a"])], Caps(), ROOT).kept == "1 sample"


def test_too_few_units_kept_of_more_that_ran_is_reported_as_short() -> None:
    """Four standalone calls ran and a hard bound kept two: (kept, ran, bytes that MIN_UNITS units take)."""
    merged = merge([part(["a", "b", "c", "d"])], Caps.hard(max_bytes=200), ROOT)
    assert merged.short == (2, 4, "--max-bytes", 100 * MIN_UNITS)


def test_every_unit_kept_is_not_short_even_when_fewer_than_min_units_ran() -> None:
    assert merge([part(["a", "b", "c"])], Caps(), ROOT).short is None


def test_stateless_meta_has_no_feedback_and_no_streams() -> None:
    meta = encode(merge([part(["a"])], Caps(), ROOT).meta)
    assert (meta["feedback"], meta["streams"]) == ([], [])
    assert meta["model_sha256"] == "a" * 64 and meta["inputs"] == ["x"]


def test_streams_keep_their_steps_in_call_order() -> None:
    merged = merge([part(["s0", "s1", "s2", "t0", "t1"], streams=[[0, 1, 2], [3, 4]], streams_ran=2,
                         stream_steps=[3, 2], stream_groups=["", ""])], Caps(), ROOT)
    meta = encode(merged.meta)
    assert meta["feedback"] == FEEDBACK
    assert meta["streams"] == [[0, 1, 2], [3, 4]] and meta["stream_steps"] == [3, 2]
    assert meta["units"] == ["stream:0"] * 3 + ["stream:1"] * 2 and meta["picked"] == [0, 1, 2, 3, 4]
    assert kept_feeds(merged) == [b"s0", b"s1", b"s2", b"t0", b"t1"]
    assert merged.seen == "2 streams" and merged.kept == "2 streams, 5 steps"
    assert merged.short is None


def test_interleaved_streams_are_stored_by_call_and_indexed_by_position() -> None:
    merged = merge([part(["s0", "t0", "s1", "t1"], streams=[[0, 2], [1, 3]])], Caps(), ROOT)
    assert encode(merged.meta)["streams"] == [[0, 2], [1, 3]]
    assert encode(merged.meta)["units"] == ["stream:0", "stream:1", "stream:0", "stream:1"]
    assert merged.seen == "2 streams"  # parts that did not count the streams that ran: the streams merged


def test_a_stream_that_repeats_the_start_of_another_is_kept_once() -> None:
    merged = merge([part(["s0", "s1", "s2", "s0", "s1", "s0", "s1", "s2"], streams=[[0, 1, 2], [3, 4], [5, 6, 7]],
                         streams_ran=3)], Caps(), ROOT)
    assert encode(merged.meta)["streams"] == [[0, 1, 2]]
    assert dict(encode(merged.meta)["skipped"]) == {REPEATED_STREAM: 5}
    assert merged.repeated_streams == 2
    assert merged.seen == "3 streams"  # what ran (the parts' streams_ran), not what was kept


def test_the_feedback_most_parts_saw_wins_and_other_streams_keep_their_first_step() -> None:
    other = [["h_out", "h_in"]]
    merged = merge([part(["a0", "a1"], streams=[[0, 1]]), part(["b0", "b1"], streams=[[0, 1]]),
                    part(["c0", "c1", "c2"], streams=[[0, 1, 2]], feedback=other)], Caps(), ROOT)
    assert encode(merged.meta)["feedback"] == FEEDBACK
    assert sorted(kept_feeds(merged)) == [b"a0", b"a1", b"b0", b"b1", b"c0"]
    assert dict(encode(merged.meta)["skipped"]) == {OTHER_FEEDBACK: 2}


def test_stateless_calls_beside_streams_become_one_step_streams() -> None:
    merged = merge([part(["s0", "s1"], streams=[[0, 1]]), part(["a", "b"], labels=["test:t", "call:1"])],
                   Caps(), ROOT)
    assert sorted(len(s) for s in encode(merged.meta)["streams"]) == [1, 1, 2]
    assert merged.kept == "3 streams, 4 steps"


def test_streams_cut_to_a_prefix_say_so() -> None:
    feeds = [f"s{k}" for k in range(6)] + [f"t{k}" for k in range(6)]
    merged = merge([part(feeds, streams=[list(range(6)), list(range(6, 12))])], Caps.hard(max_bytes=800), ROOT)
    assert [len(s) for s in encode(merged.meta)["streams"]] == [4, 4]
    assert encode(merged.meta)["stream_steps"] == [6, 6]
    assert merged.kept == "2 streams, 8 steps (2 cut to a prefix)"
    assert dict(encode(merged.meta)["skipped"]) == {BYTE_CAP: 4}
