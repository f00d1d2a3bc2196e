"""Subprocess worker: shrink one model with our engine or ORT's quantize_dynamic.

    python -m benchmarks.shrink_one ours METHOD IN OUT ['{"field": value, ...}']
    python -m benchmarks.shrink_one ortdyn - IN OUT

Run as a separate process so the parent can read its wall time and peak RSS (ru_maxrss).
Prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    kind, method, src, dst = argv[:4]
    extra = json.loads(argv[4]) if len(argv) > 4 else {}
    t0 = time.perf_counter()
    info: dict[str, object] = {}
    if kind == "ours":
        if os.environ.get("HSR_ENGINE_DIR"):  # a git snapshot of the engine (see variants.engine_dir)
            sys.path.insert(0, os.environ["HSR_ENGINE_DIR"])
        import hatch_shrinkray
        from hatch_shrinkray import ShrinkOptions, shrink

        info["engine"] = str(Path(hatch_shrinkray.__file__).parent)

        if extra.get("verify") == "default":
            extra.pop("verify")  # ShrinkOptions' own default VerifyOptions
        elif isinstance(extra.get("verify"), dict):
            from hatch_shrinkray import VerifyOptions

            v = dict(extra["verify"])
            if "inputs" in v:
                v["inputs"] = Path(v["inputs"])
            extra["verify"] = VerifyOptions(**v)
        else:
            extra["verify"] = None
        res = shrink(src, dst, ShrinkOptions(method=method, **extra))
        for attr in ("original_size", "shrunk_size", "seconds"):
            if hasattr(res, attr):
                info[attr] = getattr(res, attr)
    elif kind == "ortdyn":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # onnxruntime's defaults (per-tensor, QInt8 weights, all supported op types)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    else:
        raise SystemExit(f"unknown kind {kind}")
    info["inner_seconds"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(info, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
