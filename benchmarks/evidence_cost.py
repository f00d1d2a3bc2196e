"""What the evidence costs (issue 19): closed-loop verification (<= 2x the per-call verification of
the same calls) and cross-fitting int8's output-aware rounding (<= 2x int8 with a recording without it).

``closed-loop``:

24 speech clips (espeak-ng + noise, ``silero_workload.clips``) streamed chunk by chunk through Silero
VAD with its state fed back, recorded with ``hatch-shrinkray record`` (24 streams). Then, in fresh
processes, interleaved, ``hatch-shrinkray shrink --method int8`` of the model verified:

* ``closed``: on that recording, each stream in closed loop (the shrunk model on its own state);
* ``per-call``: on the very same steps as a plain ``.npz`` of complete feeds (every step on the
  original's recorded state), judged call by call, as verification ran before issue 19.

``cross-fit``: ``shrink --method int8 --inputs REC`` of PP-OCRv6's recogniser with the recording
``benchmarks.record_task`` makes (``hatch-shrinkray record``), as shipped (two cross-fitted folds,
then the fit on every sample) against the same command with the guard off (``FOLDS = 1``: the fit on
every sample alone, as int8 with a recording was before issue 19), interleaved fresh processes.

Prints the medians of CPU and wall time and what each run said.

    .venv/bin/python -m benchmarks.evidence_cost closed-loop [--runs 5] [--clips 24]
    .venv/bin/python -m benchmarks.evidence_cost cross-fit [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "evidence_cost"
HSR = str(Path(sys.executable).with_name("hatch-shrinkray"))
STREAM = textwrap.dedent("""
    import sys
    import numpy as np, onnxruntime as ort
    from benchmarks.silero_workload import clips
    sess = ort.InferenceSession(sys.argv[1])
    sr = np.array(16000, np.int64)
    for audio in clips(int(sys.argv[2])):
        state = np.zeros((2, 1, 128), np.float32)
        context = np.zeros(64, np.float32)
        for k in range(0, len(audio) - 511, 512):
            chunk = np.concatenate([context, audio[k:k + 512]])[None]
            out, state = sess.run(None, {"input": chunk, "state": state, "sr": sr})
            context = chunk[0, -64:]
""")


def _per_call(model: Path, rec: Path, out: Path) -> None:
    """The recording's steps as complete feeds, every step on the original's own state (open loop)."""
    import onnxruntime as ort

    from hatch_shrinkray.bench import Sequencing, completed, read_recording, run_in_order

    recording = read_recording(next(rec.glob("*.npz")))
    feeds = [dict(s) for s in recording.samples]
    seq = Sequencing(recording.units, recording.feedback, recording.streams)
    sess = ort.InferenceSession(str(model))
    names = [o.name for o in sess.get_outputs()]
    outputs = run_in_order(lambda feed: list(sess.run(None, feed)), feeds, seq, names)
    full = completed(feeds, seq, outputs, names)
    np.savez(out, **{k: np.stack([f[k] for f in full]) for k in full[0]})


def _prepare(model: Path, clips: int) -> tuple[Path, Path]:
    CACHE.mkdir(parents=True, exist_ok=True)
    rec, calls = CACHE / f"rec{clips}", CACHE / f"calls{clips}.npz"
    if not calls.exists():
        script = CACHE / "stream.py"
        script.write_text(STREAM)
        subprocess.run([HSR, "record", "-o", str(rec), "--", sys.executable, str(script), str(model), str(clips)],
                       check=True, cwd=Path(__file__).resolve().parents[1])
        _per_call(model, rec, calls)
    return rec, calls


GUARD_OFF = ("import sys; from hatch_shrinkray.bench import without_fitting_guard; without_fitting_guard(); "
             "import runpy; sys.argv[0] = 'hatch-shrinkray'; runpy.run_module('hatch_shrinkray', run_name='__main__')")


def _timed(model: Path, inputs: Path, *, guard: bool = True) -> tuple[float, float, str]:
    """A fresh ``shrink --method int8`` process: wall and CPU time, and its first line."""
    with tempfile.TemporaryDirectory() as out:
        command = [HSR] if guard else [sys.executable, "-c", GUARD_OFF]
        cmd = [sys.executable, "-c", "import resource, subprocess, sys, time; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); w = time.perf_counter() - t; "
               "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(w, r.ru_utime + r.ru_stime); print(p.stdout.splitlines()[0] if p.stdout else p.stderr)",
               *command, "shrink", str(model), "-o", out, "--method", "int8", "--inputs", str(inputs)]
        lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    wall, cpu = map(float, lines[0].split())
    return wall, cpu, lines[1]


def _report(times: dict[str, list[tuple[float, float]]], said: dict[str, str], extra: dict[str, object]) -> None:
    result = {name: {"wall": statistics.median(w for w, _ in t), "cpu": statistics.median(c for _, c in t)}
              for name, t in times.items()}
    print(json.dumps({**extra, **result}, indent=1))
    first, second = list(result)
    print(f"{first} / {second}: CPU x{result[first]['cpu'] / result[second]['cpu']:.2f}, "
          f"wall x{result[first]['wall'] / result[second]['wall']:.2f}")
    for name, line in said.items():
        print(f"{name}: {line}")


def closed_loop(runs: int, clips: int) -> None:
    from benchmarks.corpus import model_path

    model = model_path("silero_vad")
    rec, calls = _prepare(model, clips)
    times: dict[str, list[tuple[float, float]]] = {"closed": [], "per-call": []}
    said = {}
    for _ in range(runs):
        for name, inputs in (("closed", rec), ("per-call", calls)):
            wall, cpu, line = _timed(model, inputs)
            times[name].append((wall, cpu))
            said[name] = line
    _report(times, said, {"clips": clips, "steps": int(np.load(calls)["input"].shape[0]), "runs": runs})


def cross_fit(runs: int) -> None:
    from benchmarks.corpus import model_path
    from benchmarks.record_task import RECORDINGS, record

    model = model_path("ppocrv6_rec")
    rec = RECORDINGS / "ppocrv6_rec"
    if not any(rec.glob("*.npz")):
        record("ppocrv6_rec", model)
    times: dict[str, list[tuple[float, float]]] = {"cross-fitted": [], "fitted on all": []}
    said = {}
    for _ in range(runs):
        for name, guard in (("cross-fitted", True), ("fitted on all", False)):
            wall, cpu, line = _timed(model, rec, guard=guard)
            times[name].append((wall, cpu))
            said[name] = line
    _report(times, said, {"runs": runs})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("closed-loop", "cross-fit"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--clips", type=int, default=24)
    args = p.parse_args()
    if args.what == "closed-loop":
        closed_loop(args.runs, args.clips)
    else:
        cross_fit(args.runs)


if __name__ == "__main__":
    main()
