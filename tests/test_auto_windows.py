"""``auto`` measures and searches a model returning maps on windows of its large recorded pages."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from hatch_shrinkray.fitting.probe import Probe, weights_as_inputs
from hatch_shrinkray.fitting.windows import on_windows, windows
from hatch_shrinkray.samples import Sequencing

from onnx_builders import init, model, run, vi, weight


def detector(sides: list[Any] | None = None, *, extra: list[int] | None = None) -> onnx.ModelProto:
    """x[1,3,H,W] -> Conv 3x3 -> Relu -> Conv 3x3 -> Sigmoid -> map[1,1,H,W] (a text detector's shape)."""
    h, w = sides or ["h", "w"]
    nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c2"], ["map"])]
    outputs = [vi("map", [1, 1, h, w])]
    inits = [init("W1", weight((8, 3, 3, 3), 1)), init("W2", weight((1, 8, 3, 3), 2))]
    if extra is not None:  # a second output the program sizes for its full pages (a fixed Reshape)
        nodes.append(helper.make_node("Reshape", ["x", "fixed"], ["flat"]))
        inits.append(init("fixed", np.array(extra, dtype=np.int64)))
        outputs.append(vi("flat", [None, None]))
    return model(nodes, [vi("x", [1, 3, h, w])], outputs, inits)


def page(height: int, width: int, *, top: int, left: int, seed: int = 0) -> np.ndarray:
    """A flat page with text-like content (noise) in one window of half its sides."""
    a = np.full((1, 3, height, width), 0.5, np.float32)
    r = np.random.default_rng(seed)
    a[:, :, top:top + height // 2, left:left + width // 2] = r.random((1, 3, height // 2, width // 2))
    return a


def test_a_large_page_is_cut_to_the_window_holding_its_content() -> None:
    m = detector()
    x = page(768, 640, top=384, left=320)
    got = windows(m, [{"x": x}], [run(m, {"x": x})])
    assert got is not None
    assert got[0]["x"].shape == (1, 3, 384, 320)
    np.testing.assert_array_equal(got[0]["x"], x[:, :, 384:, 320:])


def test_window_sides_keep_the_power_of_two_every_recorded_side_has() -> None:
    m = detector()
    feeds = [{"x": page(736, 928, top=0, left=0)}, {"x": page(768, 640, top=0, left=0)}]
    got = windows(m, feeds, [run(m, f) for f in feeds])
    assert got is not None
    assert [f["x"].shape[2:] for f in got] == [(352, 448), (384, 320)]  # multiples of 32


def test_small_pages_fixed_sides_and_outputs_that_are_no_maps_keep_the_full_feeds() -> None:
    free = detector()
    small = {"x": page(256, 256, top=0, left=0)}
    assert windows(free, [small], [run(free, small)]) is None
    fixed = detector([768, 640])
    large = {"x": page(768, 640, top=0, left=0)}
    assert windows(fixed, [large], [run(fixed, large)]) is None
    assert windows(free, [large], [[np.zeros((1, 10), np.float32)]]) is None  # a vector, not a map


def test_the_search_runs_the_original_on_the_windows_and_the_full_feeds_stay() -> None:
    m = detector()
    feeds = [{"x": page(768, 640, top=0, left=0, seed=s)} for s in range(3)]
    probe = Probe(weights_as_inputs(m, set()), feeds, {}, Sequencing.plain(3))
    got = on_windows(m, probe, probe.run())
    assert got is not None
    screen, outputs = got
    assert [o[0].shape for o in outputs] == [(1, 1, 384, 320)] * 3
    np.testing.assert_allclose(outputs[1][0], run(m, {"x": feeds[1]["x"][:, :, :384, :320]})[0], rtol=1e-6)
    assert probe.feeds is feeds and probe.feeds[0]["x"].shape == (1, 3, 768, 640)
    assert [f["x"].shape for f in screen.feeds] == [(1, 3, 384, 320)] * 3


def test_a_model_that_does_not_run_on_windows_is_searched_on_the_full_feeds() -> None:
    m = detector(extra=[1, 3 * 768 * 640])
    feeds = [{"x": page(768, 640, top=0, left=0)}]
    probe = Probe(weights_as_inputs(m, set()), feeds, {}, Sequencing.plain(1))
    assert on_windows(m, probe, probe.run()) is None
