"""Memory as users pay it: each model's session created in a fresh process, as a user's program
creates it, resident memory read before and after, then inferences run and it is read again
(``footprint``). Measured, never estimated from the file: onnxruntime folds some encodings back to
float32 at load and keeps others packed, and its own kernels prepack weights besides; only the
running process says what it holds.

The build's own process cannot measure it (it holds both models, the samples and more), so a child
runs ``PROBE`` (standard library, numpy and onnxruntime), as ``shipping.loadcheck`` loads models.
The child first creates a session of a one-node model, so that what onnxruntime sets up once per
process (its environment, kernel registries, allocators) is not counted as the
model's: the figures are what the model's own session adds, its weights above all. Loading frees
buffers the C allocator keeps (the parsed file, folded intermediates) until later allocations reuse
them, and running keeps buffers of the activations: so the session's figure is read after handing
free memory back (``malloc_trim``, glibc), the steady one after the inferences as it is. One thread
per session, so the CPU times are the model's. Resident memory is read from ``/proc/self/status``
(Linux): elsewhere nothing is measured, and the build says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from onnx import ModelProto

from hatch_shrinkray.codec import loads
from hatch_shrinkray.footprint import Footprint, Memory
from hatch_shrinkray.onnxgraph.rewrite import ROWS_NOTE
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.recording.npz import write_arrays
from hatch_shrinkray.result import TensorRecord, VerifyResult
from hatch_shrinkray.samples import Feed

RUNS = 100
"""Inferences before the steady figure is read: buffers the first runs allocate stay."""
TIMEOUT = 1800
NOT_PACKED = "not packed: "
"""How a record's note says why no packed kernel took its weight (the declared runtimes lack it)."""
PACKED_WORDS = ("MatMulNBits", "GatherBlockQuantized")
"""How a record's encoding says its weight stays packed in memory (beside int8's gathered rows, and
``int4``'s ``(MatMulNBits)``)."""

PROBE = r"""
import ctypes, json, os, sys, time
def trim():
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
def vm(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise SystemExit(5)
import numpy as np
import onnxruntime as ort
model, feed_path, runs, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with np.load(feed_path) as z:
    feed = {k: z[k] for k in z.files}
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
options.log_severity_level = 4
warm = ort.InferenceSession(first, options, providers=["CPUExecutionProvider"])
warm.run(None, {"x": np.zeros(1, np.float32)})
trim()
base = vm("VmRSS")
start = time.process_time()
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
load = time.process_time() - start
peak = vm("VmHWM")
trim()
created = vm("VmRSS")
times = []
for _ in range(runs):
    start = time.process_time()
    session.run(None, feed)
    times.append(time.process_time() - start)
steady = vm("VmRSS")
times.sort()
print(json.dumps({"session_kb": created - base, "steady_kb": steady - base, "peak_kb": peak - base,
                  "load_s": round(load, 4), "run_ms": round(1000 * times[len(times) // 2], 4)}), flush=True)
os._exit(0)
"""


class NotMeasured(Exception):
    """The footprint could not be measured here; the message says why."""


def footprint(model: str | bytes, feed: Feed, runs: int = RUNS) -> Footprint:
    """One model's footprint, measured in a fresh process on ``feed`` (``model``: a path or bytes)."""
    if not Path("/proc/self/status").exists():
        raise NotMeasured("resident memory is read from /proc, which this system lacks")
    with tempfile.TemporaryDirectory(prefix="shrinkray-memory-") as tmp:
        path = model if isinstance(model, str) else os.path.join(tmp, "model.onnx")
        if isinstance(model, bytes):
            Path(path).write_bytes(model)
        feed_path = os.path.join(tmp, "feed.npz")
        write_arrays(Path(feed_path), {k: np.asarray(v) for k, v in feed.items()})
        first = os.path.join(tmp, "first.onnx")
        Path(first).write_bytes(_one_node())
        try:
            proc = subprocess.run([sys.executable, "-c", PROBE, path, feed_path, str(runs), first], capture_output=True,
                                  text=True, check=False, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise NotMeasured(f"the measuring process did not finish within {TIMEOUT} s") from exc
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())[-200:]
        raise NotMeasured(f"the measuring process failed (exit code {proc.returncode}: {said})")
    measured: Footprint = loads(Footprint, proc.stdout.strip().splitlines()[-1])
    return measured


