"""Coarser steps, channel by channel, where the layer output barely cares: fewer bits in the same int8.

Max-abs scales spread every channel over all 255 codes, at the entropy limit of what deflate and
brotli store (``entropy``); a per-tensor scale leaves most channels on a few small codes, which
compress well, but at one step for every channel whatever each costs the output. Here each
channel (row of ``[rows, K]``) keeps its own scale, multiplied by a factor in ``FACTORS`` (a coarser
step: fewer codes used, fewer bits each), chosen to minimise ``D + lam * R`` over the layer:

* ``D`` the channel's output error on the calibration data (``dW H dW^T``, ``gptq.output_error``)
  relative to the layer's whole output energy (``W H W^T``), so one ``lam`` means the same share
  of every layer's output;
* ``R`` the bits its codes cost under the frequencies of the tensor's codes at that factor.

``lam`` itself is chosen by the bits it saves (``steps_saving``): a weight's candidates are "about
half a bit a weight fewer", "one bit fewer", ..., and ``auto`` decides which weights take which by
the model's measured output deviation, like any rung of its ladder. The codes stay int8 with one
float32 scale per channel: the same ``Cast -> Mul`` decode, so load and runtimes are int8's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.numerics import gptq

FACTORS = (1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)
"""Step multipliers tried per channel (1: the max-abs step, every code in use)."""
QMAX = 127
BISECTIONS = 40
"""Halvings of the ``lam`` interval (in log scale) when meeting a bits-saved target."""

F64 = npt.NDArray[np.float64]


def row_bits(codes: F64) -> F64:
    """Per row, the bits of its codes under the frequencies of the codes of all rows (``-log2 p``
    summed): what an entropy coder with one table for the tensor spends on each row (deflate
    and brotli share a table over blocks of many rows; a row's own histogram would undercount the
    bits of short rows, whose few values each look unique)."""
    c = (codes.astype(np.int64) + QMAX).reshape(codes.shape[0], -1)
    counts = np.bincount(c.reshape(-1), minlength=2 * QMAX + 1).astype(np.float64)
    cost = -np.log2(np.where(counts > 0, counts, 1.0) / max(1, c.size))
    out: F64 = cost[c].sum(axis=1)
    return out


class StepTable:
    """Per factor and row: the relative output error and the bits of round-to-nearest codes at that
    step (computed once per weight; every ``lam`` is then an argmin over the table)."""

    def __init__(self, rows: F64, scale: F64, h: F64, factors: tuple[float, ...] = FACTORS) -> None:
        """``rows`` ``[rows, K]``, ``scale`` the max-abs scales ``[rows]``, ``h`` ``[K, K]``;
        ``factors`` the step multipliers tried (``FACTORS``; benchmarks try others)."""
        energy = float(gptq.output_error(rows, h).sum())
        self.scale = scale
        self.values = int(rows.size)
        self.factors = np.asarray(factors)
        errors, bits = [], []
        for f in factors:
            s = scale * f
            codes = np.clip(np.rint(rows / s[:, None]), -QMAX, QMAX)
            dec = (codes.astype(np.float32) * s.astype(np.float32)[:, None]).astype(np.float64)
            errors.append(gptq.output_error(rows - dec, h) / energy if energy > 0 else np.zeros(rows.shape[0]))
            bits.append(row_bits(codes))
        self.errors = np.asarray(errors)
        self.bits = np.asarray(bits)

    def choice(self, lam: float) -> npt.NDArray[np.intp]:
        """Per row, the index of the factor minimising relative error + ``lam`` * bits (ties: finer)."""
        out: npt.NDArray[np.intp] = np.argmin(self.errors + lam * self.bits, axis=0)
        return out

    def saved(self, lam: float) -> float:
        """Bits a value saved against every row at the max-abs step, for ``lam``."""
        chosen = self.bits[self.choice(lam), np.arange(self.bits.shape[1])].sum()
        return float((self.bits[0].sum() - chosen) / max(1, self.values))


def steps_saving(table: StepTable, target: float) -> F64 | None:
    """The scales (``[rows]``) of the smallest ``lam`` whose choice saves at least ``target`` bits a
    value, or None when even the coarsest factor everywhere saves less."""
    if table.saved(1e30) < target:
        return None
    lo, hi = -40.0, 30.0  # log10(lam)
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        if table.saved(10.0 ** mid) >= target:
            hi = mid
        else:
            lo = mid
    pick = table.choice(10.0 ** hi)
    out: F64 = table.scale * table.factors[pick]
    return out
