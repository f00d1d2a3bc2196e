"""The engine's internals that the benchmarks in ``benchmarks/`` measure, in one place.

The benchmarks drive the product through its public names (``hatch_shrinkray.shrink``, the option
classes) wherever they can. Some experiments need a piece below that surface: one encoding step, the
fitted rounding, the calibration layout, a sampling helper. They import it from here and nowhere else
(an import-linter contract says so), so that a refactor of the internals changes this module and
leaves the benchmarks alone. Nothing here is public API: no compatibility is promised to anyone but
``benchmarks/``, and the package itself never imports this module.
"""

from __future__ import annotations

from hatch_shrinkray import sizes
from hatch_shrinkray.encodings._decode import float_decode
from hatch_shrinkray.encodings.int8 import Int8Encoder
from hatch_shrinkray.evidence import Evidence
from hatch_shrinkray.fitting.calib import Layout, as_rows, from_rows
from hatch_shrinkray.fitting.calibrate import calibrate
from hatch_shrinkray.fitting.candidates import STEP_SAVINGS
from hatch_shrinkray.fitting.choices import Planned
from hatch_shrinkray.fitting.probe import site_key
from hatch_shrinkray.methods import int8 as int8_method
from hatch_shrinkray.numerics import gptq
from hatch_shrinkray.numerics.entropy import entropy_bits
from hatch_shrinkray.numerics.quant import (
    NotEncodable,
    Quantized,
    channels,
    code_bounds,
    quantize_symmetric,
    scale_shape,
)
from hatch_shrinkray.numerics.steps import FACTORS, StepTable, steps_saving
from hatch_shrinkray.onnxgraph.axes import choose_axis, lowest_error_axis
from hatch_shrinkray.onnxgraph.encoding import Decode, EncodeContext
from hatch_shrinkray.onnxgraph.graph import find_sites
from hatch_shrinkray.onnxgraph.rewrite import encode_weights
from hatch_shrinkray.recording.storage import read_recording
from hatch_shrinkray.samples import Sequencing, completed, run_in_order
from hatch_shrinkray.verification.inputs import load_samples, specs_of
from hatch_shrinkray.verification.memory import footprint, packed
from hatch_shrinkray.verification.runner import model_sha256


def without_fitting_guard() -> None:
    """Fit int8's rounding on all of a recording, with no held-out fold to judge it: what the guard
    costs is measured as the difference. Only for a process that runs one command and exits."""
    int8_method.FOLDS = 1


__all__ = [
    "FACTORS",
    "STEP_SAVINGS",
    "Decode",
    "EncodeContext",
    "Evidence",
    "Int8Encoder",
    "Layout",
    "NotEncodable",
    "Planned",
    "Quantized",
    "Sequencing",
    "StepTable",
    "as_rows",
    "calibrate",
    "channels",
    "choose_axis",
    "code_bounds",
    "completed",
    "encode_weights",
    "entropy_bits",
    "find_sites",
    "float_decode",
    "footprint",
    "from_rows",
    "gptq",
    "load_samples",
    "lowest_error_axis",
    "model_sha256",
    "packed",
    "quantize_symmetric",
    "read_recording",
    "run_in_order",
    "scale_shape",
    "site_key",
    "sizes",
    "specs_of",
    "steps_saving",
    "without_fitting_guard",
]
