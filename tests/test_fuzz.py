"""Fuzzing: seeded, bounded mutations of valid models' bytes (bit flips, truncation, insertion,
deletion, duplication). Shrinking each one must either succeed with a verified model or raise
ShrinkrayError; never another exception, a hang or a crash.

Cases run in worker subprocesses (two, one per core) that are killed and replaced when a case
exceeds its time limit or the process dies, so a hang or a segfault is reported as such, with the
case id that reproduces it: ``FUZZ_CASES=<base>:<seed> pytest tests/test_fuzz.py -k replay``.
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from hatch_shrinkray import ShrinkOptions, ShrinkrayError, shrink

from onnx_builders import const, init, mlp, model, vi, weight

CASES_PER_BASE = int(os.environ.get("FUZZ_CASES_PER_BASE", "200"))
CASE_TIMEOUT = 20.0
WORKERS = 2
MEMORY_LIMIT = 4 * 2**30

WORKER = r"""
import json, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from hatch_shrinkray import ShrinkOptions, ShrinkrayError, shrink
from hatch_shrinkray.options import VerifyOptions
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    case = json.loads(line)
    try:
        result = shrink(case["src"], case["dst"], ShrinkOptions(method=case["method"], min_elements=1024))
        ok = result.verification is not None and result.verification.passed
        # kept: generated inputs could not verify it (a mutation that makes the outputs NaN), so the
        # original was written, and the result says so
        out = {"outcome": "ok" if ok else "kept" if result.unverified else "unverified"}
    except ShrinkrayError as exc:
        out = {"outcome": "error", "message": str(exc).splitlines()[0]}
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "hatch_shrinkray" in f.filename]
        where = frames[-1].filename.rsplit("/", 1)[-1] if frames else "?"
        out = {"outcome": "exception", "type": type(exc).__name__, "where": where,
               "message": str(exc)[:300], "traceback": traceback.format_exc()[-1500:]}
    print(json.dumps(out), flush=True)
