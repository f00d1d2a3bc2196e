"""Target runtimes: where the users of a shrunk model run it, and what each method needs there.

A model ships to users who run it with the onnxruntime they have pinned, in onnxruntime-web or in
OpenVINO, not with the build's onnxruntime that verified it. Methods that those runtimes cannot
load, or would run per inference instead of folding at load, are refused before any work, with
one line naming the method, the runtime and what to do. The versions are measured, not recalled
(tests/test_runtime_matrix.py loads every method in each runtime; the README's "Where the shrunk
model runs" table is generated from it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onnx import ModelProto

from hatch_shrinkray.encodings.int8 import PER_AXIS_DQ_OPSET
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.onnxgraph.graph import opset_version, scopes
from hatch_shrinkray.options import NAMED_RUNTIMES, RUNTIME_FLOOR

Version = tuple[int, ...]

CONV_INTEGER = (1, 24, 1)
"""First onnxruntime that implements ``ConvInteger`` (``dynamic`` on a Conv model); 1.23.2 does not."""
DQ_MATMUL_FUSED = (1, 25, 0)
"""First onnxruntime that fuses ``DequantizeLinear -> MatMul`` (``decode = "fast"``) into
MatMulNBits at load; 1.24.4 runs the DequantizeLinear on every inference. (Where even the build's
onnxruntime does not fuse a weight, ``encodings.int8`` decodes it in float.)"""
MATMUL_NBITS = (1, 16, 2)
"""First onnxruntime with the ``MatMulNBits`` contrib op (``int4``, ``auto``'s 4-bit blocks); 1.16.1 lacks it."""
MATMUL_NBITS_8 = (1, 22, 0)
"""First onnxruntime whose CPU ``MatMulNBits`` reads 8-bit codes (with int8 activations, ``accuracy_level``
4, as ``methods.resident`` writes them; float activations need 1.23): 1.21.1 refuses the model; 1.16.3
and 1.22.1 load 8-bit codes with float activations and fail on the first inference."""
GATHER_BLOCK_QUANTIZED = (1, 23, 0)
"""First onnxruntime whose ``GatherBlockQuantized`` reads ``uint8`` codes with a ``bits`` attribute
(4-bit tables); 1.22.1 refuses the model (its ``int4`` form, from 1.20, needs IR version 10)."""
PACKED = {"eight": (MATMUL_NBITS_8, "MatMulNBits 8-bit"), "four": (MATMUL_NBITS, "MatMulNBits 4-bit"),
          "gather": (GATHER_BLOCK_QUANTIZED, "GatherBlockQuantized 4-bit")}
"""The kernels that keep weights packed in memory (target ``memory``), with the first release that has each."""
NOT_ON_WEB: frozenset[str] = frozenset()
"""Packed kernels onnxruntime-web's wasm backend lacks: none in 1.30 (tests/test_memory_runtimes.py)."""
NOT_ON_OPENVINO: frozenset[str] = frozenset()
"""Packed kernels OpenVINO's ONNX reader lacks: none in 2026.4.1, which reads all three as its own
compressed-weight layers (tests/test_memory_runtimes.py)."""



@dataclass(frozen=True)
class Targets:
    onnxruntime: Version | None
    """Lowest onnxruntime release to support; None: no onnxruntime release is targeted."""
    web: bool = False
    openvino: bool = False

    def names(self) -> str:
        parts = [] if self.onnxruntime is None else [f"onnxruntime>={_text(self.onnxruntime)}"]
        return ", ".join(parts + [n for n in NAMED_RUNTIMES if getattr(self, n)])


def _text(v: Version) -> str:
    return ".".join(map(str, v))


def parse(entries: Iterable[str]) -> Targets:
    """Targets from validated entries (``options.option_errors``); the lowest floor wins."""
    floors: list[Version] = []
    for entry in entries:
        m = RUNTIME_FLOOR.match(entry.strip())
        if m:
            floors.append(_version(m.group(2)))
    return Targets(min(floors) if floors else None, "web" in entries, "openvino" in entries)


def _version(text: str) -> Version:
    """``1.25`` -> ``(1, 25, 0)``: compares with three-part releases as the release it names."""
    parts = tuple(int(p) for p in text.split("."))
    return parts + (0,) * (3 - len(parts))


def _below(floor: Version | None, version: Version) -> bool:
    return floor is not None and floor < version


def refusal(model: ModelProto, method: str, decode: str, targets: Targets) -> str | None:
    """Why the targets cannot use ``method`` on ``model`` (one line), or None."""
    where = targets.names()
    if method == "dynamic" and _below(targets.onnxruntime, CONV_INTEGER) and _has(model, "Conv"):
        return (f"method dynamic turns Conv into ConvInteger, which onnxruntime < {_text(CONV_INTEGER)} does not "
                f"implement: the model would not load in the target runtimes ({where}); use method int8, or "
                f"target onnxruntime>={_text(CONV_INTEGER)}")
    fused = not _below(targets.onnxruntime, DQ_MATMUL_FUSED)
    if method == "int8" and decode == "fast" and not fused and _emits_dequantize_linear(model):
        return (f"decode = 'fast' is fused only by onnxruntime >= {_text(DQ_MATMUL_FUSED)}: in the target "
                f"runtimes ({where}) its DequantizeLinear would run on every inference; use decode = 'float', "
                f"or target onnxruntime>={_text(DQ_MATMUL_FUSED)}")
    if method == "int4" and _below(targets.onnxruntime, MATMUL_NBITS):
        return (f"method int4 needs the MatMulNBits op of onnxruntime >= {_text(MATMUL_NBITS)}: the model would not "
                f"load in the target runtimes ({where}); use method int8 or auto")
    return None


def packed_kernels(entries: Iterable[str]) -> dict[str, str | None]:
    """Per packed kernel (``PACKED``), why it may not be emitted for ``entries`` (the validated
    ``runtimes`` option) or by this build's onnxruntime, which must run it to verify it; None: it may."""
    import onnxruntime as ort

    targets = parse(entries)
    build = _version(".".join(ort.__version__.split(".")[:3]))
    out: dict[str, str | None] = {}
    for key, (floor, words) in PACKED.items():
        why = None
        if _below(targets.onnxruntime, floor):
            why = f"{words} needs onnxruntime>={_text(floor)} ({targets.names()} targeted)"
        elif targets.web and key in NOT_ON_WEB:
            why = f"onnxruntime-web has no {words} kernel"
        elif targets.openvino and key in NOT_ON_OPENVINO:
            why = f"OpenVINO has no {words} kernel"
        elif build < floor:
            why = f"{words} needs onnxruntime>={_text(floor)} where you build (this is {ort.__version__})"
        out[key] = why
    return out


def matmul_nbits_ok(targets: Targets) -> bool:
    """Whether ``auto`` may use onnxruntime's MatMulNBits 4-bit blocks (else packed int4)."""
    return not _below(targets.onnxruntime, MATMUL_NBITS)


def check(model: ModelProto, method: str, decode: str, entries: Iterable[str], label: str) -> None:
    """Raise the one-line refusal for ``entries`` (the validated ``runtimes`` option), if any; the
    build's own onnxruntime must load the result too, or verification could not run it."""
    import onnxruntime as ort

    reason = refusal(model, method, decode, parse(entries))
    if reason:
        raise ShrinkrayError(reason, path=label)
    build = Targets(_version(".".join(ort.__version__.split(".")[:3])))
    reason = refusal(model, method, "float", build)  # decode fast falls back by itself (encodings.int8)
    if reason:
        raise ShrinkrayError(f"this build's onnxruntime {ort.__version__} could not verify the result: {reason}",
                             path=label, hint="upgrade onnxruntime where you build")


def _emits_dequantize_linear(model: ModelProto) -> bool:
    """Whether ``decode = "fast"`` puts a DequantizeLinear in ``model`` (MatMul weights, opset 13+)."""
    return opset_version(model) >= PER_AXIS_DQ_OPSET and _has(model, "MatMul")


def _has(model: ModelProto, op: str) -> bool:
    return any(n.op_type == op for s in scopes(model) for n in s.graph.node)
