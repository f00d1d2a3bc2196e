"""akiki 0.0.6 workload: each clip streamed in 800-sample buffers through ``akiki.VAD(engine="onnx")``
(one model call per 256-sample frame, the GRU state fed back); the answer per clip is its speech
segments (runs of frames with ``speech`` true, in frame indices).

    python akiki_workload.py DATA_DIR [OUT.json]"""

from __future__ import annotations

import json
import sys
import wave
from pathlib import Path

import numpy as np


def main() -> None:
    import akiki

    data = Path(sys.argv[1])
    res = {}
    for f in sorted(data.glob("*.wav")):
        with wave.open(str(f)) as w:
            a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
        with akiki.VAD(engine="onnx") as vad:
            flags = []
            for i in range(0, len(a), 800):
                flags += [fr.speech for fr in vad.push(a[i:i + 800].tolist())]
        segs, start = [], None
        for k, s in enumerate([*flags, False]):
            if s and start is None:
                start = k
            elif not s and start is not None:
                segs.append([start, k])
                start = None
        res[f.name] = {"segments": segs, "frames": "".join("1" if s else "0" for s in flags)}
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(res))
    print(f"{len(res)} clips, {sum(len(v['segments']) for v in res.values())} segments")


if __name__ == "__main__":
    main()
