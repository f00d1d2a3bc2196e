"""The method registry: the only module that imports every method (adding one touches one module
and one line here), and the only door to them for the modules above (the engine names none). Nothing
below it imports it, so it closes no import cycle."""

from __future__ import annotations

from onnx import ModelProto

from hatch_shrinkray.encodings.float_levels import FloatLevelsEncoder
from hatch_shrinkray.encodings.fp16 import Fp16Encoder
from hatch_shrinkray.methods.auto import Auto
from hatch_shrinkray.methods.base import NEAREST_INT8, DataFree, Method, Needs
from hatch_shrinkray.methods.dedup import Dedup
from hatch_shrinkray.methods.dynamic import Dynamic
from hatch_shrinkray.methods.int4 import Int4
from hatch_shrinkray.methods.int8 import Int8
from hatch_shrinkray.methods.resident import Resident
from hatch_shrinkray.methods.runtimes import check as check_runtimes
from hatch_shrinkray.onnxgraph.encoding import Calibration, TensorEncoder
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.options import Remedy, ShrinkOptions
from hatch_shrinkray.result import TensorRecord


class PerTensor(DataFree):
    """A method made of one per-tensor encoder applied to every eligible weight; ``narrow``: its grid is
    coarser than int8's (its answers are counted against round-to-nearest int8's)."""

    def __init__(self, name: str, encoder: TensorEncoder, *, size_neutral: bool = False, narrow: bool = False) -> None:
        self.name = name
        self.encoder = encoder
        self.size_neutral = size_neutral
        self.narrow = narrow

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        return (NEAREST_INT8,) if self.narrow else ()

    def floored(self, options: ShrinkOptions) -> bool:
        return self.narrow

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]:
        return encode_weights(model, self.encoder, options)


class NoOp(DataFree):
    """``dedup`` alone: the dedup pre-pass does all the work."""

    name = "dedup"

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]:
        return []


BASES: dict[str, Method] = {
    "int8": Int8(),
    "float-levels": PerTensor("float-levels", FloatLevelsEncoder(), size_neutral=True, narrow=True),
    "fp16": PerTensor("fp16", Fp16Encoder()),
    "dedup": NoOp(),
    "dynamic": Dynamic(),
    "int4": Int4(),
    "auto": Auto(),
}
METHODS: dict[str, Method] = {name: Resident(method) for name, method in BASES.items()}
"""Each method as it runs under every target; ``Resident`` adds what target ``memory`` keeps packed."""

ORIGINAL = Remedy(original=True)
FP16 = Remedy(method="fp16")


def ladder(options: ShrinkOptions) -> list[Remedy]:
    """The choices a model falls back on from ``options``, cheapest first: the method's own rungs, then
    fp16 (unless that is the method), then the original bytes."""
    return [*METHODS[options.method].ladder(options), *(() if options.method == "fp16" else (FP16,)), ORIGINAL]


__all__ = ["FP16", "METHODS", "NEAREST_INT8", "ORIGINAL", "Dedup", "Method", "Needs", "check_runtimes", "ladder"]
