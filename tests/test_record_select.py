"""What a recording keeps, as pure functions: ``select.choose_samples`` (units before bytes per
unit, hard and default bounds, the memory bound) and ``merge.merge`` (every call not kept is counted
with its reason). The recorder's own logs feed ``merge`` here, without processes or files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hatch_shrinkray.capture.merge import Part, merge
from hatch_shrinkray.capture.recorder import ModelLog, part_of
from hatch_shrinkray.capture.select import BYTE_CAP, MEMORY_CAP, SAMPLE_CAP, Caps, Sample, choose_samples
from hatch_shrinkray.capture.streams import Step
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.verification.npz import pack

MB = 1_000_000
ALONE = Step(-1, 0, ())


def page(call: int, nbytes: int = MB, decoded: int = 11 * MB) -> Sample:
    """A sample that takes ``nbytes`` in the file and ``decoded`` once loaded (a detector page)."""
    blob = pack(np.array([call], np.int64))
    return Sample(call, ((0, "", blob),), f"{call:040x}", nbytes, decoded)


def standalone(samples: list[Sample]) -> list[tuple[str, list[Sample]]]:
    return [("", samples)]


def test_the_default_bound_grows_so_that_sixteen_units_fit() -> None:
    pages = [page(i) for i in range(62)]
    chosen = choose_samples(standalone(pages), Caps())
    assert chosen.kept_units >= MIN_UNITS  # 8 MB alone held 8 pages of 1 MB
    assert sum(s.nbytes for _, s in chosen.samples) <= 64 * MB
    assert len(chosen.samples) + sum(chosen.left_out.values()) == 62
    assert [s.call for _, s in chosen.samples] == sorted(s.call for _, s in chosen.samples)
    assert chosen.samples[0][1].call == 0 and chosen.samples[-1][1].call == 61  # spread over the calls


def test_a_given_bound_is_hard_and_says_what_would_keep_sixteen() -> None:
    pages = [page(i, nbytes=MB + 1000 * i) for i in range(62)]
    hard = choose_samples(standalone(pages), Caps.hard(max_bytes=8 * MB))
    assert hard.kept_units < MIN_UNITS and sum(s.nbytes for _, s in hard.samples) <= 8 * MB
    assert hard.left_out == {BYTE_CAP: 62 - len(hard.samples)}
    assert 16 * MB < hard.for_units < 16 * MB + 62_000 * MIN_UNITS  # the first 16 units of the spread
    enough = choose_samples(standalone(pages), Caps.hard(max_bytes=hard.for_units))
    assert enough.kept_units == MIN_UNITS and sum(s.nbytes for _, s in enough.samples) <= hard.for_units


def test_units_come_before_more_samples_of_one_unit() -> None:
    units = [("test:a", [page(i) for i in range(64)]), ("test:b", [page(100)])]
    chosen = choose_samples(units, Caps.hard(samples=4, max_bytes=100 * MB))
    assert {label for label, _ in chosen.samples} == {"test:a", "test:b"}
    assert chosen.left_out == {SAMPLE_CAP: 61}


def test_the_memory_bound_holds_what_a_build_loads() -> None:
    pages = [page(i, nbytes=1000, decoded=40 * MB) for i in range(30)]
    chosen = choose_samples(standalone(pages), Caps(memory=512 * MB))
    assert len(chosen.samples) == 12 and chosen.left_out == {MEMORY_CAP: 18}
    assert Caps(memory=512 * MB).feed_memory == 32 * MB  # a single feed may take a sixteenth


def _log(feeds: list[np.ndarray], caps: Caps, unit: str = "") -> ModelLog:
    log = ModelLog("a" * 64, "/abs/m.onnx", ("x",), caps)
    for feed in feeds:
        log.observe({"x": feed}, ALONE, unit, False)
    return log


def test_merge_counts_every_call_it_did_not_keep() -> None:
    """24 calls: one repeats another's feed, one is over what a feed may take; the skipped counts and
    the samples add up to the calls."""
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(22)]
    feeds.insert(5, feeds[3].copy())
    feeds.append(rng.standard_normal((1, 300_000)).astype(np.float32))  # 1.2 MB of noise: over a 1 MB cap
    caps = Caps.hard(samples=256, max_bytes=MB)
    merged = merge([Part(*part_of(_log(feeds, caps)))], caps, Path("/abs"))
    assert merged.meta["calls"] == 24 and merged.meta["samples"] == 22
    assert dict(merged.meta["skipped"]) == {"repeating a kept feed": 1, "over the byte cap": 1}
    assert merged.meta["model"] == "m.onnx"


def test_merge_counts_what_the_caps_left_out_across_processes() -> None:
    rng = np.random.default_rng(1)
    caps = Caps.hard(samples=10, max_bytes=MB)
    parts = []
    for p in range(3):  # three processes, the same first feed in each
        feeds = [np.zeros((1, 64), np.float32)] + [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(29)]
        parts.append(Part(*part_of(_log(feeds, caps, unit=f"test:t{p}"))))
    merged = merge(parts, caps, Path("/abs"))
    skipped = dict(merged.meta["skipped"])
    assert merged.meta["calls"] == 90 and merged.meta["samples"] == 10
    assert skipped == {"repeating a kept feed": 2, SAMPLE_CAP: 78}
    assert len(set(merged.meta["units"])) == 3  # every test kept


def test_merge_is_independent_of_the_order_of_the_parts() -> None:
    rng = np.random.default_rng(2)
    caps = Caps.hard(samples=8, max_bytes=MB)
    parts = [Part(*part_of(_log([rng.standard_normal((1, 64)).astype(np.float32) for _ in range(9)], caps,
                                unit=f"test:t{p}"))) for p in range(3)]
    one, other = merge(parts, caps, Path("/abs")), merge(parts[::-1], caps, Path("/abs"))
    assert one.meta == other.meta and one.samples == other.samples
