"""Sample-input files that are broken or would check nothing, one per case, each with the words its
refusal must contain: the API refuses them (tests/unit/test_inputs.py) and so does the console script
(tests/test_inputs.py), naming the file and the array."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnx_builders import init, mlp, model, save, vi, weight


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def huge_header() -> bytes:
    """A ``.npy`` whose header declares 10^10 float32 values (40 GB) followed by a few bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (100000, 100000)})
    return buf.getvalue() + b"\0" * 64


CASES: dict[str, tuple[str, str]] = {
    # case: (what the file holds, expected message fragment)
    "zero-samples": ("x: 0 samples", "holds 0 samples: there is nothing to verify on"),
    "string-array": ("x: strings", "array 'x' has dtype <U5, which no model input takes"),
    "pickle": ("x: Python objects", "array 'x' holds Python objects (a pickle); refused"),
    "corrupt-header": ("x.npy: garbage", "array 'x' is corrupt"),
    "not-a-zip": ("garbage", "cannot read sample inputs"),
    "oversized": ("x.npy declares 40 GB", "array 'x' would take 40000.0 MB when loaded, over the 1000 MB limit"),
    "all-nan": ("x: NaN everywhere", "array 'x' (sample 0) is entirely NaN/inf: outputs computed from it check"),
    "float-for-int": ("ids: floats for an int64 input", "array 'ids' is float32 but the input takes int64"),
    "wrong-name": ("y instead of x", "missing arrays for inputs x; arrays y match no model input"),
    "truncated-recording": ("a recording whose metadata is cut", "not a readable recording"),
}


def sample_file(case: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{case}.npz"
    x = np.random.default_rng(0).standard_normal((4, 2, 256)).astype(np.float32)
    if case == "zero-samples":
        np.savez(path, x=np.zeros((0, 2, 256), np.float32))
    elif case == "string-array":
        np.savez(path, x=np.array(["hello", "world"]))
    elif case == "pickle":
        np.savez(path, x=np.array([{"a": 1}, None], dtype=object))
    elif case == "corrupt-header":
        write_zip(path, {"x.npy": b"\x93NUMPY\x01\x00garbage"})
    elif case == "not-a-zip":
        path.write_bytes(b"this is not a zip file at all")
    elif case == "oversized":
        write_zip(path, {"x.npy": huge_header()})
    elif case == "all-nan":
        np.savez(path, x=np.full((4, 2, 256), np.nan, np.float32))
    elif case == "float-for-int":
        np.savez(path, ids=np.ones((2, 8), np.float32))
    elif case == "wrong-name":
        np.savez(path, y=x)
    elif case == "truncated-recording":
        meta = json.dumps({"format": "hatch-shrinkray-recording", "version": 1})
        write_zip(path, {"__meta__.npy": npy_bytes(np.array(meta)), "s0000_0.npy": npy_bytes(x[0])})
    return path


def model_for(case: str, tmp_path: Path) -> Path:
    if case == "float-for-int":
        emb = weight((512, 64), 1)
        m = model([helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("ReduceMean", ["e"], ["y"],
                                                                                       axes=[1], keepdims=0)],
                  [vi("ids", ["b", 8], onnx.TensorProto.INT64)], [vi("y", ["b", 64])], [init("E", emb)])
        return save(m, tmp_path / "emb.onnx")
    return save(mlp(), tmp_path / "m.onnx")
