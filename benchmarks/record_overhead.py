"""What ``hatch-shrinkray record`` costs over the command alone (issue 19: <= 1.3x).

Two workloads, each a fresh Python process that prints the seconds its own loop took:

* ``silero``: the stock Silero VAD model (silero-vad 6.2.3's ``silero_vad.onnx``) streamed over
  synthetic 16-bit audio, 576-sample chunks with its ``stateN`` fed back as ``state`` (a recurrent
  model: ``record`` keeps whole streams);
* ``mlp``: a stateless 256x256x10 MLP, one row per call.

Runs alternate (command alone, then under ``record``, in turns that swap which goes first) and the
medians are reported: the command's wall time from start to exit (``record``'s merge and write
included) and the loop's own time.

    python -m benchmarks.record_overhead --runs 7
    python -m benchmarks.record_overhead --runs 3 --cwd PROJECT --command 'python -m pytest tests'
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

WORKLOAD = '''
import sys, time
import numpy as np, onnxruntime as ort
kind, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
start = time.perf_counter()
if kind == "silero":
    sr = np.array(16000, np.int64)
    for clip in range(n):  # n clips of 5 s: 139 chunks each
        state = np.zeros((2, 1, 128), np.float32)
        pcm = (np.sin(np.arange(139 * 576) * (0.01 + 0.002 * clip)) * 8000
               + rng.integers(-400, 400, 139 * 576)).astype(np.int16)
        for k in range(139):
            chunk = (pcm[k * 576:(k + 1) * 576] / 32768.0).astype(np.float32)[None]
            out, state = sess.run(None, {"input": chunk, "state": state, "sr": sr})
else:
    for i in range(n):
        sess.run(None, {"x": rng.standard_normal((1, 256)).astype(np.float32)})
print(f"LOOP {time.perf_counter() - start:.6f}")
'''


def run(cmd: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    loop = float(next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("LOOP")))
    return wall, loop


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_overhead(command: str, cwd: Path, runs: int) -> dict[str, float]:
    """A user's own command (``sh -c COMMAND`` in ``cwd``) alone and under ``hatch-shrinkray
    record``, interleaved; median wall seconds and median CPU seconds (user + system of the whole
    process tree: on a machine other work shares, the steadier measure) of each."""
    console = Path(sys.executable).parent / "hatch-shrinkray"
    times: dict[str, list[float]] = {"alone": [], "record": []}
    cpu: dict[str, list[float]] = {"alone": [], "record": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(runs):
            for which in (["alone", "record"] if r % 2 == 0 else ["record", "alone"]):
                cmd = ["sh", "-c", command]
                if which == "record":
                    cmd = [str(console), "record", "-q", "-o", str(Path(tmp) / f"rec-{r}"), "--", *cmd]
                start, before = time.perf_counter(), _children_cpu()
                subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
                times[which].append(time.perf_counter() - start)
                cpu[which].append(_children_cpu() - before)
                print(f"{which} {r}: {times[which][-1]:.1f} s wall, {cpu[which][-1]:.1f} s CPU", file=sys.stderr)
    alone, recorded = statistics.median(times["alone"]), statistics.median(times["record"])
    cpu_alone, cpu_recorded = statistics.median(cpu["alone"]), statistics.median(cpu["record"])
    return {"alone": alone, "record": recorded, "ratio": recorded / alone, "runs": runs, "cpu_alone": cpu_alone,
            "cpu_record": cpu_recorded, "cpu_ratio": cpu_recorded / cpu_alone}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--command", help="measure this shell command (a package's tests, say) instead of the "
                                          "synthetic workloads")
    parser.add_argument("--cwd", type=Path, default=Path.cwd(), help="where --command runs")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--clips", type=int, default=6, help="silero: 5-second clips per run")
    parser.add_argument("--calls", type=int, default=5000, help="mlp: calls per run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command:
        got = command_overhead(args.command, args.cwd, args.runs)
        print(f"alone {got['alone']:.1f} s, under record {got['record']:.1f} s: x{got['ratio']:.2f} wall; "
              f"CPU {got['cpu_alone']:.1f} s and {got['cpu_record']:.1f} s: x{got['cpu_ratio']:.2f} "
              f"(medians of {args.runs} interleaved runs)")
        return
    from onnx_builders import mlp, save
    from realmodels import silero_vad

    console = Path(sys.executable).parent / "hatch-shrinkray"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        models = {"silero": (str(silero_vad()), args.clips), "mlp": (str(save(mlp(256, 256), Path(tmp) / "mlp.onnx")),
                                                                   args.calls)}
        for kind, (path, n) in models.items():
            plain_cmd = [sys.executable, str(script), kind, path, str(n)]
            times: dict[str, list[tuple[float, float]]] = {"alone": [], "record": []}
            for r in range(args.runs):
                out = Path(tmp) / f"rec-{kind}-{r}"
                order = ["alone", "record"] if r % 2 == 0 else ["record", "alone"]
                for which in order:
                    cmd = plain_cmd if which == "alone" else [str(console), "record", "-o", str(out), "--", *plain_cmd]
                    times[which].append(run(cmd))
            size = sum(p.stat().st_size for p in (Path(tmp) / f"rec-{kind}-0").glob("*.npz"))
            med = {w: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v))
                   for w, v in times.items()}
            results[kind] = {"calls": n * 139 if kind == "silero" else n, "alone": med["alone"],
                             "record": med["record"], "wall_ratio": med["record"][0] / med["alone"][0],
                             "loop_ratio": med["record"][1] / med["alone"][1], "recording_bytes": size,
                             "runs": args.runs}
    print("| workload | calls | alone: wall / loop | record: wall / loop | wall ratio | loop ratio | recording |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, r in results.items():
        print(f"| {kind} | {r['calls']} | {r['alone'][0]:.2f} s / {r['alone'][1]:.2f} s | {r['record'][0]:.2f} s / "
              f"{r['record'][1]:.2f} s | x{r['wall_ratio']:.2f} | x{r['loop_ratio']:.2f} | "
              f"{r['recording_bytes'] / 1e3:.0f} KB |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus", file=sys.stderr)


if __name__ == "__main__":
    main()
