"""What a model costs a running process, as measured (``verification.memory``): resident memory once
the session is created and after inferences, load time and time per inference, the original's and
the shrunk model's side by side, and what share of the weights is float once loaded. JSON-ready,
and worded for the line and for ``-v``. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KB = 1000


@dataclass(frozen=True)
class Footprint:
    """One model in a fresh process (``verification.memory``): kilobytes are resident memory above
    the process's own before the session existed (Python and onnxruntime imported and set up by a
    one-node session, the input read): what the model's session adds."""

    session_kb: int
    """Once the session is created, the memory loading freed handed back: its weights, graph and
    the kernels' prepacked copies (the part attributable to the weights)."""
    steady_kb: int
    """After the inferences, as the process holds it: the same plus what running keeps (buffers of
    the activations, which reuse what loading freed)."""
    peak_kb: int
    """The most the process held above its start while creating the session."""
    load_s: float
    """CPU seconds to create the session."""
    run_ms: float
    """Median CPU milliseconds per inference."""


@dataclass(frozen=True)
class Memory:
    """The memory target's figures for one model, measured in fresh processes."""

    original: Footprint
    shrunk: Footprint
    runs: int
    """Inferences before ``steady_kb`` was read, on one ``input`` each."""
    input: str
    """What they ran on (``the first recorded call``, ``a generated input``)."""
    float_bytes: int
    """Weight bytes float once the session is created (decoded at load, or kept), as float32."""
    weight_bytes: int
    """All recorded weights, as float32: what the original holds."""
    withheld: tuple[str, ...] = ()
    """Why a packed kernel was not emitted (the declared runtimes lack it), one phrase each."""

    @property
    def session_ratio(self) -> float:
        return self.shrunk.session_kb / max(self.original.session_kb, 1)

    @property
    def steady_ratio(self) -> float:
        return self.shrunk.steady_kb / max(self.original.steady_kb, 1)

    @property
    def float_share(self) -> float:
        return self.float_bytes / self.weight_bytes if self.weight_bytes else 1.0

    def brief(self) -> str:
        """The line's words: ``memory 0.31x, 8% float``."""
        if not self.weight_bytes or self.float_bytes >= self.weight_bytes:
            return f"memory {self.session_ratio:.2f}x, weights float"
        share = f", {round(100 * self.float_share)}% float" if self.float_bytes else ""
        return f"memory {self.session_ratio:.2f}x{share}"

    def text(self) -> str:
        """The figures for ``-v``: session and steady memory of both models, load and run time."""
        o, s = self.original, self.shrunk
        parts = [f"memory measured in fresh processes: session {_mb(o.session_kb)} -> {_mb(s.session_kb)} "
                 f"({self.session_ratio:.2f}x), after {self.runs} inferences on {self.input} {_mb(o.steady_kb)} -> "
                 f"{_mb(s.steady_kb)} ({self.steady_ratio:.2f}x), load peak {_mb(o.peak_kb)} -> {_mb(s.peak_kb)}, "
                 f"load {o.load_s:.2f} s -> {s.load_s:.2f} s CPU, {o.run_ms:.2f} ms -> {s.run_ms:.2f} ms CPU an "
                 f"inference",
                 f"{round(100 * self.float_share)}% of the weights float in memory"]
        return "; ".join(parts)

    def json_out(self, body: dict[str, Any]) -> dict[str, Any]:
        """Written with the ratios, for people (read back, they are worked out again)."""
        return {**body, "session_ratio": round(self.session_ratio, 4), "steady_ratio": round(self.steady_ratio, 4)}


def _mb(kb: int) -> str:
    return f"{kb / KB:.1f} MB"
