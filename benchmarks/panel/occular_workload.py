"""occular-deskew 0.5.0 workload: every PNG of DATA_DIR through
``OriNetOrientation(prefer_gpu=False).predict(image)`` (the model once per page on the page's 4 rotations);
the answer per image is its class (0-3) and confidence.

    python occular_workload.py DATA_DIR [OUT.json]"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    import cv2
    from occular_deskew.orient_onnx import OriNetOrientation

    model = OriNetOrientation(prefer_gpu=False)
    res = {}
    for f in sorted(Path(sys.argv[1]).glob("*.png")):
        k, conf = model.predict(cv2.imread(str(f)))
        res[f.name] = {"class": k, "conf": conf}
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(res))
    right = sum(v["class"] == int(n.split("_k")[1][0]) for n, v in res.items())
    print(f"{len(res)} images, {right} with the class of their file name")


if __name__ == "__main__":
    main()
