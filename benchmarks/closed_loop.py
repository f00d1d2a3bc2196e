"""What closed-loop verification costs (issue 19: <= 2x the per-call verification of the same calls).

24 speech clips (espeak-ng + noise, ``silero_workload.clips``) streamed chunk by chunk through Silero
VAD with its state fed back, recorded with ``hatch-shrinkray record`` (24 streams). Then, in fresh
processes, interleaved, ``hatch-shrinkray shrink --method int8`` of the model verified:

* ``closed``: on that recording, each stream in closed loop (the shrunk model on its own state);
* ``per-call``: on the very same calls as a plain ``.npz`` of complete feeds (every step on the
  original's state), judged call by call, as verification ran before issue 19.

Prints the medians of CPU and wall time and what each verification said.

    .venv/bin/python -m benchmarks.closed_loop [--runs 5] [--clips 24]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "closed_loop"
HSR = str(Path(sys.executable).with_name("hatch-shrinkray"))
STREAM = textwrap.dedent("""
    import sys
    import numpy as np, onnxruntime as ort
    from benchmarks.silero_workload import clips
    sess = ort.InferenceSession(sys.argv[1])
    sr = np.array(16000, np.int64)
    calls = {"input": [], "state": [], "sr": []}
    for audio in clips(int(sys.argv[2])):
        state = np.zeros((2, 1, 128), np.float32)
        context = np.zeros(64, np.float32)
        for k in range(0, len(audio) - 511, 512):
            chunk = np.concatenate([context, audio[k:k + 512]])[None]
            calls["input"].append(chunk)
            calls["state"].append(state)
            calls["sr"].append(sr)
            out, state = sess.run(None, {"input": chunk, "state": state, "sr": sr})
            context = chunk[0, -64:]
    np.savez(sys.argv[3], **{k: np.stack(v) for k, v in calls.items()})
""")


def _prepare(model: Path, clips: int) -> tuple[Path, Path]:
    CACHE.mkdir(parents=True, exist_ok=True)
    rec, calls = CACHE / f"rec{clips}", CACHE / f"calls{clips}.npz"
    if not calls.exists():
        script = CACHE / "stream.py"
        script.write_text(STREAM)
        subprocess.run([HSR, "record", "-o", str(rec), "--", sys.executable, str(script), str(model), str(clips),
                        str(calls)], check=True, cwd=Path(__file__).resolve().parents[1])
    return rec, calls


def _timed(model: Path, inputs: Path) -> tuple[float, float, str]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-c", "import resource, subprocess, sys, time; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); w = time.perf_counter() - t; "
               "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(w, r.ru_utime + r.ru_stime); print(p.stdout.splitlines()[0] if p.stdout else p.stderr)",
               HSR, "shrink", str(model), "-o", out, "--method", "int8", "--inputs", str(inputs)]
        lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    wall, cpu = map(float, lines[0].split())
    return wall, cpu, lines[1]


def main() -> None:
    from benchmarks.corpus import model_path

    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--clips", type=int, default=24)
    args = p.parse_args()
    model = model_path("silero_vad")
    rec, calls = _prepare(model, args.clips)
    times: dict[str, list[tuple[float, float]]] = {"closed": [], "per-call": []}
    said = {}
    for _ in range(args.runs):
        for name, inputs in (("closed", rec), ("per-call", calls)):
            start = time.perf_counter()
            wall, cpu, line = _timed(model, inputs)
            times[name].append((wall, cpu))
            said[name] = line
            del start
    steps = int(np.load(calls)["input"].shape[0])
    result = {name: {"wall": statistics.median(w for w, _ in t), "cpu": statistics.median(c for _, c in t)}
              for name, t in times.items()}
    print(json.dumps({"clips": args.clips, "steps": steps, "runs": args.runs, **result}, indent=1))
    print(f"closed / per-call: CPU x{result['closed']['cpu'] / result['per-call']['cpu']:.2f}, "
          f"wall x{result['closed']['wall'] / result['per-call']['wall']:.2f}")
    for name, line in said.items():
        print(f"{name}: {line}")


if __name__ == "__main__":
    main()
