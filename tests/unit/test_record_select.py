"""What a recording keeps, as pure functions: ``select.choose_samples`` (units before bytes per
unit, hard and default bounds, the memory bound), ``select.choose_streams`` (whole streams, cut at a
common water level) and ``merge.merge`` fed by the recorder's own logs (every call not kept is
counted with its reason), without processes or files. ``test_record_merge`` tests ``merge`` alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hatch_shrinkray.capture.recorder import ModelLog, part_of
from hatch_shrinkray.capture.streams import Step
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.merge import Part, merge
from hatch_shrinkray.recording.npz import pack
from hatch_shrinkray.recording.select import (
    BYTE_CAP,
    MEMORY_CAP,
    MIN_STREAMS,
    SAMPLE_CAP,
    Sample,
    Stream,
    choose_samples,
    choose_streams,
    round_robin,
    spreading,
)

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
    assert merged.meta.calls == 24 and merged.meta.samples == 22
    assert dict(merged.meta.skipped) == {"repeating a kept feed": 1, "over the byte cap": 1}
    assert merged.meta.model == "m.onnx"


def test_merge_counts_what_the_caps_left_out_across_processes() -> None:
    rng = np.random.default_rng(1)
    caps = Caps.hard(samples=10, max_bytes=MB)
    parts = []
    for p in range(3):  # three processes, the same first feed in each
        feeds = [np.zeros((1, 64), np.float32)] + [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(29)]
        parts.append(Part(*part_of(_log(feeds, caps, unit=f"test:t{p}"))))
    merged = merge(parts, caps, Path("/abs"))
    skipped = dict(merged.meta.skipped)
    assert merged.meta.calls == 90 and merged.meta.samples == 10
    assert skipped == {"repeating a kept feed": 2, SAMPLE_CAP: 78}
    assert len(set(merged.meta.units)) == 3  # every test kept


def test_merge_is_independent_of_the_order_of_the_parts() -> None:
    rng = np.random.default_rng(2)
    caps = Caps.hard(samples=8, max_bytes=MB)
    parts = [Part(*part_of(_log([rng.standard_normal((1, 64)).astype(np.float32) for _ in range(9)], caps,
                                unit=f"test:t{p}"))) for p in range(3)]
    one, other = merge(parts, caps, Path("/abs")), merge(parts[::-1], caps, Path("/abs"))
    assert one.meta == other.meta and one.samples == other.samples


@pytest.mark.parametrize(("n", "order"), [(0, []), (1, [0]), (2, [0, 1]), (3, [0, 2, 1]), (5, [0, 4, 2, 1, 3]),
                                          (9, [0, 8, 4, 2, 6, 1, 3, 5, 7])])
def test_spreading_is_first_last_middle_then_quarters(n: int, order: list[int]) -> None:
    assert spreading(n) == order


@pytest.mark.parametrize("n", range(40))
def test_spreading_visits_every_index_once(n: int) -> None:
    assert sorted(spreading(n)) == list(range(n))


def test_round_robin_takes_one_of_each_group_per_round() -> None:
    groups = [["a0", "a1", "a2"], ["b0"], ["c0", "c1"]]
    assert round_robin(groups) == ["a0", "c0", "b0", "a2", "c1", "a1"]
    assert round_robin([]) == []


def test_standalone_calls_are_each_their_own_unit() -> None:
    chosen = choose_samples(standalone([page(3), page(7)]), Caps())
    assert chosen.samples == [("call:3", page(3)), ("call:7", page(7))]
    assert (chosen.units, chosen.kept_units, chosen.left_out) == (2, 2, {})


def test_units_without_samples_are_not_units() -> None:
    chosen = choose_samples([("test:a", []), ("test:b", [page(1)]), ("", [])], Caps())
    assert chosen.units == 1 and chosen.samples == [("test:b", page(1))]


def test_the_choice_is_in_call_order_whatever_the_order_of_the_units() -> None:
    units = [("test:late", [page(9), page(10)]), ("test:early", [page(1), page(2)])]
    chosen = choose_samples(units, Caps.hard(samples=3, max_bytes=100 * MB))
    assert [s.call for _, s in chosen.samples] == sorted(s.call for _, s in chosen.samples)
    assert {label for label, _ in chosen.samples} == {"test:late", "test:early"}


def test_a_large_feed_is_left_out_and_the_small_ones_after_it_are_kept() -> None:
    pages = [page(0, nbytes=MB), page(1, nbytes=6 * MB), page(2, nbytes=MB), page(3, nbytes=MB)]
    chosen = choose_samples(standalone(pages), Caps.hard(max_bytes=4 * MB))
    assert [s.call for _, s in chosen.samples] == [0, 2, 3]
    assert chosen.left_out == {BYTE_CAP: 1}


def test_bytes_for_min_units_are_estimated_from_the_average_of_fewer_units() -> None:
    chosen = choose_samples(standalone([page(0, nbytes=1000), page(1, nbytes=3000)]), Caps())
    assert chosen.for_units == 2000 * MIN_UNITS
    assert choose_samples([], Caps()).for_units == 0


def test_the_byte_bound_grows_to_what_min_units_take_up_to_the_ceiling() -> None:
    caps = Caps(bytes=100, ceiling=1000)
    assert caps.byte_bound([1] * MIN_UNITS) == 100  # the target holds them
    assert caps.byte_bound([50] * (MIN_UNITS + 4)) == 50 * MIN_UNITS  # the smallest MIN_UNITS
    assert caps.byte_bound([100] * MIN_UNITS) == 1000  # up to the ceiling
    assert Caps.hard(max_bytes=10).byte_bound([100] * MIN_UNITS) == 10  # a given bound is hard
    assert Caps(bytes=10, ceiling=1600).feed_bytes == 100 and Caps.hard(max_bytes=10).feed_bytes == 10


def stream(first: int, steps: int, nbytes: int = 100, group: str = "") -> Stream:
    return Stream(group, tuple(page(first + k, nbytes=nbytes, decoded=nbytes) for k in range(steps)), steps)


def test_streams_that_fit_are_kept_whole_in_the_order_they_started() -> None:
    streams = [stream(100, 3), stream(0, 4), stream(50, 2)]
    chosen = choose_streams(streams, Caps.hard(max_bytes=10 * MB))
    assert [s.steps[0].call for s in chosen] == [0, 50, 100]
    assert [len(s.steps) for s in chosen] == [4, 2, 3]


def test_the_first_streams_share_the_budget_at_one_water_level() -> None:
    """Two streams of 10 steps in 1000 bytes: each cut to 5 steps, not the first whole and the second empty."""
    chosen = choose_streams([stream(0, 10), stream(10, 10)], Caps.hard(max_bytes=1000))
    assert [len(s.steps) for s in chosen] == [5, 5]
    assert [s.ran for s in chosen] == [10, 10]


def test_at_most_max_samples_streams() -> None:
    chosen = choose_streams([stream(10 * k, 2) for k in range(5)], Caps.hard(samples=3, max_bytes=MB))
    assert len(chosen) == 3


def test_streams_beyond_the_first_are_added_while_the_budget_allows() -> None:
    streams = [stream(10 * k, 1) for k in range(MIN_STREAMS + 4)]
    chosen = choose_streams(streams, Caps.hard(max_bytes=100 * (MIN_STREAMS + 2)))
    assert len(chosen) == MIN_STREAMS + 2


def test_the_memory_bound_cuts_streams_too() -> None:
    chosen = choose_streams([stream(0, 10)], Caps.hard(max_bytes=MB, memory=350))
    assert [len(s.steps) for s in chosen] == [3]


SCALE = 10
"""The default caps and the pages, both a tenth (the rules are the same at any scale; a tenth runs in seconds)."""
SMALL = Caps(Caps().samples, Caps().bytes // SCALE, Caps().ceiling // SCALE, Caps().memory // SCALE)


def recorded(sizes: list[tuple[int, int]], unit: object = None) -> tuple[int, object]:
    """What ``merge`` keeps of a process that called a detector once per page of these ``(height,
    width)`` (random pixels of an 8-bit image: about one stored byte each), outside tests or, with
    ``unit(i)``, in the pytest test it names, under the default caps at a tenth; the kept units and
    the merged recording."""
    rng = np.random.default_rng(0)
    log = ModelLog("d" * 64, "/p/det.onnx", ("x",), caps=SMALL)
    for i, (h, w) in enumerate(sizes):
        image = (rng.integers(0, 256, (1, 3, h, w)) / 255).astype(np.float32)
        log.observe({"x": image}, Step(i, 0, ()), unit(i) if callable(unit) else "", False)
    meta, samples = part_of(log)
    merged = merge([Part(meta, samples)], SMALL, Path("/p"))
    return len(set(merged.meta.units)), merged


def pages_of(count: int, largest: int, seed: int = 1) -> list[tuple[int, int]]:
    """Pages of uneven sizes, up to ``largest`` pixels a side at full scale (stored bytes vary tenfold)."""
    rng = np.random.default_rng(seed)
    side = round(largest / SCALE ** 0.5)
    return [(int(rng.integers(side // 3, side)), int(rng.integers(side // 3, side))) for _ in range(count)]


@pytest.mark.parametrize(("calls", "largest"), [(16, 900), (51, 900), (62, 900), (51, 1600), (300, 900)])
def test_a_script_that_calls_a_model_sixteen_times_or_more_keeps_sixteen_units(calls: int, largest: int) -> None:
    """Pages of uneven size outside tests (a script): the process thinned its candidates by halves and
    kept 13 of 51 (the bound never reached; the default caps could keep 16). Thinning that drops units
    now stops at twice what evidence needs, unless the memory held passes twice the byte ceiling."""
    units, merged = recorded(pages_of(calls, largest))
    assert units >= MIN_UNITS, (units, merged.meta.skipped)
    assert merged.short is None


@pytest.mark.parametrize("calls", [16, 51])
def test_tests_that_call_a_model_keep_sixteen_units_whatever_drives_them(calls: int) -> None:
    units, merged = recorded(pages_of(calls, 1200), unit=lambda i: f"test:tests/test_pages.py::test_page[{i}]")
    assert units >= MIN_UNITS, (units, merged.meta.skipped)
    assert merged.short is None


def test_where_the_ceiling_stops_it_the_recording_says_which_bound_and_what_keeps_sixteen() -> None:
    """Pages of about 6 MB stored at full scale: 16 take more than the 64 MB the default bound grows to."""
    side = round(2000 / SCALE ** 0.5)
    units, merged = recorded([(side, side // 2 + i) for i in range(20)])
    assert units < MIN_UNITS
    assert merged.short is not None
    kept, ran, bound, needed = merged.short
    assert (kept, ran, bound) == (units, 20, "--max-bytes") and needed > SMALL.ceiling
    assert dict(merged.meta.skipped)[BYTE_CAP] == 20 - units


def test_where_the_memory_bound_stops_it_the_recording_names_it_and_what_keeps_sixteen() -> None:
    """Pages that compress well in the file but take much once loaded: --max-memory stops it."""
    side = round(1600 / SCALE ** 0.5)
    rng = np.random.default_rng(0)
    log = ModelLog("d" * 64, "/p/det.onnx", ("x",), caps=SMALL)
    for i in range(20):
        image = np.full((1, 3, side, side + i), i / 255, np.float32)  # one value: a few bytes stored
        image[0, 0, 0, 0] = rng.random()
        log.observe({"x": image}, Step(i, 0, ()), "", False)
    meta, samples = part_of(log)
    memory = 16 * samples[0].decoded // 2  # about eight pages' worth
    merged = merge([Part(meta, samples)], dataclasses.replace(SMALL, memory=memory), Path("/p"))
    assert merged.short is not None
    kept, ran, bound, needed = merged.short
    assert (ran, bound) == (20, "--max-memory") and kept < MIN_UNITS and needed > memory
