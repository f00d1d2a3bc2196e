"""Target ``memory``: weights that stay packed in the running process, where onnxruntime has a kernel
that reads them so, judged against round-to-nearest int8 like every other choice.

Every other encoding is folded back to float32 when the session is created, so a running process
holds the original's weights whatever the file holds. Under ``target = "memory"`` the methods keep
a weight packed where a kernel reads it packed:

* ``int8``: a MatMul or Gemm weight as ``MatMulNBits`` with 8-bit codes, block ``EIGHT_BIT_BLOCK``
  along K, int8 activations (``accuracy_level`` 4: with float activations the 8-bit kernel runs
  several times slower than float32 MatMul); an embedding table stays int8 codes decoded per gathered
  row, as ``int8`` always writes it.
* ``int4``: MatMul and Gemm weights as ``MatMulNBits`` with 4-bit codes (``block-size``, float
  compute: its decoded weight is exactly what it multiplies with), embedding tables as ``GatherBlockQuantized`` 4-bit.
* ``auto``: both, as rungs of its ladder (``candidates``), its search counting each weight's bytes
  in memory (``memory_bytes``) instead of the download's.

Everything else is encoded as the method always does, and decoded to float32 at load: a Conv has
no weight-only kernel on CPU, and the build says what share of the weights stays float.

The ``runtimes`` key decides what may be emitted (``methods.runtimes``: the releases with each
kernel were measured), and the build says in one line what was not (``withheld``). A model never
depends on an optimizer rewrite: the contrib ops are written as such, never as a
``DequantizeLinear`` for onnxruntime to fuse, and they are judged at ``ORT_ENABLE_ALL`` and at
``ORT_DISABLE_ALL``.

Judged (``judge``): with real inputs, the weights packed as planned and the same weights at
round-to-nearest int8 (the rest float32 in both) run on the units the method did not fit on, at
both optimization levels, and the packed ones ship only if they keep at least int8's answers there
(``guard.decide``); otherwise the method runs again for a size target and its weights are float in
memory, and the records say why. An explicit ``int4`` is not held to int8's answers (it is not
today), only to verification's limits.
"""

from __future__ import annotations

import dataclasses
import glob
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import ModelProto

from hatch_shrinkray.encodings.gather_block import GatherBlockEncoder
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.encodings.matmul_nbits import INT8_ACTIVATIONS, MatMulNBitsEncoder
from hatch_shrinkray.fitting.calib import Layout
from hatch_shrinkray.fitting.candidates import Candidate, error_energy
from hatch_shrinkray.fitting.guard import Outcome, Scorer, Unfitted, decide
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.methods import runtimes
from hatch_shrinkray.methods.base import Fitted, Method, Needs
from hatch_shrinkray.methods.int8 import Int8
from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext, TensorEncoder
from hatch_shrinkray.onnxgraph.graph import Site, find_sites
from hatch_shrinkray.onnxgraph.rewrite import consumers_replaceable, encode_weights, rows_decodable, skip_reason
from hatch_shrinkray.options import Remedy, ShrinkOptions
from hatch_shrinkray.result import TensorRecord
from hatch_shrinkray.samples import Calibration
from hatch_shrinkray.verification.memory import NOT_PACKED, packed

MEMORY = "memory"
Key = tuple[str, str]
FLOAT32 = 1

EIGHT_BIT_BLOCK = 32
"""Block size of the 8-bit MatMulNBits codes (and of the kernel's int8 activations): the block the 8-bit kernel runs."""
GATHER_BLOCK = 32
"""Block size of the 4-bit GatherBlockQuantized tables."""
PACKS = ("int8", "int4", "auto")
"""Methods that keep weights packed under the memory target."""
FLOAT_INT8 = Remedy(method="int8", rounding="nearest", target="wheel")
"""The rung below the packed choices on a memory target's ladder: round-to-nearest int8, float in memory
(what every size target writes), before fp16 (``registry.ladder``)."""
JUDGED = ("int8", "auto")
"""Methods whose packed weights must keep round-to-nearest int8's answers (an explicit ``int4`` is
held to verification's limits only, as it always is)."""


def eight_bits() -> MatMulNBitsEncoder:
    return MatMulNBitsEncoder(8, EIGHT_BIT_BLOCK, INT8_ACTIVATIONS)


def four_bits(options: ShrinkOptions) -> MatMulNBitsEncoder:
    return MatMulNBitsEncoder(4, options.block_size)


