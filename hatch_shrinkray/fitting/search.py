"""Choosing one encoding per weight: per-tensor sensitivity, then a budget-constrained knapsack.

Sensitivity is measured, not guessed: each candidate encoding of each weight is tried *alone*
(all other weights original) and the model's output deviation on the verification inputs is
recorded as an energy (squared relative L2, summed over outputs). Errors of independent roundings
add up in energy, so the cost of a whole assignment is estimated as the sum of its parts.

The knapsack "smallest model whose summed energy stays under a limit" is solved by Lagrangian
relaxation: for a multiplier ``lam`` every weight independently picks the candidate minimising
``bytes + lam * energy``. Raising ``lam`` only ever moves weights to larger encodings, so the
assignments form a monotone chain over the finitely many breakpoints of ``lam``; a bisection over
that chain, each step checked by *running* the assembled model, finds the smallest assignment
whose real deviation is within the budget. Everything is deterministic (fixed order, no clocks)
and bounded: at most ``max_evals`` single-tensor runs plus ~log2(breakpoints) full runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hatch_shrinkray.fitting.budget import Deviation


@dataclass(frozen=True)
class Option:
    """One candidate of one weight: its size and its measured (or proxied) output energy."""

    stored_bytes: int
    energy: float
    load: int = 0
    """What folding its decode at load costs (``Decode.folded_bytes``; 0 when nothing is folded)."""


def pick(options: Sequence[Option], lam: float) -> int:
    """Index of the candidate minimising ``bytes + lam * energy`` (ties: smaller, then earlier)."""
    def key(i: int) -> tuple[float, int, int]:
        o = options[i]
        cost = o.energy if math.isinf(lam) else o.stored_bytes + (lam * o.energy if lam > 0 else 0.0)
        return cost, o.stored_bytes, i

    return min(range(len(options)), key=key)


def breakpoints(table: Sequence[Sequence[Option]]) -> list[float]:
    """Every ``lam`` at which some weight's choice can change, ascending, with 0 and inf."""
    lams = {0.0, float("inf")}
    for options in table:
        for a in options:
            for b in options:
                if b.stored_bytes > a.stored_bytes and a.energy > b.energy:
                    lams.add((b.stored_bytes - a.stored_bytes) / (a.energy - b.energy))
    return sorted(lams)


SCREEN_ROUNDS = 2
"""Screen-only bisections (each ending in one full evaluation) before the search bisects with full
evaluations: a screen that lets every point through costs one full run more than without it."""


@dataclass(frozen=True)
class Found:
    choice: tuple[int, ...]
    deviation: Deviation
    lam: float
    evaluations: int


def search(table: Sequence[Sequence[Option]], evaluate: Callable[[tuple[int, ...]], Deviation],
           within: Callable[[Deviation], bool],
           screen: Callable[[tuple[int, ...]], bool] | None = None) -> Found:
    """The smallest assignment along the Lagrangian chain whose evaluated deviation is ``within``.

    ``table[i]`` lists weight i's candidates; the last one must be the lossless fallback. If no
    point passes (even all-lossless: the budget is stricter than the untouched weights allow),
    the all-lossless assignment is returned with its deviation.

    ``screen`` (a cheap check that every passing point passes too): the bisection first finds the
    smallest point the screen lets through, with the screen alone, and evaluates that point; where
    it passes (the usual case: the two checks agree) one evaluation replaced one per point above
    it that the bisection would have visited. Where it fails, the screen bisects again above it
    (``SCREEN_ROUNDS`` times in all), then the bisection goes on above with full evaluations. A
    screen is looser than the full check near its own point and often agrees further up, so a
    second screened point usually passes and the full runs fall to a few, with the same answer.

    The chain's top (every weight lossless) is evaluated only when the bisection ends there: below
    it the answer is the same whether it passes or not, and it is one full run of the model that
    the usual search never needed.
    """
    lams = breakpoints(table)
    chain: list[tuple[int, ...]] = []
    lam_of: list[float] = []
    for lam in lams:
        choice = tuple(pick(options, lam) for options in table)
        if not chain or chain[-1] != choice:
            chain.append(choice)
            lam_of.append(lam)
    seen: dict[int, Deviation] = {}

    def check(i: int) -> bool:
        if i not in seen:
            seen[i] = evaluate(chain[i])
        return within(seen[i])

    lo, hi = 0, len(chain) - 1
    if screen is not None:
        for _ in range(SCREEN_ROUNDS):
            lo = _first(lo, hi, lambda i: screen(chain[i]))
            if check(lo):
                return Found(chain[lo], seen[lo], lam_of[lo], len(seen))
            lo = min(lo + 1, hi)
    found = _first(lo, hi, check)
    check(found)  # runs only for the top (every other point _first returns was checked): within or not
    return Found(chain[found], seen[found], lam_of[found], len(seen))


