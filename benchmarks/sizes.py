"""Fill the compressed-size cache (brotli-11 is slow: ~0.2 MB/s) for every cached model.

    python benchmarks/sizes.py [--algos brotli11 zstd19 gzip9]

Meant to run in the background next to ``benchmarks/run.py --skip-brotli``; a later ``run.py`` (or
``run.py --skip-brotli``) picks the cached sizes up by file sha256.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.common import SizeCache
from benchmarks.variants import SHRUNK_DIR

# headline models first, then by total size
PRIORITY = ["silero_vad", "ppocrv4_rec", "ppocrv6_rec", "magika", "ppocrv4_det", "ppocrv6_det", "nudenet",
            "nakdimon", "minilm"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--algos", nargs="*", default=["brotli11"])
    ap.add_argument("--models", nargs="*", help="corpus keys, in order (default: headline models first)")
    args = ap.parse_args(argv)
    ap_models = args.models or PRIORITY
    files: list[Path] = []
    for m in ap_models:
        group = [p for p in [corpus.MODEL_DIR / f"{m}.onnx", *(SHRUNK_DIR / m).glob("*.onnx")] if p.exists()]
        files += sorted(group, key=lambda p: p.stat().st_size)
    cache = SizeCache()
    for p in files:
        t0 = time.perf_counter()
        s = cache.sizes(p, algos=args.algos)
        print(f"{p.relative_to(p.parent.parent)} {s} {time.perf_counter() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
