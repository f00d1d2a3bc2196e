"""What each method is, as the layers above the engine act on it: the light half of the registry.

The methods themselves (``registry.METHODS``) load onnx and numpy; a build that ships every model
as it is, the configuration's checks and the wording do not. So the facts those need live here,
one :class:`Facts` per method, and nothing outside ``methods/``, the registry and this module
names a method to decide something (``tests/test_method_facts.py``). Adding a method adds its
module, its line in the registry and its facts here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Facts:
    """One method's facts (the defaults: a data-free method with nothing to say)."""

    fits_rounding: bool = False
    """Its int8 codes are fitted to the recorded inputs: ``rounding`` applies, and ``round-to-nearest``
    names the other choice."""
    plan_rung: bool = False
    """``check --fix``'s ladder has the per-tensor rung: int8 round-to-nearest with some tensors wider."""
    plan: str = ""
    """It chooses every tensor's encoding itself: how the words name that choice (its label says it all,
    and its tensors count under its name); empty: its tensors are named by their encodings."""
    unplanned: str = ""
    """What ships where its plan is not kept (``verdict.shipped_method``); empty: the method itself."""
    unrecorded: str = ""
    """What its build does with a model no recorded command loaded, where that is not generated inputs."""
    unchanged: str = ""
    """Why no weight was shrunk, where that is not min-elements."""
    levels: tuple[int, int, int] | None = None
    """``levels``: lowest, highest, default (None: it takes none)."""
    int8_levels: bool = False
    """Its ``levels`` set how many codes the int8 encoder uses (other methods' int8 tensors use all 255)."""
    ranked: str = "int8"
    """The per-tensor encoding that stands for it when ranking its weights (``fitting.sensitivity``)."""
    plain: str = ""
    """What its default levels are, said where a ``levels`` value is refused."""
    blocks: bool = False
    """It takes ``block-size`` (the blocks of its 4-bit MatMulNBits weights)."""
    wider: tuple[str, ...] = ("int10", "int12", "fp16", "float32")
    """The encodings ``check --search`` tries on a tensor above this method's own, cheapest first."""
    requires: frozenset[str] = frozenset()
    """The engine extra's packages a build needs only for some methods, this one among them."""


FACTS: dict[str, Facts] = {
    "int8": Facts(fits_rounding=True, plan_rung=True, levels=(3, 255, 255), int8_levels=True, plain="255: plain int8",
                  requires=frozenset({"threadpoolctl"})),
    "float-levels": Facts(levels=(2, 65536, 256)), "fp16": Facts(wider=("float32",), ranked="fp16"),
    "dedup": Facts(unchanged="no two weights are identical"), "dynamic": Facts(plan_rung=True),
    "int4": Facts(plan_rung=True, blocks=True, ranked="int4", requires=frozenset({"onnx-ir"}),
                  wider=("int6", "int8", "int10", "int12", "fp16", "float32")),
    "auto": Facts(fits_rounding=True, plan_rung=True, blocks=True, plan="auto's plan", unplanned="int8",
                  unrecorded="method auto then ships int8 round-to-nearest",
                  requires=frozenset({"onnx-ir", "threadpoolctl"})),
}
"""Every method's facts, in the order ``--help`` lists them (``options.METHODS``)."""


def facts(method: str) -> Facts:
    """The facts of ``method`` (none for a name that is not one: the configuration refuses it)."""
    return FACTS.get(method, Facts())


def having(fact: str) -> tuple[str, ...]:
    """The methods whose ``fact`` is set, in order (``Only`` declarations)."""
    return tuple(name for name, f in FACTS.items() if getattr(f, fact))