def _first(lo: int, hi: int, passes: Callable[[int], bool]) -> int:
    """The smallest index in ``lo .. hi`` that ``passes`` (bisection: ``hi`` passes, and so does
    every index above a passing one)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def try_uniform(table: Sequence[Sequence[Option]], found: Found, seeds: Sequence[tuple[int, ...]],
                evaluate: Callable[[tuple[int, ...]], Deviation], within: Callable[[Deviation], bool]) -> Found:
    """The smallest of ``seeds`` (e.g. every weight at int8) that is smaller than ``found`` and within
    the budget, else ``found``. One multiplier trades every weight's bytes against the *estimated*
    energy; where the estimate is off, the chain can end larger than a plain uniform assignment
    that the real model tolerates, and a few runs rule that out."""
    def size(choice: tuple[int, ...]) -> int:
        return sum(table[i][c].stored_bytes for i, c in enumerate(choice))

    limit = size(found.choice) if within(found.deviation) else math.inf
    evals = 0
    for choice in sorted(set(seeds), key=lambda c: (size(c), c)):
        if size(choice) >= limit:
            break
        dev = evaluate(choice)
        evals += 1
        if within(dev):
            return Found(choice, dev, found.lam, found.evaluations + evals)
    return Found(found.choice, found.deviation, found.lam, found.evaluations + evals)


def refine(table: Sequence[Sequence[Option]], found: Found, evaluate: Callable[[tuple[int, ...]], Deviation],
           within: Callable[[Deviation], bool], max_evals: int, *,
           screen: Callable[[tuple[int, ...]], bool] | None = None) -> Found:
    """Greedy clean-up after the bisection: try moving single weights one step smaller, biggest
    saving first, and keep every move the real model tolerates. The Lagrangian chain moves all
    weights with one multiplier, so it can stop with slack that one weight could still use.

    ``screen`` (a cheap, necessary check, such as the budget on a few feeds): the moves are first
    taken together wherever they pass it, and one evaluation of the result settles them all; only
    when that fails are they evaluated one by one. Each move adds error, so where the result is
    within the budget every step towards it was too, and the answer is the one-by-one answer in
    one evaluation instead of one per move."""
    if not within(found.deviation):
        return found
    choice = list(found.choice)
    best = found.deviation
    moves: list[tuple[int, int, int]] = []
    for i, options in enumerate(table):
        cur = options[choice[i]].stored_bytes
        smaller = [j for j, o in enumerate(options) if o.stored_bytes < cur]
        if smaller:
            j = max(smaller, key=lambda k: (options[k].stored_bytes, -k))
            moves.append((cur - options[j].stored_bytes, i, j))
    moves.sort(key=lambda m: (-m[0], m[1]))
    tried = moves[:max_evals]
    evals = 0
    if screen is not None:
        trial = list(choice)
        for _, i, j in tried:
            step = list(trial)
            step[i] = j
            if screen(tuple(step)):
                trial = step
        if trial == choice:
            return found
        dev = evaluate(tuple(trial))
        evals += 1
        if within(dev):
            return Found(tuple(trial), dev, found.lam, found.evaluations + evals)
    for _, i, j in tried:
        trial = list(choice)
        trial[i] = j
        dev = evaluate(tuple(trial))
        evals += 1
        if within(dev):
            choice, best = trial, dev
    return Found(tuple(choice), best, found.lam, found.evaluations + evals)


def within_load(table: Sequence[Sequence[Option]], found: Found, cap: float,
                evaluate: Callable[[tuple[int, ...]], Deviation], within: Callable[[Deviation], bool]) -> Found:
    """Move weights to later, more precise rungs that cost less to load (fewest bytes added per
    load saved first) until the assignment's load fits ``cap``; one real run checks the result,
    which is kept only within the budget (else ``found`` stays, over the cap)."""
    choice = list(found.choice)
    while sum(table[i][c].load for i, c in enumerate(choice)) > cap:
        moves = [((o.stored_bytes - table[i][c].stored_bytes) / (table[i][c].load - o.load), i, j)
                 for i, c in enumerate(choice) for j, o in enumerate(table[i]) if j > c and o.load < table[i][c].load]
        if not moves:
            break
        _, i, j = min(moves)
        choice[i] = j
    if tuple(choice) == found.choice:
        return found
    dev = evaluate(tuple(choice))
    return Found(tuple(choice), dev, found.lam, found.evaluations + 1) if within(dev) else found
