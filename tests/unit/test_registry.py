"""The registry and the method interface: the engine asks a method what it needs instead of naming it."""

from __future__ import annotations

import re
from pathlib import Path

from hatch_shrinkray import engine, options
from hatch_shrinkray.fitting.guard import Unfitted
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.registry import METHODS, Needs


def test_the_registry_implements_every_method_the_options_accept() -> None:
    """``options.METHODS`` sits below the registry (the registry imports the options), so it cannot be
    derived from it: the two must name the same methods, in the same order (the order of ``--help``)."""
    assert tuple(METHODS) == options.METHODS
    assert {name: m.name for name, m in METHODS.items()} == {name: name for name in METHODS}


def test_the_engine_names_no_method() -> None:
    """No method name in engine.py but in advice to the user (``setting('method', 'fp16')``)."""
    source = re.sub(r"setting\([^)]*\)", "", Path(engine.__file__).read_text(encoding="utf-8"))
    named = [name for name in METHODS if re.search(rf"""["']{re.escape(name)}["']""", source)]
    assert named == [], f"engine.py names {named}: ask the method (methods.base.Needs) instead"
    assert not re.search(r"\.method\s*(==|!=|in)\b", source)


def test_data_free_methods_need_nothing() -> None:
    for name in ("fp16", "float-levels", "dedup", "dynamic", "int4"):
        assert METHODS[name].needs(ShrinkOptions(method=name)) == Needs(), name


def test_int8_fits_in_cross_fitted_folds_unless_configured_not_to() -> None:
    assert METHODS["int8"].needs(ShrinkOptions()) == Needs(split="cross")
    for plain in (ShrinkOptions(scheme="asymmetric"), ShrinkOptions(decode="fast")):
        assert METHODS["int8"].needs(plain) == Needs()
    nearest = METHODS["int8"].needs(ShrinkOptions(rounding="nearest"))
    assert nearest.split is None and isinstance(nearest.declined, Unfitted)
    assert "the inputs only verify" in nearest.declined.text()


def test_auto_requires_real_inputs_and_judges_on_held_out_units_first() -> None:
    needs = METHODS["auto"].needs(ShrinkOptions(method="auto"))
    assert needs.required and needs.reference_first and needs.split == "holdout"
    assert needs.fallback.startswith("auto fell back to int8")


def test_only_float_levels_keeps_the_raw_size_by_design() -> None:
    assert [name for name, m in METHODS.items() if m.size_neutral] == ["float-levels"]