"""


# --- valid starting points -------------------------------------------------------------------


def base_mlp() -> onnx.ModelProto:
    return mlp(64, 64, 10)


def base_constants_and_if() -> onnx.ModelProto:
    def branch(name: str, seed: int) -> onnx.GraphProto:
        return helper.make_graph([const("W", weight((64, 32), seed)), helper.make_node("MatMul", ["x", "W"], [name])],
                                 name, [], [vi(name, ["b", 32])])

    if_node = helper.make_node("If", ["cond"], ["y"], then_branch=branch("t", 1), else_branch=branch("e", 2))
    return model([if_node], [vi("x", ["b", 64]), vi("cond", [], TensorProto.BOOL)], [vi("y", ["b", 32])])


def base_conv() -> onnx.ModelProto:
    return model([helper.make_node("Conv", ["img", "K"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["r"]), helper.make_node("ReduceMean", ["r"], ["y"], axes=[2, 3])],
                 [vi("img", [1, 16, 8, 8])], [vi("y", [1, 32, 1, 1])], [init("K", weight((32, 16, 3, 3), 3))])


def base_reshape() -> onnx.ModelProto:
    """Integer initializers (a Reshape target), value_floats/value_ints Constants, metadata."""
    m = model([helper.make_node("Constant", [], ["shape"], value_ints=[-1, 32]),
               helper.make_node("Constant", [], ["bias"], value_floats=[0.5] * 32),
               helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["r"]),
               helper.make_node("Add", ["r", "bias"], ["y"])],
              [vi("x", [2, 64])], [vi("y", [4, 32])], [init("W", weight((64, 64), 5))], doc_string="fuzz base")
    helper.set_model_props(m, {"author": "fuzz"})
    return m


EXTERNAL_DATA = "ext.data"


def base_external() -> onnx.ModelProto:
    """Weights in ``ext.data`` beside the model (written by ``make_cases``): mutations hit the
    location/offset/length entries."""
    m = base_mlp()
    for t in m.graph.initializer:
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
    return m


def external_data_bytes() -> bytes:
    return b"".join(onnx.numpy_helper.to_array(t).tobytes() for t in base_mlp().graph.initializer)


def _point_at_data(m: onnx.ModelProto) -> onnx.ModelProto:
    offset = 0
    for t, ref in zip(m.graph.initializer, base_mlp().graph.initializer, strict=True):
        length = len(ref.raw_data)
        for key, value in (("location", EXTERNAL_DATA), ("offset", str(offset)), ("length", str(length))):
            t.external_data.add(key=key, value=value)
        offset += length
    return m


BASES: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    "mlp-int8": (base_mlp, "int8"),
    "mlp-fp16": (base_mlp, "fp16"),
    "mlp-dynamic": (base_mlp, "dynamic"),
    "if-int8": (base_constants_and_if, "int8"),
    "conv-float-levels": (base_conv, "float-levels"),
    "reshape-int8": (base_reshape, "int8"),
    "external-int8": (lambda: _point_at_data(base_external()), "int8"),
}


# --- mutations -------------------------------------------------------------------------------


def position(rng: random.Random, n: int) -> int:
    """Biased towards the graph's structure: protobuf writes nodes first and the graph's inputs and
    outputs last, with the (bulky, forgiving) initializer bytes in between."""
    where = rng.random()
    if where < 0.4:
        return rng.randrange(min(n, 256))
    if where < 0.7:
        return rng.randrange(max(0, n - 256), n)
    return rng.randrange(n)


def mutate(data: bytes, seed: int) -> tuple[bytes, str]:
    """One seeded, bounded mutation (or two stacked); returns the bytes and a description."""
    rng = random.Random(seed)
    out = bytearray(data)
    steps = []
    for _ in range(rng.choice((1, 1, 2))):
        kind = rng.choice(("flip", "flip", "truncate", "insert", "delete", "duplicate", "set-byte"))
        n = len(out)
        if n == 0:
            break
        pos = position(rng, n)
        if kind == "flip":
            bits = rng.randint(1, 8)
            for _ in range(bits):
                p = position(rng, n)
                out[p] ^= 1 << rng.randrange(8)
            steps.append(f"flip {bits} bits")
        elif kind == "truncate":
            out = out[:pos]
            steps.append(f"truncate to {pos}")
        elif kind == "insert":
            chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            out[pos:pos] = chunk
            steps.append(f"insert {len(chunk)} at {pos}")
        elif kind == "delete":
            k = rng.randint(1, 16)
            del out[pos:pos + k]
            steps.append(f"delete {k} at {pos}")
        elif kind == "duplicate":
            k = rng.randint(1, 64)
            out[pos:pos] = out[pos:pos + k]
            steps.append(f"duplicate {k} at {pos}")
        else:
            value = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))
            out[pos] = value
            steps.append(f"byte {pos} = {value:#x}")
    return bytes(out), ", ".join(steps)


# --- the worker pool -------------------------------------------------------------------------


class Worker:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(MEMORY_LIMIT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready = self._read(60)
        assert ready == {"ready": True}, ready

    def _read(self, timeout: float) -> dict[str, str] | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            return {}
        parsed: dict[str, str] = json.loads(line)
        return parsed

    def run(self, case: dict[str, str]) -> dict[str, str]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        reply = self._read(CASE_TIMEOUT)
        if reply is None:
            self.stop()
            return {"outcome": "hang", "message": f"no answer within {CASE_TIMEOUT:g} s"}
        if reply == {}:
            code = self.proc.wait()
            self.proc = None
            return {"outcome": "crash", "message": f"worker died with exit code {code}"}
        return reply

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@dataclass(frozen=True)
class Case:
    id: str
    src: Path
    dst: Path
    method: str
    mutation: str


def make_cases(directory: Path, ids: list[str]) -> list[Case]:
    cases = []
    originals: dict[str, bytes] = {}
    for case_id in ids:
        base, seed = case_id.rsplit(":", 1)
        build, method = BASES[base]
        if base not in originals:
            originals[base] = build().SerializeToString()
        data, description = mutate(originals[base], int(seed))
        src = directory / "in" / f"{base}-{seed}.onnx"
        if not src.parent.exists():
            src.parent.mkdir(parents=True)
            (src.parent / EXTERNAL_DATA).write_bytes(external_data_bytes())
        src.write_bytes(data)
        cases.append(Case(case_id, src, directory / "out" / f"{base}-{seed}.onnx", method, description))
    return cases


def run_cases(cases: list[Case]) -> dict[str, dict[str, str]]:
    results: dict[str, dict[str, str]] = {}
    queue = list(cases)
    lock = threading.Lock()

    def drain() -> None:
        worker = Worker()
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    case = queue.pop()
                reply = worker.run({"src": str(case.src), "dst": str(case.dst), "method": case.method})
                with lock:
                    results[case.id] = {**reply, "mutation": case.mutation}
        finally:
            worker.stop()

    threads = [threading.Thread(target=drain) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def default_ids() -> list[str]:
    return [f"{base}:{seed}" for base in BASES for seed in range(CASES_PER_BASE)]


BAD = ("exception", "hang", "crash", "unverified")

KNOWN_BUGS: dict[tuple[str, str], str] = {}
"""Exception type and the engine file it escaped from -> an open bug (with an xfail repro below).
Empty: the five findings of the first runs (external-data location/offset/length handling,
non-UTF-8 names) are fixed and kept as the reproductions below."""


def signature(result: dict[str, str]) -> tuple[str, str]:
    return result.get("type", ""), result.get("where", "")


def test_bases_are_valid_and_shrink(tmp_path: Path) -> None:
    cases = []
    for base, (build, method) in BASES.items():
        src = tmp_path / "in" / f"{base}.onnx"
        src.parent.mkdir(exist_ok=True)
        (src.parent / EXTERNAL_DATA).write_bytes(external_data_bytes())
        src.write_bytes(build().SerializeToString())
        cases.append(Case(base, src, tmp_path / "out" / f"{base}.onnx", method, "none"))
    results = run_cases(cases)
    assert {k: v["outcome"] for k, v in results.items()} == dict.fromkeys(BASES, "ok"), results


@pytest.mark.extended
def test_mutated_models_succeed_or_raise_shrinkray_error(tmp_path: Path) -> None:
    results = run_cases(make_cases(tmp_path, default_ids()))
    outcomes = [v["outcome"] for v in results.values()]
    unknown = {k: v for k, v in results.items()
               if v["outcome"] in BAD and not (v["outcome"] == "exception" and signature(v) in KNOWN_BUGS)}
    assert not unknown, json.dumps(unknown, indent=1)
    # not vacuous: mutations both survive and break models
    assert outcomes.count("ok") > 0 and outcomes.count("error") > 0
    for k, v in results.items():
        if v["outcome"] == "ok":
            assert (tmp_path / "out" / f"{k.replace(':', '-')}.onnx").is_file()


def test_replay(tmp_path: Path) -> None:
    """``FUZZ_CASES=mlp-int8:17,if-int8:3 pytest tests/test_fuzz.py -k replay -s``: rerun and show cases."""
    ids = [c for c in os.environ.get("FUZZ_CASES", "").split(",") if c]
    if not ids:
        pytest.skip("set FUZZ_CASES=<base>:<seed>[,...] to replay fuzz cases")
    results = run_cases(make_cases(tmp_path, ids))
    print(json.dumps(results, indent=1))
    assert all(v["outcome"] in ("ok", "kept", "error") for v in results.values())


# --- the (fixed) findings, as small deterministic reproductions ---------------------------------


def external_model(tmp_path: Path, location: str = EXTERNAL_DATA, drop: tuple[tuple[str, str], ...] = ()) -> Path:
    """base_mlp with its weights in ext.data; ``location`` replaces W2's location, ``drop`` removes
    (tensor, key) entries, as a damaged file would."""
    (tmp_path / EXTERNAL_DATA).write_bytes(external_data_bytes())
    m = base_external()
    offset = 0
    for t, ref in zip(m.graph.initializer, base_mlp().graph.initializer, strict=True):
        n = len(ref.raw_data)
        entries = (("location", location if t.name == "W2" else EXTERNAL_DATA), ("offset", str(offset)),
                   ("length", str(n)))
        for key, value in entries:
            if (t.name, key) not in drop:
                t.external_data.add(key=key, value=value)
        offset += n
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def expect_shrinkray_error(path: Path) -> None:
    """As the fuzz workers run it (64 x 64 weights are eligible with min-elements 1024)."""
    with pytest.raises(ShrinkrayError):
        shrink(path, path.with_name("out.onnx"), ShrinkOptions(min_elements=1024))


def test_finding_external_tensor_without_location(tmp_path: Path) -> None:
    expect_shrinkray_error(external_model(tmp_path, drop=(("W2", "location"),)))


def test_finding_external_location_not_utf8(tmp_path: Path) -> None:
    path = external_model(tmp_path, location="ext.daXa")
    path.write_bytes(path.read_bytes().replace(b"ext.daXa", b"ext.da\xffa"))
    expect_shrinkray_error(path)


def test_finding_external_location_with_nul(tmp_path: Path) -> None:
    expect_shrinkray_error(external_model(tmp_path, location="ext\x00.data"))


def test_finding_external_tensor_without_length(tmp_path: Path) -> None:
    """No offset/length: onnx reads W1 to the end of ext.data (W1 and W2), 4736 floats for 64 x 64."""
    expect_shrinkray_error(external_model(tmp_path, drop=(("W1", "offset"), ("W1", "length"))))


def test_finding_input_name_not_utf8(tmp_path: Path) -> None:
    m = model([helper.make_node("MatMul", ["inpX", "W"], ["y"])], [vi("inpX", ["b", 64])], [vi("y", ["b", 64])],
              [init("W", weight((64, 64), 1))])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString().replace(b"inpX", b"inp\x80"))
    expect_shrinkray_error(path)