def gather_four_bits() -> GatherBlockEncoder:
    return GatherBlockEncoder(GATHER_BLOCK)


@dataclasses.dataclass(frozen=True)
class Kernels:
    """Which packed kernels every declared runtime (and the build's onnxruntime, which verifies) has:
    per kernel (``runtimes.PACKED``), why it may not be emitted, None where it may."""

    why: dict[str, str | None]

    @property
    def eight(self) -> bool:
        return self.why["eight"] is None

    @property
    def four(self) -> bool:
        return self.why["four"] is None

    @property
    def gather(self) -> bool:
        return self.why["gather"] is None


def kernels(options: ShrinkOptions) -> Kernels:
    """The packed kernels ``options.runtimes`` and the build's onnxruntime allow."""
    return Kernels(runtimes.packed_kernels(options.runtimes))


def consumer(site: Site) -> str | None:
    """The op a packed kernel would replace for this weight (``MatMul``, ``Gemm``, ``Gather``), or None."""
    if site.dtype != FLOAT32 or len(site.shape) != 2 or not site.consumers:
        return None
    op = site.consumers[0][0].op_type
    return op if op in ("MatMul", "Gemm", "Gather") and consumers_replaceable(site, op) else None


def encoders_for(site: Site, options: ShrinkOptions, found: Kernels) -> list[TensorEncoder]:
    """The packed encodings this weight may get under ``options.method`` (``auto``: every one)."""
    op = consumer(site)
    if op is None or skip_reason(site, options) is not None:
        return []
    out: list[TensorEncoder] = []
    if op in ("MatMul", "Gemm"):
        if found.eight and options.method in ("int8", "auto"):
            out.append(eight_bits())
        if found.four and options.method in ("int4", "auto"):
            out.append(four_bits(options))
    elif found.gather and options.method in ("int4", "auto"):
        out.append(gather_four_bits())
    return out


def plan(model: ModelProto, options: ShrinkOptions) -> dict[Key, TensorEncoder]:
    """Each weight ``int8`` or ``int4`` keeps packed, with its encoding (``auto`` plans its own)."""
    if options.method not in ("int8", "int4"):
        return {}
    found = kernels(options)
    out: dict[Key, TensorEncoder] = {}
    for site in find_sites(model):
        encoders = encoders_for(site, options, found)
        if encoders:
            out[site_key(site)] = encoders[0]
    return out


class _Picked:
    """``encode_weights``' encoder for planned sites (``select`` announces the site)."""

    def __init__(self, picks: dict[Key, TensorEncoder]) -> None:
        self.picks = picks
        self.current: TensorEncoder | None = None

    def select(self, site: Site) -> bool:
        self.current = self.picks.get(site_key(site))
        return self.current is not None

    def encode(self, w: npt.NDArray[np.floating], ctx: EncodeContext) -> Decode:
        assert self.current is not None
        return self.current.encode(w, ctx)


def encode_picks(model: ModelProto, picks: dict[Key, TensorEncoder],
                 options: ShrinkOptions) -> tuple[list[TensorRecord], frozenset[str]]:
    """Encode the picked weights in place: their records, and the names of every tensor stored."""
    if not picks:
        return [], frozenset()
    before = {s.name for s in find_sites(model)}
    enc = _Picked(picks)
    records = [r for r in encode_weights(model, enc, options, select=enc.select) if (r.scope, r.name) in picks]
    return records, frozenset({s.name for s in find_sites(model)} - before)


# --- auto's rungs ---------------------------------------------------------------------------------

def candidates(site: Site, w: npt.NDArray[np.float32], ctx: EncodeContext, options: ShrinkOptions, *,
               moments: npt.NDArray[np.float64] | None, lay: Layout | None) -> list[Candidate]:
    """``auto``'s packed rungs for this weight under the memory target (none under another)."""
    if options.target != MEMORY:
        return []
    out = []
    for enc in encoders_for(site, options, kernels(options)):
        try:
            dec = enc.encode(w, ctx)
        except NotEncodable:
            continue
        kind = dec.label.split(",")[0]  # "MatMulNBits 8-bit": the rung's words; its bits parse from them
        out.append(Candidate(kind, dec.label, dec.stored_bytes, dec.decoded, dec,
                             error_energy(w, dec.decoded, moments, lay)))
    return out


WHEEL_TIE = 64
"""``cost``: a byte of the wheel weighs this much less than a byte of memory."""