def _one_node() -> bytes:
    """A model of one Identity node, whose session sets up what onnxruntime sets up once per process."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "first",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return bytes(model.SerializeToString())


def measure(original: str | bytes, shrunk: str | bytes, feed: Feed, *, input_words: str,
            records: Sequence[TensorRecord], withheld: Sequence[str] = (), runs: int = RUNS) -> Memory:
    """Both models' footprints, each in its own fresh process (the original first), with the share
    of the weights that ``records`` leave float in memory."""
    first = footprint(original, feed, runs)
    second = footprint(shrunk, feed, runs)
    float_bytes, total = float_share(records)
    return Memory(first, second, runs, input_words, float_bytes, total, tuple(withheld))


def feed_for(model: ModelProto, options: VerifyOptions | None, recorded: Sequence[Feed], *, sha256: str,
             name: str) -> tuple[Feed, str] | None:
    """The input the footprints run on, and its words: the first recorded one (``recorded``, else the
    first of ``options.inputs`` for this model), else one generated from ``model``'s signature as
    verification generates them (None: none could be made)."""
    from hatch_shrinkray.errors import ShrinkrayError
    from hatch_shrinkray.verification.inputs import generate, load_samples, specs_of_model

    options = options or VerifyOptions()
    try:
        specs = specs_of_model(model)
        if not recorded and options.inputs is not None:
            with contextlib.suppress(ShrinkrayError):  # no recording of this model: generated, as verification does
                recorded = load_samples(Path(options.inputs), specs, model_sha256=sha256, model_name=name).feeds
        if recorded:
            return dict(recorded[0]), "the first recorded input"
        return generate(specs, options)[0], "a generated input"
    except (ShrinkrayError, IndexError):
        return None


def attach(verification: VerifyResult, original: str | bytes, shrunk: str | bytes, feed: tuple[Feed, str] | None, *,
           records: Sequence[TensorRecord]) -> VerifyResult:
    """``verification`` with both models' footprints measured (``measure``), or a note saying why
    they could not be; and a note naming the packed kernels the declared runtimes lack, if any."""
    lacking = withheld(records)
    notes = [f"not packed in memory: {'; '.join(lacking)}"] if lacking else []
    why = "no input to run the models on"
    if feed is not None:
        try:
            memory = measure(original, shrunk, feed[0], input_words=feed[1], records=records, withheld=lacking)
            return dataclasses.replace(verification, memory=memory, notes=(*verification.notes, *notes))
        except NotMeasured as exc:
            why = str(exc)
    return dataclasses.replace(verification, notes=(*verification.notes, *notes, f"memory not measured: {why}"))


def withheld(records: Sequence[TensorRecord]) -> tuple[str, ...]:
    """Why no packed kernel took some weights (``NOT_PACKED`` in their notes), each reason once."""
    found = (part.strip()[len(NOT_PACKED):] for r in records for part in r.note.split(";")
             if part.strip().startswith(NOT_PACKED))
    return tuple(dict.fromkeys(found))


def packed(record: TensorRecord) -> bool:
    """Whether a record's weight stays packed in memory once the session is created."""
    return record.encoding.startswith(PACKED_WORDS) or "(MatMulNBits)" in record.encoding or ROWS_NOTE in record.note


def float_share(records: Sequence[TensorRecord]) -> tuple[int, int]:
    """Bytes of the recorded weights that are float in memory once loaded (folded or kept), and of
    all of them, as float32 (what the original holds)."""
    total = sum(r.original_bytes for r in records)
    return total - sum(r.original_bytes for r in records if packed(r)), total
