"""One onnxruntime session in which chosen weights are graph inputs, so any mix of encodings can be
evaluated by feeding decoded arrays, without building a session per candidate.

Building a session costs far more than running a small model on a handful of samples; a search
that tries hundreds of (tensor, encoding) pairs would spend nearly all of its time loading. Each
candidate weight's definition (initializer or ``Constant`` node, at any subgraph depth) becomes an
``Identity`` of a fresh main-graph input, so subgraphs see it through the outer scope as before.
The same model can also expose the activations that feed each weight's consumer (main graph only),
which is what the output-error-aware rounding needs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt
import onnx
from onnx import ModelProto, TensorProto, helper

from hatch_shrinkray.numerics.threads import NO_SPINNING, feed_workers
from hatch_shrinkray.onnxgraph.graph import Names, Site, find_sites
from hatch_shrinkray.samples import Feed, Sequencing, run_in_order

Outputs = list[list[npt.NDArray[Any]]]


def site_key(site: Site) -> tuple[str, str]:
    return site.scope.path, site.name


@dataclass(frozen=True)
class ProbeModel:
    """The rewritten model and, per weight key, the main-graph input that now feeds it."""

    model: ModelProto
    inputs: dict[tuple[str, str], str]
    captured: tuple[str, ...]


def weights_as_inputs(model: ModelProto, keys: set[tuple[str, str]],
                      capture: Sequence[str] = ()) -> ProbeModel:
    """A copy of ``model`` where the weights named by ``keys`` are fed, plus main-graph tensors in
    ``capture`` exposed as extra outputs."""
    work = ModelProto()
    work.CopyFrom(model)
    names = Names(work)
    fed: dict[tuple[str, str], str] = {}
    sites = [s for s in find_sites(work) if site_key(s) in keys]
    main = work.graph
    for site in sites:
        tensor = site.tensor
        info = helper.make_tensor_value_info("", tensor.data_type, list(tensor.dims))
        if site.scope.parent is None and site.location == "initializer":
            info.name = site.name
            fed[site_key(site)] = site.name
            _drop_initializer(main, site.name)
            main.input.append(info)
            continue
        fresh = names.fresh(f"shrinkray_probe_{site.name}")
        info.name = fresh
        main.input.append(info)
        fed[site_key(site)] = fresh
        identity = helper.make_node("Identity", [fresh], [site.name], name=names.fresh(f"{fresh}_identity"))
        graph = site.scope.graph
        if site.location == "constant" and site.node is not None:
            site.node.CopyFrom(identity)
        else:
            _drop_initializer(graph, site.name)
            graph.node.insert(0, identity)
    have = {o.name for o in main.output}
    captured = tuple(c for c in dict.fromkeys(capture) if c not in have)
    for name in captured:
        main.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return ProbeModel(work, fed, captured)


def _drop_initializer(graph: onnx.GraphProto, name: str) -> None:
    for i, t in enumerate(graph.initializer):
        if t.name == name:
            del graph.initializer[i]
            return


class Probe:
    """Runs the probe model on fixed feeds with a given set of weight arrays; a recurrent model's
    streams run in closed loop (each step on the state the same weights produced the step before)."""

    def __init__(self, probe: ProbeModel, feeds: list[Feed],
                 originals: dict[tuple[str, str], npt.NDArray[Any]], seq: Sequencing | None = None) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.add_session_config_entry(*NO_SPINNING)
        self.workers = feed_workers(len(feeds))
        if self.workers > 1:
            opts.intra_op_num_threads = 1
        self.probe = probe
        self.session = ort.InferenceSession(probe.model.SerializeToString(), opts,
                                            providers=["CPUExecutionProvider"])
        self.feeds = feeds
        self.seq = seq or Sequencing.plain(len(feeds))
        self.originals = originals
        self.n_outputs = len(self.session.get_outputs()) - len(probe.captured)
        self.names = [o.name for o in self.session.get_outputs()]
        self.runs = 0

    def on(self, feeds: list[Feed]) -> Probe:
        """This probe's session and weights on other feeds of the same units (``auto.windows``)."""
        other = copy.copy(self)
        other.feeds = feeds
        other.workers = feed_workers(len(feeds))
        return other

    def _weights(self, replace: dict[tuple[str, str], npt.NDArray[Any]] | None) -> dict[str, npt.NDArray[Any]]:
        return {self.probe.inputs[k]: (replace or {}).get(k, w) for k, w in self.originals.items()}

    def run(self, replace: dict[tuple[str, str], npt.NDArray[Any]] | None = None,
            subset: Sequence[int] | None = None) -> Outputs:
        """Model outputs per feed (or per feed of ``subset``, whole streams), with the weights in
        ``replace`` swapped in."""
        weights = self._weights(replace)
        names = self.names[: self.n_outputs]
        self.runs += 1
        indices = list(range(len(self.feeds))) if subset is None else list(subset)
        seq = self.seq.subset(indices)
        feeds = [self.feeds[i] for i in indices]
        return run_in_order(lambda feed: list(self.session.run(names, {**feed, **weights})), feeds, seq, names,
                            self.workers)

    def captures(self) -> Iterator[tuple[int, list[npt.NDArray[Any]], list[npt.NDArray[Any]]]]:
        """Per feed, in the order the program ran them: (index, model outputs, captured tensors) with
        the original weights; one feed at a time so the activations of many samples are never all
        in memory at once. The next feed runs while the caller works on this one."""
        weights = self._weights(None)
        self.runs += 1
        index = {n: k for k, n in enumerate(self.names)}
        starts = {s[0]: s for s in self.seq.streams} if self.seq.feedback else {}
        inside = {i for s in starts.values() for i in s}
        steps = [(j, k > 0) for i in range(len(self.feeds)) if i in starts or i not in inside
                 for k, j in enumerate(starts.get(i, (i,)))]

        def run(j: int, previous: list[npt.NDArray[Any]] | None) -> list[npt.NDArray[Any]]:
            feed = self.feeds[j] if previous is None else {
                **self.feeds[j], **{inp: previous[index[o]] for inp, o in self.seq.feedback}}
            return list(self.session.run(None, {**feed, **weights}))

        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(run, steps[0][0], None) if steps else None
            for n, (j, _) in enumerate(steps):
                assert pending is not None
                got = pending.result()
                if n + 1 < len(steps):
                    after, continues = steps[n + 1]
                    pending = pool.submit(run, after, got if continues else None)
                yield j, got[: self.n_outputs], got[self.n_outputs:]
