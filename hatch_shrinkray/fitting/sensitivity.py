"""Which weights matter most: each one alone in a given encoding (every other weight original),
and the model's output deviation on real feeds, most harmful first.

This is the single-tensor measure ``auto`` searches with, asked for one encoding only: it names the
tensors to keep when a shrunk model fails (the hint of a failed verification or ``check``) and
orders the escalation of ``check --search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnx import ModelProto

from hatch_shrinkray.fitting.budget import Baseline, Deviation, deviation
from hatch_shrinkray.fitting.choices import encode_as
from hatch_shrinkray.fitting.probe import Probe, site_key, weights_as_inputs
from hatch_shrinkray.hints import setting
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Feed
from hatch_shrinkray.onnxgraph.graph import find_sites, opset_version
from hatch_shrinkray.onnxgraph.rewrite import encode_context, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.samples import Calibration, as_calibration

FLOAT32 = 1
MAX_FEEDS = 8
SHARE_OF_WORST = 0.1
"""The hint names tensors that do at least this share of the worst one's harm."""
MAX_WEIGHTS = 200
"""Single-tensor runs, largest weights first: bounds the cost on models with very many weights."""


@dataclass(frozen=True)
class Sensitive:
    """One weight and what encoding it alone does to the outputs."""

    scope: str
    name: str
    shape: tuple[int, ...]
    nbytes: int
    encoding: str
    deviation: Deviation
    load: float
    """The deviation in units of the accuracy budget (``Deviation.load``): the ranking key."""


def rank(model: ModelProto, options: ShrinkOptions, feeds: Calibration | Sequence[Feed],
         encoding: str | None = None) -> list[Sensitive]:
    """Every eligible float32 weight (up to ``MAX_WEIGHTS``, largest first), most harmful first; on
    ``MAX_FEEDS`` samples spread over ``feeds`` (a recurrent model's streams whole, in closed loop)."""
    encoding = encoding or facts(options.method).ranked
    sites = [s for s in find_sites(model) if s.dtype == FLOAT32 and skip_reason(s, options) is None]
    sites = sorted(sites, key=lambda s: (-s.size, s.scope.path, s.name))[:MAX_WEIGHTS]
    if not sites or not feeds:
        return []
    samples = as_calibration(feeds)
    chosen = samples.seq.spread(MAX_FEEDS)
    originals = {site_key(s): s.array() for s in sites}
    probe = Probe(weights_as_inputs(model, set(originals)), [samples.feeds[i] for i in chosen], originals,
                  samples.seq.subset(chosen))
    base = Baseline(probe.run())  # the original side of every comparison, prepared once
    opset = opset_version(model)
    out = []
    for site in sites:
        try:
            w = originals[site_key(site)]
            decoded = encode_as(encoding, w, encode_context(site, w, options, opset)).decoded  # type: ignore[arg-type]
        except NotEncodable:
            continue
        dev = deviation(base, probe.run({site_key(site): decoded}))
        out.append(Sensitive(site.scope.path, site.name, site.shape, site.size * 4, encoding, dev, dev.load(options)))
    return sorted(out, key=lambda s: (-s.load, -s.nbytes, s.scope, s.name))


def keep_hint(ranked: Sequence[Sensitive], limit: int = 3, *, method: str = "int8") -> str:
    """The most harmful tensors under ``method`` (each measured alone in its encoding) and the config
    lines that would keep them, a line each ('' when none harms)."""
    top = [s for s in ranked if s.load > 0 and s.load >= SHARE_OF_WORST * ranked[0].load][:limit]
    if not top:
        return ""
    shown = ", ".join(f"{s.name} (rel-L2 {s.deviation.rel_l2:.1e}"
                      + (f", agreement {100 * s.deviation.top1:.2f}%)" if s.deviation.decides and s.deviation.top1 < 1
                         else ")") for s in top)
    names = [s.name for s in top]
    return (f"with {method}, these change the outputs most (each alone as {top[0].encoding}): {shown}\n"
            f"keep them float32 with {setting('exclude-tensors', names)}\n"
            f"or fp16 with {setting('encodings', dict.fromkeys(names, 'fp16'))}")
