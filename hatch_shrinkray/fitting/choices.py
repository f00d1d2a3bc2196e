"""Tensors whose encoding is chosen by name (``encodings``) or by a plan ``hatch-shrinkray check
--search`` found: each gets exactly that encoding, whatever the method does with the others.

The chosen tensors are encoded first; every tensor this pass stores is then out of the method's
reach (``fresh_names``), so nothing is encoded twice. Integer widths other than int8 round to
nearest (like ``auto``'s rungs without calibration), so a plan's result depends only on the model
and the plan, never on the verification inputs. ``Planned`` is the same hook for a fitted plan
(``auto``'s, or int8's output-aware rounding): each planned weight gets its decode, the rest a fallback.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.encodings._decode import float_decode
from hatch_shrinkray.encodings.fp16 import Fp16Encoder
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.fitting.candidates import int_candidate
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.numerics.quant import quantize_symmetric
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext, TensorEncoder
from hatch_shrinkray.onnxgraph.graph import Site, find_sites
from hatch_shrinkray.onnxgraph.rewrite import encode_weights, planned_encoding, skip_reason
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord

Key = tuple[str, str]
FLOAT32 = 1


def encode_as(encoding: str, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
    """One tensor in one of ``options.ENCODINGS`` (not ``float32``: that one is simply kept)."""
    if encoding == "fp16":
        return Fp16Encoder().encode(w, ctx)
    if encoding == "int8":
        return Int8Encoder().encode(w, ctx)
    bits = int(encoding.removeprefix("int"))
    if bits == 16:
        q = quantize_symmetric(w, ctx.axis, 16)
        return float_decode(q, w.dtype, ctx.opset, f"int16 {'per-tensor' if ctx.axis is None else f'axis {ctx.axis}'}")
    cand = int_candidate(w.astype(np.float32), ctx, None, None, bits=bits)
    assert cand.decode is not None  # without moments it is the round-to-nearest decode
    return cand.decode


class _Chosen:
    """``encode_weights``' encoder for the chosen sites: ``select`` says which one comes next."""

    def __init__(self, chosen: dict[Key, str]) -> None:
        self.chosen = chosen
        self.current = ""

    def select(self, site: Site) -> bool:
        self.current = self.chosen.get(site_key(site), "")
        return bool(self.current)

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        return encode_as(self.current, w, ctx)


class Planned:
    """An encoder that returns the decode planned for the site ``select`` just announced.

    ``encode_weights`` calls ``select(site)`` and then ``encode`` for that same site, so the
    selection hook tells the encoder which weight it is about to see (the encoder interface only
    passes the array). Weights outside the plan get ``fallback``; float32 ones only with
    ``fallback_float32`` (``auto`` plans every float32 weight it keeps, so the rest stay float32).
    """

    def __init__(self, plan: dict[Key, Decode], fallback: TensorEncoder, *, fallback_float32: bool) -> None:
        self.plan = plan
        self.fallback = fallback
        self.fallback_float32 = fallback_float32
        self.current: Key | None = None

    def select(self, site: Site) -> bool:
        key = site_key(site)
        if key in self.plan:
            self.current = key
            return True
        self.current = None
        return self.fallback_float32 or site.dtype != FLOAT32  # other float types: plain int8

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        return self.fallback.encode(w, ctx) if self.current is None else self.plan[self.current]


def chosen_sites(model: ModelProto, options: ShrinkOptions) -> dict[Key, str]:
    """Eligible tensors with an encoding of their own (``float32`` ones excluded: they are kept)."""
    out = {}
    free = _unchosen(options)
    for site in find_sites(model):
        if skip_reason(site, free) is not None:
            continue
        encoding = planned_encoding(site, options)
        if encoding is not None and encoding != "float32":
            out[site_key(site)] = encoding
    return out


def encode_chosen(model: ModelProto, options: ShrinkOptions) -> tuple[list[TensorRecord], frozenset[str]]:
    """Encode the chosen tensors in place: their records, and the names of every tensor this pass
    stored (the method must leave those alone)."""
    chosen = chosen_sites(model, options)
    if not chosen:
        return [], frozenset()
    before = _tensor_names(model)
    enc = _Chosen(chosen)
    records = encode_weights(model, enc, _unchosen(options), select=enc.select)
    mine = [r for r in records if (r.scope, r.name) in chosen]
    noted = [r if r.encoding == "kept" else _note(r, "chosen by the plan or `encodings`") for r in mine]
    return noted, frozenset(_tensor_names(model) - before)


def _unchosen(options: ShrinkOptions) -> ShrinkOptions:
    return replace(options, encodings=(), plan=())


def _note(record: TensorRecord, note: str) -> TensorRecord:
    return replace(record, note=f"{record.note}; {note}" if record.note else note)


def _tensor_names(model: ModelProto) -> set[str]:
    return {s.name for s in find_sites(model)}
