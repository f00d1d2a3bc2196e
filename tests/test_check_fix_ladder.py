"""``check --fix``'s ladder above ``auto``'s plan passes through what method int8 ships."""

from __future__ import annotations

from hatch_shrinkray.checking.fix import ORIGINAL, remedies
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.shipping.plan import Remedy


def test_auto_climbs_through_int8_with_fitted_codes_before_round_to_nearest() -> None:
    auto = ShrinkOptions(method="auto")
    assert remedies(auto) == [Remedy(rounding="nearest"), Remedy(method="int8"),
                              Remedy(method="int8", rounding="nearest"), Remedy(method="fp16"), ORIGINAL]
    assert [r.describe(auto) for r in remedies(auto)[:3]] == ["auto round-to-nearest", "int8",
                                                             "int8 round-to-nearest"]
    # already round-to-nearest, or int8 itself: no fitted int8 rung
    assert Remedy(method="int8") not in remedies(ShrinkOptions(method="auto", rounding="nearest"))
    assert remedies(ShrinkOptions(method="int8")) == [Remedy(rounding="nearest"), Remedy(method="fp16"), ORIGINAL]
