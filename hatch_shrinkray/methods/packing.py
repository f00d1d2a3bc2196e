"""Integer codes of 4, 6, 10 or 12 bits packed into bytes, rebuilt by integer ops folded at load.

ONNX stores int4 only from opset 21 and has no 6-, 10- or 12-bit type, while the models we meet
are opset 11-17 (and their opset is never raised). So a code of ``b`` bits is split into chunks
of 8, 4 or 2 bits; an 8-bit chunk is a plain ``uint8`` array, a narrower chunk packs 8/width
values per byte as *planes* (value ``i`` of plane ``t`` sits in byte ``i`` at bit ``t*width``).
Decoding uses only Cast/Div/Mul/Sub/Add/Concat/Slice/Reshape on int32, which every opset >= 7
runtime has; with constant inputs onnxruntime folds the chain into one float tensor when the
session is created, so, like ``Cast -> Mul``, it costs nothing per inference.

The point is the ladder ``auto`` can climb: int4 for any weight (not only MatMul initializers),
int6, int10 and int12 put rungs between int8 and 16 bits at 0.5, 0.75, 1.25 and 1.5 bytes per
value, where the only alternative was to double a sensitive tensor's bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import TensorProto

from hatch_shrinkray.numerics.quant import NotEncodable
from hatch_shrinkray.onnxgraph.encoding import Decode, DecodeNode

CHUNKS: dict[int, tuple[int, ...]] = {4: (4,), 6: (4, 2), 10: (8, 2), 12: (8, 4)}
"""Chunk widths per code width, least significant first."""
BITS = tuple(CHUNKS)
SLICE_INPUTS_OPSET = 10


def stored_bytes(n: int, bits: int) -> int:
    """Bytes of the packed codes of ``n`` values (scales and constants not included)."""
    return sum(-(-n // (8 // w)) for w in CHUNKS[bits])


def pack(codes: npt.NDArray[np.integer], bits: int) -> list[npt.NDArray[np.uint8]]:
    """Symmetric codes in ``[-(2^(b-1)-1), 2^(b-1)-1]`` -> one ``uint8`` array per chunk."""
    qmax = 2 ** (bits - 1) - 1
    flat = codes.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < -qmax or flat.max() > qmax):
        raise ValueError(f"codes outside the symmetric {bits}-bit range")
    u = flat + 2 ** (bits - 1)
    out: list[npt.NDArray[np.uint8]] = []
    shift = 0
    for width in CHUNKS[bits]:
        part = (u >> shift) & ((1 << width) - 1)
        per = 8 // width
        m = -(-part.size // per)
        padded = np.zeros(per * m, dtype=np.int64)
        padded[: part.size] = part
        planes = padded.reshape(per, m)
        byte = np.zeros(m, dtype=np.int64)
        for t in range(per):
            byte |= planes[t] << (width * t)
        out.append(byte.astype(np.uint8))
        shift += width
    return out


def unpack(chunks: list[npt.NDArray[np.uint8]], bits: int, n: int) -> npt.NDArray[np.int64]:
    """Inverse of ``pack`` in numpy: the reference the decode graph is tested against."""
    total = np.zeros(n, dtype=np.int64)
    shift = 0
    for width, byte in zip(CHUNKS[bits], chunks, strict=True):
        per = 8 // width
        b = byte.astype(np.int64)
        planes = np.concatenate([(b >> (width * t)) & ((1 << width) - 1) for t in range(per)])
        total += planes[:n] << shift
        shift += width
    out: npt.NDArray[np.int64] = total - 2 ** (bits - 1)
    return out


def packed_decode(codes: npt.NDArray[np.integer], scale: npt.NDArray[np.float32], bits: int, *, opset: int,
                  decoded: npt.NDArray[np.float32], label: str) -> Decode:
    """Stored chunks + ``scale`` and the integer decode chain rebuilding ``codes * scale``."""
    if bits not in CHUNKS:
        raise NotEncodable(f"no packed layout for {bits}-bit codes")
    n = int(codes.size)
    stored: dict[str, npt.NDArray[Any]] = {}
    nodes: list[DecodeNode] = []

    def add(op: str, *inputs: str, **attrs: Any) -> str:
        nodes.append(DecodeNode(op, inputs, attrs))
        return f"@{len(nodes) - 1}"

    def const(value: int) -> str:
        role = f"k{value}"
        stored.setdefault(role, np.array(value, dtype=np.int32))
        return role

    terms: list[str] = []
    shift = 0
    for c, (width, byte) in enumerate(zip(CHUNKS[bits], pack(codes, bits), strict=True)):
        stored[f"c{c}"] = byte
        p = add("Cast", f"c{c}", to=TensorProto.INT32)
        value = p if width == 8 else _planes(add, const, p, width=width, m=byte.size, n=n, opset=opset, stored=stored)
        if shift:
            value = add("Mul", value, const(1 << shift))
        terms.append(value)
        shift += width
    total = terms[0]
    for t in terms[1:]:
        total = add("Add", total, t)
    total = add("Sub", total, const(2 ** (bits - 1)))
    as_float = add("Cast", total, to=TensorProto.FLOAT)
    stored["shape"] = np.array(codes.shape, dtype=np.int64)
    shaped = add("Reshape", as_float, "shape")
    stored["scale"] = scale
    add("Mul", shaped, "scale")
    return Decode(stored, tuple(nodes), decoded, label)


def _planes(add: Any, const: Any, p: str, *, width: int, m: int, n: int, opset: int,
            stored: dict[str, npt.NDArray[Any]]) -> str:
    """Split packed bytes ``p`` (int32) into their planes, concatenated and cut to ``n`` values."""
    per = 8 // width
    shifted = [p] + [add("Div", p, const(1 << (width * t))) for t in range(1, per)]
    planes = [add("Sub", shifted[t], add("Mul", shifted[t + 1], const(1 << width))) for t in range(per - 1)]
    planes.append(shifted[-1])
    joined: str = add("Concat", *planes, axis=0)
    if per * m == n:
        return joined
    if opset >= SLICE_INPUTS_OPSET:
        stored["start"] = np.array([0], dtype=np.int64)
        stored["end"] = np.array([n], dtype=np.int64)
        stored["axes"] = np.array([0], dtype=np.int64)
        out: str = add("Slice", joined, "start", "end", "axes")
        return out
    sliced: str = add("Slice", joined, starts=[0], ends=[n], axes=[0])
    return sliced
