"""Integer codes of 4, 6, 10 or 12 bits packed into bytes, rebuilt by a short chain folded at load.

ONNX stores int4 only from opset 21 and has no 6-, 10- or 12-bit type, while the models we meet
are opset 11-17 (and their opset is never raised). So a code of ``b`` bits is split into chunks,
least significant first. A chunk of 8 bits is a plain ``int8`` tensor in the weight's shape (it is
always the top one and carries the sign); a narrower chunk packs 8/width values per byte as
*planes*: value ``i`` of plane ``t`` sits in byte ``i`` at bit ``t*width``. The planes split one
axis of the weight (the last that divides evenly, never the rows of a table): plane ``t`` holds
indices ``[t*c, (t+1)*c)`` of it, concatenating the planes on that axis *is* the weight, and every
row decodes on its own, so an embedding table can be decoded per gathered row
(``onnxgraph.rewrite``). Where no axis divides, the planes are consecutive runs of the flattened
weight, cut and reshaped after joining. A planar top chunk is
stored offset-binary (``top + 2^(width-1)``), its offset subtracted in float.

Why this chain: onnxruntime folds every node on constant inputs
into a new initializer and keeps all of them until folding ends, so the load cost is the bytes of
every intermediate, and each float-sized one costs about as much as the weight itself. The planes
are therefore split with ``BitShift`` and ``Mod`` on ``uint8`` (opset 11; the only integer ops
older onnxruntime has for bytes) straight to their place value, and only then widened to float, where
the chunks and the offset meet in one ``Sum`` (exact: small integers) before the one ``Mul`` by the
scale: int4 costs Cast/Sum/Mul, two chunks Cast/Cast/Sum/Mul, and every node costs a fixed
overhead too, so there are as few as possible. Nothing relies on integer overflow (a ``uint8 ->
int8`` Cast or a left shift past bit 7): onnxruntime wraps, OpenVINO does not (OpenVINO 2026.4's
``BitShift`` on bytes is wrong anyway: an OpenVINO target gets no packed codes, ``runtimes``). The old chain (int32
Div/Mul/Sub/Concat/Slice over whole tensors) cost several times int8's load time and memory.

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

CHUNKS: dict[int, tuple[int, ...]] = {4: (4,), 6: (4, 2), 10: (2, 8), 12: (4, 8)}
"""Chunk widths per code width, least significant first; the last chunk is the signed one."""
BITS = tuple(CHUNKS)
BITSHIFT_OPSET = 11


def stored_bytes(n: int, bits: int) -> int:
    """Bytes of the packed codes of ``n`` values (scales and constants not included)."""
    return sum(-(-n // (8 // w)) for w in CHUNKS[bits])


def _plane_axis(shape: tuple[int, ...], per: int) -> int | None:
    """The axis the planes split (the last one that divides evenly, not the rows of a table), or
    None: planes are then flat runs of the weight, cut and reshaped after joining."""
    return next((axis for axis in reversed(range(len(shape)))
                 if shape[axis] > 1 and shape[axis] % per == 0 and (axis > 0 or len(shape) == 1)), None)


def pack(codes: npt.NDArray[np.integer], bits: int) -> list[npt.NDArray[Any]]:
    """Symmetric codes in ``[-(2^(b-1)-1), 2^(b-1)-1]`` -> one array per chunk (``uint8`` planes,
    or ``int8`` for a full-byte top chunk)."""
    qmax = 2 ** (bits - 1) - 1
    flat = codes.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < -qmax or flat.max() > qmax):
        raise ValueError(f"codes outside the symmetric {bits}-bit range")
    shape = codes.shape
    out: list[npt.NDArray[Any]] = []
    shift = 0
    widths = CHUNKS[bits]
    for k, width in enumerate(widths):
        part = flat >> shift  # arithmetic: the top chunk keeps the sign
        if k == len(widths) - 1:
            if width == 8:
                out.append(part.astype(np.int8).reshape(shape))
                break
            part = part + (1 << (width - 1))  # offset-binary
        part &= (1 << width) - 1
        per = 8 // width
        planes: npt.NDArray[np.int64]
        axis = _plane_axis(shape, per)
        if axis is not None:
            planes = np.stack(np.split(part.reshape(shape), per, axis=axis))
            target: tuple[int, ...] = planes.shape[1:]
        else:
            m = -(-part.size // per)
            padded = np.zeros(per * m, dtype=np.int64)
            padded[: part.size] = part
            planes = padded.reshape(per, m)
            target = (m,)
        byte = np.zeros(planes.shape[1:], dtype=np.int64)
        for t in range(per):
            byte |= planes[t] << (width * t)
        out.append(byte.astype(np.uint8).reshape(target))
        shift += width
    return out


def unpack(chunks: list[npt.NDArray[Any]], bits: int, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """Inverse of ``pack`` in numpy: the reference the decode graph is tested against."""
    n = int(np.prod(shape, dtype=np.int64))
    total = np.zeros(n, dtype=np.int64)
    shift = 0
    widths = CHUNKS[bits]
    for k, (width, arr) in enumerate(zip(widths, chunks, strict=True)):
        if width == 8:
            vals = arr.reshape(-1).astype(np.int64)
        else:
            per = 8 // width
            axis = _plane_axis(shape, per)
            b = arr.astype(np.int64) if axis is not None else arr.astype(np.int64).reshape(1, -1)
            vals = np.concatenate([(b >> (width * t)) & ((1 << width) - 1) for t in range(per)],
                                  axis=1 if axis is None else axis).reshape(-1)[:n]
            if k == len(widths) - 1:
                vals = vals - (1 << (width - 1))
        total += vals << shift
        shift += width
    return total.reshape(shape)


class _Chain:
    """Builds a decode chain: stored tensors by role, nodes referenced as ``@k``."""

    def __init__(self) -> None:
        self.stored: dict[str, npt.NDArray[Any]] = {}
        self.nodes: list[DecodeNode] = []

    def add(self, op: str, *inputs: str, **attrs: Any) -> str:
        self.nodes.append(DecodeNode(op, inputs, attrs))
        return f"@{len(self.nodes) - 1}"

    def const(self, value: Any, dtype: type) -> str:
        role = f"k{np.dtype(dtype).name}_{value}"
        self.stored.setdefault(role, np.array(value, dtype=dtype))
        return role

    def shift(self, x: str, by: int, direction: str) -> str:
        return x if by == 0 else self.add("BitShift", x, self.const(by, np.uint8), direction=direction)


MAX_SUM_COPIES = 4
"""A full-byte top chunk at place value 2^j joins the sum as 2^j copies up to this many (one node),
else through a Mul by 2^j (one more float-sized intermediate)."""


def packed_decode(codes: npt.NDArray[np.integer], scale: npt.NDArray[np.float32], bits: int, *, opset: int,
                  decoded: npt.NDArray[np.float32], label: str) -> Decode:
    """Stored chunks + ``scale`` and the decode chain rebuilding ``codes * scale`` bit for bit."""
    if bits not in CHUNKS:
        raise NotEncodable(f"no packed layout for {bits}-bit codes")
    if opset < BITSHIFT_OPSET:
        raise NotEncodable(f"packed codes need BitShift (opset >= {BITSHIFT_OPSET}); the model is opset {opset}")
    widths = CHUNKS[bits]
    chain = _Chain()
    terms: list[str] = []
    shift = 0
    for c, (width, arr) in enumerate(zip(widths, pack(codes, bits), strict=True)):
        chain.stored[f"c{c}"] = arr
        top = c == len(widths) - 1
        if width == 8:
            value = chain.add("Cast", f"c{c}", to=TensorProto.FLOAT)
            copies = 1 << shift
            if copies > MAX_SUM_COPIES:
                value, copies = chain.add("Mul", value, chain.const(float(copies), np.float32)), 1
            terms += [value] * copies
        else:
            terms.append(_planes(chain, f"c{c}", arr, width=width, align=shift, n=int(codes.size),
                                 shape=codes.shape))
            if top:
                terms.append(chain.const(-float(1 << (width - 1 + shift)), np.float32))
        shift += width
    total = terms[0] if len(terms) == 1 else chain.add("Sum", *terms)
    chain.stored["scale"] = scale
    chain.add("Mul", total, "scale")
    return Decode(chain.stored, tuple(chain.nodes), decoded, label)


def _planes(chain: _Chain, role: str, arr: npt.NDArray[np.uint8], *, width: int, align: int, n: int,
            shape: tuple[int, ...]) -> str:
    """Float values of one planar chunk at place value ``2^align``: each plane's bits moved there by
    BitShift and Mod on the bytes, the planes concatenated (cut and reshaped when stored flat),
    widened. No shift ever carries a bit past bit 7 (onnxruntime truncates to the byte, OpenVINO
    does not)."""
    per = 8 // width
    planes = []
    for t in range(per):
        x = chain.shift(role, width * t, "RIGHT")  # plane t at the bottom, the planes below it gone
        if t < per - 1:
            x = chain.add("Mod", x, chain.const(1 << width, np.uint8))  # the planes above it gone
        planes.append(chain.shift(x, align, "LEFT"))  # to its place value, never past bit 7
    axis = _plane_axis(shape, per)
    if axis is not None:  # counted from the end: the same axis of a gathered row (onnxgraph.rewrite)
        joined = chain.add("Concat", *planes, axis=axis - len(shape))
    else:  # stored flat: join, cut the padding, restore the shape
        joined = chain.add("Concat", *planes, axis=0)
        if per * arr.size != n:
            chain.stored["start"] = np.array([0], dtype=np.int64)
            chain.stored["end"] = np.array([n], dtype=np.int64)
            chain.stored["axes"] = np.array([0], dtype=np.int64)
            joined = chain.add("Slice", joined, "start", "end", "axes")
        chain.stored["shape"] = np.array(shape, dtype=np.int64)
        joined = chain.add("Reshape", joined, "shape")
    return chain.add("Cast", joined, to=TensorProto.FLOAT)
