"""The interface every method implements: what it asks of the engine, how it encodes a model, and
the facts about it that the layers above act on.

The engine names no method. It asks ``needs`` what to prepare (real samples and how to deal them,
the verification reference before the encoding) and hands ``fit`` what it prepared; a method that
fits data answers with the guard's verdict on what it fitted. Methods whose output does not
depend on sample inputs only write ``apply`` (``DataFree``). Where a choice fails its limits (the
build) or the package's tests (``check --fix``), the model falls back along its ``ladder``; a
data-free choice narrower than int8 is ``floored``: its answers are counted against round-to-nearest
int8's on the same units.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

from onnx import ModelProto

from hatch_shrinkray.fitting.guard import Scorer, Unfitted, Verdict
from hatch_shrinkray.options import Remedy, ShrinkOptions
from hatch_shrinkray.result import TensorRecord
from hatch_shrinkray.samples import Calibration


@dataclass(frozen=True)
class Needs:
    """What a method asks of the engine before it encodes (the defaults: nothing)."""

    split: str | None = None
    """How the real samples are dealt when it fits to them (``verification.runner.prepare_samples``):
    ``cross`` (every unit fitted on, and judged cross-fitted) or ``holdout`` (fitted on part, its fit
    judged on the held-out rest); None: it fits nothing."""
    required: bool = False
    """It refuses to run without real inputs: fitted to generated noise, its choices fit noise."""
    reference_first: bool = False
    """Its guard judges on the held-out units against the original's outputs, which verification
    compares with too: the engine makes that reference before the encoding (the original runs on
    those feeds once, not twice)."""
    declined: Unfitted | None = None
    """Why it fits nothing though real inputs are given (as configured), for the record."""
    fallback: str = "round-to-nearest"
    """What ships where the evidence is too thin to fit, as the record says it."""
    fit_subject: str = "rounding"
    """What the record says was not fitted (``result.FitNote.subject``)."""


@dataclass(frozen=True)
class Fitted:
    """What a method wrote, and the guard's verdict on what it fitted (None when nothing was fitted)."""

    records: list[TensorRecord]
    outcome: Verdict | None


class Method(Protocol):
    """A whole-model transformation chosen by name (``registry.METHODS``).

    ``fit`` gets the real samples it may fit on (``calibration``; None without real inputs, or when
    they are too few to tell a fitted choice from chance, ``evidence.MIN_UNITS``), the units held
    out from them and, with ``Needs.reference_first``, the original's outputs there, judged."""

    name: str
    size_neutral: bool
    """It keeps the raw size by design (it pays off compressed): a few bytes more on disk from
    serializing the model anew do not count against it (``engine``'s never-larger rule)."""

    def needs(self, options: ShrinkOptions) -> Needs: ...

    def fit(self, model: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, original: Scorer | None) -> Fitted: ...

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        """The choices to fall back on below fp16, cheapest first (``registry.ladder`` adds fp16 and
        the original)."""
        ...

    def floored(self, options: ShrinkOptions) -> bool:
        """Whether its answers are counted against round-to-nearest int8's on the verification's units
        (a data-free choice narrower than int8; a fitted one is judged by its guard on held-out units)."""
        ...


NEAREST_INT8 = Remedy(method="int8", rounding="nearest")
"""Round-to-nearest int8: the do-no-harm floor, and the rung above every narrower choice."""


class DataFree(ABC):
    """Base of the methods whose output does not depend on sample inputs: they need nothing and
    fit nothing, so ``fit`` is ``apply``."""

    size_neutral = False

    def needs(self, options: ShrinkOptions) -> Needs:
        return Needs()

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        return ()

    def floored(self, options: ShrinkOptions) -> bool:
        return False

    @abstractmethod
    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]: ...

    def fit(self, model: ModelProto, options: ShrinkOptions, calibration: Calibration | None,
            held: Calibration | None, original: Scorer | None) -> Fitted:
        return Fitted(self.apply(model, options, calibration), None)


class NarrowerDataFree(DataFree):
    """A data-free method narrower than int8 (``int4``, ``dynamic``): floored, and falling back to
    round-to-nearest int8."""

    def ladder(self, options: ShrinkOptions) -> tuple[Remedy, ...]:
        return (NEAREST_INT8,)

    def floored(self, options: ShrinkOptions) -> bool:
        return True
