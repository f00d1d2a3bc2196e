"""Windows of large image feeds, on which ``auto`` measures and searches a model that returns maps.

A text detector's recorded pages are whole images (``1x3x736x928`` and larger) and its outputs maps
of the same size: every single-tensor run and every point of the search runs the full page, and
the search tries dozens of points. Each of those runs only compares a candidate with the original
on the same input, so it needs inputs of the kind the program makes, not the full pages: a window
of each page (half its height and width, where the page holds most content) takes a quarter of the
time and keeps every recorded unit. The plan is then judged where it counts, at full size: the
guard runs it and round-to-nearest int8 on the held-out half as recorded, and verification runs
after it there.

A feed is windowed only where the model declares the input's two last axes free (any size runs),
the recording holds more than ``MIN_POSITIONS`` positions in them, and the original's outputs on
it include a map as large as a sixteenth of them; window sides keep the largest power of two (up
to ``MAX_ALIGN``) that divides every recorded side, as a network with strided stages requires.
Where the original does not run on the windows, the full feeds are used.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.fitting.probe import Probe
from hatch_shrinkray.samples import Feed

LOG = logging.getLogger("hatch_shrinkray.auto")
MIN_POSITIONS = 1 << 18
"""Height x width (of one feed's image input) above which the search runs on a window of it."""
MAP_SHARE = 16
"""An output is a map of the input when it holds at least this fraction (1/16) of its positions."""
MAX_ALIGN = 64


def free_image_inputs(model: ModelProto) -> set[str]:
    """The model's 4-D inputs whose last two axes have no fixed size."""
    out = set()
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 4 and all(not d.HasField("dim_value") for d in dims[2:]):
            out.add(value.name)
    return out


def _align(sides: Sequence[int]) -> int:
    """The largest power of two, up to ``MAX_ALIGN``, that divides every side."""
    align = MAX_ALIGN
    while align > 1 and any(s % align for s in sides):
        align //= 2
    return align


def _window(array: npt.NDArray[Any], align: int) -> npt.NDArray[Any] | None:
    """Half the height and width of ``array`` (``N, C, H, W``), multiples of ``align``, at the one of
    nine places (corners, edge middles, centre) where the values vary most; None: not smaller."""
    height, width = array.shape[2], array.shape[3]
    h, w = max(align, height // 2 // align * align), max(align, width // 2 // align * align)
    if h * w >= height * width:
        return None
    best: tuple[float, int, int] | None = None
    for top in dict.fromkeys((0, (height - h) // 2, height - h)):
        for left in dict.fromkeys((0, (width - w) // 2, width - w)):
            spread = float(np.var(array[:, :, top:top + h, left:left + w], dtype=np.float64))
            if best is None or spread > best[0]:
                best = (spread, top, left)
    assert best is not None
    _, top, left = best
    return np.ascontiguousarray(array[:, :, top:top + h, left:left + w])


def windows(model: ModelProto, feeds: Sequence[Feed],
            outputs: Sequence[Sequence[npt.NDArray[Any]]]) -> list[Feed] | None:
    """Each feed with its one large image input cut to a window (``MIN_POSITIONS``), the others as
    they are; None when no feed has a large image input whose outputs are maps."""
    free = free_image_inputs(model)
    named = {name for feed in feeds for name, a in feed.items() if name in free and np.asarray(a).ndim == 4}
    if len(named) != 1:
        return None
    (name,) = named
    align = _align([side for feed in feeds if name in feed for side in np.asarray(feed[name]).shape[2:]])
    out: list[Feed] = []
    cut = 0
    for feed, outs in zip(feeds, outputs, strict=True):
        image = np.asarray(feed.get(name))
        positions = int(np.prod(image.shape[2:])) if image.ndim == 4 else 0
        maps = any(np.asarray(o).ndim >= 3 and np.asarray(o).size * MAP_SHARE >= positions for o in outs)
        window = _window(image, align) if positions > MIN_POSITIONS and maps else None
        if window is None:
            out.append(feed)
            continue
        out.append({**feed, name: window})
        cut += 1
    return out if cut else None


def on_windows(model: ModelProto, probe: Probe,
               base: list[list[npt.NDArray[Any]]]) -> tuple[Probe, list[list[npt.NDArray[Any]]]] | None:
    """``probe`` on windows of its feeds and the original's outputs there; None where no feed is
    large enough, the model is recurrent, or the original does not run on the windows."""
    if probe.seq.recurrent:
        return None
    cut = windows(model, probe.feeds, base)
    if cut is None:
        return None
    screen = probe.on(cut)
    try:
        outputs = screen.run()
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidArgument/... types
        LOG.info("auto: the original does not run on windows of the feeds (%s); searching on the full feeds", exc)
        return None
    LOG.info("auto: measuring and searching on windows of %d feeds (a quarter of their positions)",
             sum(a is not b for a, b in zip(cut, probe.feeds, strict=True)))
    return screen, outputs