def cost(site: Site, c: Candidate) -> int:
    """What ``auto``'s search minimises under the memory target: the candidate's bytes in memory, ties
    (every encoding of a Conv weight is float32 once loaded) going to the smaller wheel. A weight's
    wheel bytes are at most its float32 bytes, so they never outweigh what packing saves."""
    return memory_bytes(site, c) + c.target_bytes("wheel") // WHEEL_TIE


def memory_bytes(site: Site, c: Candidate) -> int:
    """A candidate's bytes in a running process: its stored bytes where a kernel reads them packed
    (or the chain decodes gathered rows), else the weight as float32 (folded at load, or kept)."""
    d = c.decode
    if c.kind == "fp32":
        return site.nbytes
    return c.stored_bytes if d is None or d.replaces or rows_decodable(site, d) else site.nbytes


# --- the judge ------------------------------------------------------------------------------------

LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")
"""What users get by default, and no optimizer rewrite at all: packed weights must hold at both."""


def judge(original: ModelProto, picks: dict[Key, TensorEncoder], units: Calibration, options: ShrinkOptions,
          how: str) -> Outcome:
    """The picked weights packed against the same weights at round-to-nearest int8 (every other
    weight float32 in both), each against the original, on ``units``; the packed ones at both
    optimization levels, the worse of the two counting."""
    from hatch_shrinkray.verification.runner import run_all

    def variant(encoders: dict[Key, TensorEncoder]) -> bytes:
        work = ModelProto()
        work.CopyFrom(original)
        enc = _Picked(encoders)
        encode_weights(work, enc, options, select=enc.select)
        return bytes(work.SerializeToString())

    def outputs(model: bytes, level: str) -> list[list[Any]]:
        return run_all(_session(model, level), list(units.feeds), units.seq, "judging the weights packed in memory")

    reference = original.SerializeToString()
    names = [o.name for o in original.graph.output]
    score = Scorer.of(names, outputs(reference, LEVELS[0]), units.seq, options.verify, units.feeds)
    packed_model = variant(picks)
    worst = max([score(outputs(packed_model, level)) for level in LEVELS], key=lambda s: s.key())
    rtn = score(outputs(variant({k: Int8Encoder() for k in picks}), LEVELS[0]))
    return decide("weights packed in memory", worst, rtn, units.seq.unit_count(), how)


def _session(model: bytes, level: str) -> Any:
    import onnxruntime as ort

    from hatch_shrinkray.numerics.threads import NO_SPINNING

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.add_session_config_entry(*NO_SPINNING)
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


# --- the method, under the memory target ----------------------------------------------------------

class Resident:
    """A method that keeps, under ``target = "memory"``, the weights it can packed in memory (its
    own choice for ``auto``), judged as the module says; under any other target it is the method."""

    def __init__(self, base: Method) -> None:
        self.base = base
        self.name = base.name
        self.size_neutral = base.size_neutral

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        """The method's own rungs, then (target memory) round-to-nearest int8 float in memory."""
        rungs = self.base.ladder(options)
        return (*rungs, FLOAT_INT8) if options.target == MEMORY and self.name in PACKS else rungs

    def floored(self, options: ShrinkOptions) -> bool:
        return self.base.floored(options)

    def needs(self, options: ShrinkOptions) -> Needs:
        needs = self.base.needs(options)
        if options.target == MEMORY and needs.split is None and self.name in JUDGED:
            return dataclasses.replace(needs, split="cross")  # every unit judges data-free packed codes
        return needs

    def fit(self, model: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, original: Scorer | None) -> Fitted:
        if options.target != MEMORY:
            return self.base.fit(model, options, calibration, held, original)
        before = ModelProto()
        before.CopyFrom(model)
        lacking = withheld(model, options)
        picks = plan(model, options)
        records, stored = encode_picks(model, picks, options)
        rest = dataclasses.replace(options, exclude_tensors=(*options.exclude_tensors,
                                                             *(glob.escape(n) for n in sorted(stored))))
        fitted = self.base.fit(model, rest, calibration, held, original)
        records += [r for r in fitted.records if r.name not in stored and (r.scope, r.name) not in picks]
        records = _lacking(records, lacking)
        chosen = {(r.scope, r.name): e for r in records if packed(r) and (e := _encoder_of(r, options)) is not None}
        units = held if held else calibration
        as_int8 = dataclasses.replace(options, method="int8")
        if self.name == "auto" and not chosen and plan(before, as_int8):  # auto shipped its int8 fallback
            model.CopyFrom(before)
            return INT8.fit(model, as_int8, calibration, held, original)
        if self.name not in JUDGED or not chosen or not units:
            why = "" if self.name not in JUDGED or not chosen else \
                "not judged against round-to-nearest int8 (no recorded units to judge on)"
            return Fitted(_noted(records, why, chosen), fitted.outcome)
        outcome = judge(before, chosen, units, options, "the held-out half" if held else "every recorded unit")
        if outcome.kept:
            return Fitted(_noted(records, outcome.text(), chosen), _also(fitted.outcome, outcome.text()))
        model.CopyFrom(before)
        if self.name == "auto":  # int8 keeps its weights packed where that holds, judged in turn
            again = INT8.fit(model, as_int8, calibration, held, original)
            why = f"auto's {_lost(outcome)}; int8 instead"
            return Fitted(_lacking([_note(r, why) for r in again.records], lacking), _after(why, again.outcome))
        again = self.base.fit(model, dataclasses.replace(options, target="wheel"), calibration, held, original)
        why = f"{_lost(outcome)}; float in memory"
        return Fitted(_lacking(_noted(again.records, why, chosen), lacking), _also(again.outcome, why))


