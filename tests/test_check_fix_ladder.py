"""The ladder a model falls back along (``check --fix``, and a build whose choice fails its limits):
above ``auto``'s plan it passes through what method int8 ships."""

from __future__ import annotations

from hatch_shrinkray.options import Remedy, ShrinkOptions
from hatch_shrinkray.registry import ORIGINAL, ladder


def test_auto_climbs_through_int8_with_fitted_codes_before_round_to_nearest() -> None:
    auto = ShrinkOptions(method="auto")
    assert ladder(auto) == [Remedy(rounding="nearest"), Remedy(method="int8"),
                              Remedy(method="int8", rounding="nearest"), Remedy(method="fp16"), ORIGINAL]
    assert [r.describe(auto) for r in ladder(auto)[:3]] == ["auto round-to-nearest", "int8",
                                                             "int8 round-to-nearest"]
    # already round-to-nearest, or int8 itself: no fitted int8 rung
    assert Remedy(method="int8") not in ladder(ShrinkOptions(method="auto", rounding="nearest"))
    assert ladder(ShrinkOptions(method="int8")) == [Remedy(rounding="nearest"), Remedy(method="fp16"), ORIGINAL]

    narrower = [Remedy(method="int8", rounding="nearest"), Remedy(method="fp16"), ORIGINAL]
    assert ladder(ShrinkOptions(method="int4")) == ladder(ShrinkOptions(method="dynamic")) == narrower
    assert ladder(ShrinkOptions(method="fp16")) == [ORIGINAL]
