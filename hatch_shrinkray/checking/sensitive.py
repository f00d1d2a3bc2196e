"""The single-tensor sensitivity of a checked model, measured on the feeds the command itself gave
it (recorded during the run with the original models): what the hints name and the order in which
``check --search`` escalates tensors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hatch_shrinkray.checking.models import Prepared
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.fitting.sensitivity import Sensitive, rank
from hatch_shrinkray.onnxgraph.modelio import load_model
from hatch_shrinkray.recording.matching import find_recording
from hatch_shrinkray.recording.storage import read_recording
from hatch_shrinkray.registry import Dedup
from hatch_shrinkray.samples import Calibration, Sequencing


def ranked(prepared: Prepared, recorded: Path, *, with_plan: bool = True) -> list[Sensitive]:
    """Most harmful first; tensors the plan already sets are left out unless ``with_plan`` is false.
    Empty when the command never ran the model (nothing recorded)."""
    try:
        path, _ = find_recording(recorded, prepared.sha256, prepared.relpath)
    except ShrinkrayError:
        return []
    rec = read_recording(path)
    units = rec.units or tuple(f"call:{c}" for c in rec.picked)
    feeds = Calibration([dict(s) for s in rec.samples], Sequencing(units, rec.feedback, rec.streams))
    options = prepared.options if with_plan else replace(prepared.options, plan=())
    model = load_model(prepared.source).model
    if options.dedup:  # the engine dedups first: rank the tensors the method and the plan will see
        Dedup().apply(model, options)
    return rank(model, options, feeds)
