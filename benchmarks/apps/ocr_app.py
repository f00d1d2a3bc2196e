"""An OCR command-line app on rapidocr-onnxruntime, as a PyInstaller user writes one.

``ocr PAGE...`` prints one JSON line per page: each text line's box (whole pixels) and its text.
"""

import json
import sys


def main() -> int:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    for path in sys.argv[1:]:
        result, _ = engine(path)
        lines = [[[[round(float(v)) for v in point] for point in box], text] for box, text, _ in result or []]
        print(json.dumps(lines, ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