INT8 = Resident(Int8())
"""What ``auto`` falls back to under the memory target: int8, keeping its weights packed where that holds."""


def _encoder_of(record: TensorRecord, options: ShrinkOptions) -> TensorEncoder | None:
    """The packed encoder a record names (None: int8 rows, which round-to-nearest int8 itself is)."""
    encoders = (eight_bits(), four_bits(options), gather_four_bits())
    return next((e for e in encoders if record.encoding == e.label()), None)


def _lacking(records: list[TensorRecord], lacking: dict[Key, str]) -> list[TensorRecord]:
    """The records with why no kernel took their weight, where one would have (``withheld``)."""
    return [_note(r, lacking[(r.scope, r.name)]) if (r.scope, r.name) in lacking and not packed(r) else r
            for r in records]


def _note(record: TensorRecord, note: str) -> TensorRecord:
    return dataclasses.replace(record, note=f"{record.note}; {note}".lstrip("; "))


def _noted(records: list[TensorRecord], note: str, chosen: dict[Key, TensorEncoder]) -> list[TensorRecord]:
    return records if not note else [_note(r, note) if (r.scope, r.name) in chosen else r for r in records]


def _lost(outcome: Outcome) -> str:
    """The judge's words for packed weights that lost, without the guard's "(round-to-nearest ships)":
    here the method's own choice for those weights ships, as the words after it say."""
    return outcome.text().replace(" (round-to-nearest ships)", "", 1)


def _after(text: str, outcome: Outcome | Unfitted | None) -> Unfitted:
    """``text``, then what the fallback's own verdict says (its words on the line kept)."""
    return Unfitted(text) if outcome is None else Unfitted(f"{text}: {outcome.text()}", outcome.brief(),
                                                            kept=outcome.kept)


def _also(outcome: Outcome | Unfitted | None, text: str) -> Outcome | Unfitted:
    """The method's own verdict with the judge's words after it (the judge's alone when it has none)."""
    if isinstance(outcome, Outcome):
        return dataclasses.replace(outcome, also="; ".join(p for p in (outcome.also, text) if p))
    if isinstance(outcome, Unfitted):
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {text}")
    return Unfitted(text)


def withheld(model: ModelProto, options: ShrinkOptions) -> dict[Key, str]:
    """Per weight a packed kernel would read but the declared runtimes lack, why it is not emitted
    (empty outside the memory target): the records say it, and the build in one line."""
    if options.target != MEMORY or options.method not in PACKS:
        return {}
    found = kernels(options)
    out: dict[Key, str] = {}
    for site in find_sites(model):
        op = consumer(site)
        if op is None or skip_reason(site, options) is not None:
            continue
        if op == "Gather":
            missing = [] if found.gather or options.method != "int4" else ["gather"]
        elif options.method == "auto":
            missing = [] if found.eight or found.four else ["eight", "four"]
        else:
            missing = [k for k, ok in (("eight", found.eight), ("four", found.four)) if not ok
                       and k == ("eight" if options.method == "int8" else "four")]
        if missing:
            out[site_key(site)] = "; ".join(f"{NOT_PACKED}{found.why[k]}" for k in missing)
    return out


__all__ = ["MEMORY", "Resident", "candidates", "cost", "judge", "kernels", "memory_bytes", "plan", "withheld"]
