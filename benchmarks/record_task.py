"""The workload whose onnxruntime feeds ``hatch-shrinkray record`` keeps: one task's own pipeline on
calibration data that is disjoint from the task's test data (``use`` in ``tasks/*.py``).

    hatch-shrinkray record --output DIR -- python -m benchmarks.record_task ppocrv6_rec

runs the original model of the corpus (``~/.cache/hatch-shrinkray-bench/models/KEY.onnx``) as its
package would: PaddleOCR recognisers read 64 rendered lines of another seed (half clean, half
degraded) at their own widths; Silero VAD streams 4 clips of other sentences at 5 SNRs (16 kHz,
and 8 kHz at 10 dB); Magika identifies real files of this machine that are not in its test list,
4 per call; PP-OCRv4 det finds the lines of 16 rendered pages of another seed, one page per call; the
sentence embedder embeds 128 sentences that are none of its test sentences, 2 per call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import CACHE_DIR

KEYS = ("ppocrv6_rec", "ppocrv4_rec", "silero_vad", "magika", "ppocrv4_det", "minilm", "mpnet")
RECORDINGS = CACHE_DIR / "real_inputs" / "recordings"
REPO = Path(__file__).resolve().parent.parent


def use(key: str, model: Path) -> int:
    """Run ``key``'s calibration workload on ``model``; how many lines / clips / files / pages / sentences
    it handled."""
    if key.endswith("_rec"):
        from benchmarks.tasks import ocr_rec

        return ocr_rec.use(model)
    if key == "silero_vad":
        from benchmarks.tasks import vad

        return vad.use(model)
    if key == "magika":
        from benchmarks.tasks import magika_task

        return magika_task.use(model)
    if key == "ppocrv4_det":
        from benchmarks.tasks import ocr_det

        return ocr_det.use(model)
    if key in ("minilm", "mpnet"):
        from benchmarks.tasks import sentence

        return sentence.use(model, key=key)
    raise KeyError(key)


def record(key: str, model: Path, rec_dir: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Record ``key``'s workload on ``model`` into ``rec_dir`` (default ``RECORDINGS/key``) with
    ``python -m hatch_shrinkray record``, once: what it recorded, and where. ``env``'s ``PYTHONPATH``
    decides which engine records (the command runs outside the work tree, whose package would come first)."""
    rec_dir = rec_dir or RECORDINGS / key
    done = rec_dir / "record.json"
    if done.exists():
        cached: dict[str, Any] = json.loads(done.read_text())
        return cached
    shutil.rmtree(rec_dir, ignore_errors=True)
    rec_dir.mkdir(parents=True)
    if env is None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hatch_shrinkray", "record", "--output", str(rec_dir), "--",
                           sys.executable, "-m", "benchmarks.record_task", key, "--model", str(model)],
                          capture_output=True, text=True, cwd=rec_dir, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{key}: recording failed: {proc.stderr[-2000:]}")
    files = sorted(rec_dir.glob("*.npz"))
    info = {"command": f"hatch-shrinkray record --output DIR -- python -m benchmarks.record_task {key}",
            "summary": proc.stdout.strip(), "files": [f.name for f in files],
            "bytes": sum(f.stat().st_size for f in files), "seconds": time.perf_counter() - t0}
    done.write_text(json.dumps(info, indent=1))
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("key", choices=KEYS)
    ap.add_argument("--model", type=Path, help="the model to run (default: the corpus file of KEY)")
    args = ap.parse_args()
    n = use(args.key, args.model or corpus.model_path(args.key))
    print(f"{args.key}: {n} calibration items through the task pipeline", flush=True)


if __name__ == "__main__":
    main()
