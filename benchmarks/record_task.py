"""The workload whose onnxruntime feeds ``hatch-shrinkray record`` keeps: one task's own pipeline on
calibration data that is disjoint from the task's test data (``use`` in ``tasks/*.py``).

    hatch-shrinkray record --output DIR -- python -m benchmarks.record_task ppocrv6_rec

runs the original model of the corpus (``~/.cache/hatch-shrinkray-bench/models/KEY.onnx``) as its
package would: PaddleOCR recognisers read 64 rendered lines of another seed (half clean, half
degraded) at their own widths; Silero VAD streams 4 clips of other sentences at 5 SNRs (16 kHz,
and 8 kHz at 10 dB); Magika identifies real files of this machine that are not in its test list,
4 per call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus

KEYS = ("ppocrv6_rec", "ppocrv4_rec", "silero_vad", "magika")


def use(key: str, model: Path) -> int:
    """Run ``key``'s calibration workload on ``model``; how many lines / clips / files it handled."""
    if key.endswith("_rec"):
        from benchmarks.tasks import ocr_rec

        return ocr_rec.use(model)
    if key == "silero_vad":
        from benchmarks.tasks import vad

        return vad.use(model)
    if key == "magika":
        from benchmarks.tasks import magika_task

        return magika_task.use(model)
    raise KeyError(key)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("key", choices=KEYS)
    ap.add_argument("--model", type=Path, help="the model to run (default: the corpus file of KEY)")
    args = ap.parse_args()
    n = use(args.key, args.model or corpus.model_path(args.key))
    print(f"{args.key}: {n} calibration items through the task pipeline", flush=True)


if __name__ == "__main__":
    main()
