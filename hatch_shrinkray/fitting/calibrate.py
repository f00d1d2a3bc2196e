"""One model's calibration runs: the eligible float32 weights, how each reads its activations, and
the activations' second moments, the data every fitted choice (int8's output-aware rounding,
``auto``'s candidates) is made on; and the refusal to fit where there is no real input to fit to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.fitting.calib import Layout, Moments, layout, patches, rows_per_sample
from hatch_shrinkray.fitting.probe import Probe, site_key, weights_as_inputs
from hatch_shrinkray.hints import record_hint
from hatch_shrinkray.onnxgraph.graph import Site, find_sites
from hatch_shrinkray.onnxgraph.rewrite import skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.samples import Calibration, Feed, as_calibration

FLOAT32 = 1
Key = tuple[str, str]

@dataclass
class Calibrated:
    """Calibration runs of one model: the eligible float32 weights, how each reads its activations,
    and the activations' second moments (what output-aware rounding minimises against)."""

    sites: list[Site]
    lays: dict[Key, Layout | None]
    probe: Probe
    base: list[list[npt.NDArray[Any]]]
    """The model's outputs on each calibration feed, with the original weights (streams in closed loop)."""
    moments: dict[Key, tuple[npt.NDArray[np.float64], int]]
    """Per weight: the mean ``x x^T`` over every calibration row, and the rows seen."""
    folds: list[list[int]] = field(default_factory=list)
    """With cross-fitting: the feed indices of each fold (whole units)."""
    fold_sums: list[dict[Key, tuple[npt.NDArray[np.float64], int]]] = field(default_factory=list)
    """Per fold: each weight's sum of ``x x^T`` over the fold's rows, and the rows."""

    def moments_without(self, fold: int) -> dict[Key, tuple[npt.NDArray[np.float64], int]]:
        """The moments of every fold but ``fold``: what a fit that must not see ``fold`` uses."""
        out: dict[Key, tuple[npt.NDArray[np.float64], int]] = {}
        for f, sums in enumerate(self.fold_sums):
            if f == fold:
                continue
            for key, (h, n) in sums.items():
                if key in out:
                    out[key] = (out[key][0] + h, out[key][1] + n)
                else:
                    out[key] = (h.copy(), n)
        return {k: (h / n, n) for k, (h, n) in out.items() if n > 0}


def calibrate(model: ModelProto, options: ShrinkOptions, samples: Calibration | Sequence[Feed], *,
              weights_as_feeds: bool, folds: int = 1, also: Callable[[Site], bool] | None = None) -> Calibrated | None:
    """Run the calibration feeds through a probe copy of ``model`` that exposes the activations
    feeding every MatMul/Gemm/Conv weight (and, with ``weights_as_feeds``, takes the weights as
    inputs so that any mix of encodings can be evaluated without a new session). With ``folds`` > 1
    the moments are also summed per fold of units, for cross-fitting. ``also``: float32 weights that
    take part though ``options`` leaves them out (``auto``'s small weights). None: no float32 weight
    qualifies."""
    calibration = as_calibration(samples)
    sites = [s for s in find_sites(model) if s.dtype == FLOAT32 and (skip_reason(s, options) is None
                                                                  or (also is not None and also(s)))]
    if not sites:
        return None
    main_names = {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output}
    lays = {site_key(s): _layout(s, main_names) for s in sites}
    # Every consumer's activation: a weight shared by several MatMuls (dedup) sums their moments.
    capture = sorted({la.activation for s in sites if lays[site_key(s)] is not None for n, i in s.consumers
                      if (la := layout(n, i, s.shape)) is not None})
    originals = {site_key(s): s.array() for s in sites} if weights_as_feeds else {}
    probe = Probe(weights_as_inputs(model, set(originals), capture), list(calibration.feeds), originals,
                  calibration.seq)
    split = calibration.seq.folds(folds) if folds > 1 else [list(range(len(calibration.feeds)))]
    base, sums = _moments(sites, lays, probe, {i: f for f, members in enumerate(split) for i in members}, len(split))
    moments: dict[Key, tuple[npt.NDArray[np.float64], int]] = {}
    for fold_sums in sums:
        for key, (h, n) in fold_sums.items():
            moments[key] = (moments[key][0] + h, moments[key][1] + n) if key in moments else (h.copy(), n)
    moments = {k: (h / n, n) for k, (h, n) in moments.items() if n > 0}
    return Calibrated(sites, lays, probe, base, moments, split if folds > 1 else [], sums if folds > 1 else [])


def needs_real_inputs(method: str) -> ShrinkrayError:
    """Noise calibrates to noise (a fit to it can ruin the real answers, docs/recording.md): the user
    records real inputs instead, as their interface says it."""
    return ShrinkrayError(f"method {method} fits its choices to real inputs, and there are none: {record_hint()}")


def _layout(site: Site, main_names: set[str]) -> Layout | None:
    """One layout shared by all consumers whose activations the main graph exposes, else None."""
    if site.scope.parent is not None or not site.consumers:
        return None
    lays = [layout(n, i, site.shape) for n, i in site.consumers]
    first = lays[0]
    if first is None or any(la is None or la.transpose != first.transpose or la.groups != first.groups
                            or la.node.op_type != first.node.op_type for la in lays):
        return None
    return None if any(la is not None and la.activation not in main_names for la in lays) else first


def _moments(sites: list[Site], lays: dict[Key, Layout | None], probe: Probe, fold_of: dict[int, int],
             folds: int) -> tuple[list[list[npt.NDArray[Any]]], list[dict[Key, tuple[npt.NDArray[np.float64], int]]]]:
    """The model outputs of every calibration feed, and per fold the activation second moments of
    each weight (summed over its consumers and the fold's feeds, with the rows counted)."""
    if not probe.probe.captured:  # no activation to sum (weights inside subgraphs): the outputs, streams side by side
        return probe.run(), [{} for _ in range(folds)]
    index = {name: i for i, name in enumerate(probe.probe.captured)}
    acc: list[dict[Key, Moments]] = [{key: Moments() for key, lay in lays.items() if lay is not None}
                                     for _ in range(folds)]
    broken: set[Key] = set()
    base: list[list[npt.NDArray[Any]]] = [[] for _ in probe.feeds]
    for i, outs, caps in probe.captures():
        base[i] = outs
        fold = acc[fold_of.get(i, 0)]
        for site in sites:
            key = site_key(site)
            if key not in fold or key in broken:
                continue
            for node, idx in site.consumers:
                la = layout(node, idx, site.shape)
                p = None if la is None or la.activation not in index else patches(
                    np.asarray(caps[index[la.activation]]), la, site.shape,
                    rows_per_sample(la, site.shape, len(probe.feeds)))
                if p is None:
                    broken.add(key)
                    break
                fold[key].add(p)
    for fold in acc:
        for m in fold.values():
            m.flush()
    sums = [{k: (m.h, m.count) for k, m in fold.items() if k not in broken and m.h is not None and m.count > 0}
            for fold in acc]
    return base, sums
