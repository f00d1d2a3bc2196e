"""Rendered pages for rapidocr-onnxruntime 1.4.4, run through the package's own API
(``RapidOCR()(path)``: text detector, angle classifier, CTC recogniser) in its own venv
(``benchmarks/packages.py`` drives it). Needs numpy, Pillow and the installed package; fonts from
Debian's fonts-dejavu-core.

    python packages_ocr.py calibrate CACHE_DIR [PAGES]  # the user's calibration script (12 pages)
    python packages_ocr.py big CACHE_DIR [PAGES]        # the same pages scaled to >= 960 px, noisy JPEG
    python packages_ocr.py mixed CACHE_DIR [PAGES]      # every other page so
    python packages_ocr.py heldout CACHE_DIR OUT.json   # 60 held-out pages -> OCR result per page

Pages: 480-900 px wide, 4-9 lines of words, numbers, prices and dates in 7 DejaVu faces, some lines
upside down (the angle classifier's job), half of the pages degraded (blur, rotation, down-up sampling,
noise, JPEG: ``benchmarks/tasks/render.py``). Calibration and held-out pages come from disjoint seeds.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np

try:  # run as a copy beside a copy of benchmarks/tasks/render.py (what benchmarks/packages.py does)
    from render import WORDS, _token, degrade, font_paths  # type: ignore[import-not-found,no-redef]
except ImportError:
    from benchmarks.tasks.render import WORDS, _token, degrade, font_paths

HELDOUT = {"n": 60, "seed": 20250}
CALIB = {"n": 12, "seed": 777}


def _line_text(rng: random.Random) -> str:
    n = rng.randint(1, 6)
    return " ".join(_token(rng) if rng.random() < 0.5 else rng.choice(WORDS) for _ in range(n))


def render_page(rng: random.Random, degraded: bool) -> object:
    from PIL import Image, ImageDraw, ImageFont

    fonts = font_paths()
    w, h = rng.randint(480, 900), rng.randint(400, 800)
    bg = tuple(rng.randint(215, 255) for _ in range(3))
    page = Image.new("RGB", (w, h), bg)
    y = rng.randint(10, 40)
    for _ in range(rng.randint(4, 9)):
        size = rng.randint(16, 34)
        font = ImageFont.truetype(str(rng.choice(fonts)), size)
        text = _line_text(rng)
        left, top, right, bottom = font.getbbox(text)
        lw, lh = right - left + 8, bottom - top + 8
        if lw >= w - 20:
            continue
        if y + lh > h - 10:
            break
        fg = tuple(rng.randint(0, 90) for _ in range(3))
        line = Image.new("RGB", (lw, lh), bg)
        ImageDraw.Draw(line).text((4 - left, 4 - top), text, font=font, fill=fg)
        if rng.random() < 0.12:
            line = line.rotate(180)
        page.paste(line, (rng.randint(10, w - 10 - lw), y))
        y += lh + rng.randint(int(0.4 * lh), 2 * lh)
    return degrade(page, rng) if degraded else page


def big_page(page: object, rng: random.Random) -> object:
    """A page as a phone or a scanner gives it: scaled 1.6-2.4x to a shorter side of at least 960 px,
    with sensor noise, saved as JPEG quality 90 (the detector's input grows with the page)."""
    from PIL import Image

    w, h = page.size  # type: ignore[attr-defined]
    scale = max(rng.uniform(1.6, 2.4), 960 / min(w, h))
    big = page.resize((round(w * scale), round(h * scale)), Image.BICUBIC)  # type: ignore[attr-defined]
    pixels = np.asarray(big, dtype=np.float32)
    noisy = np.random.default_rng(rng.randrange(1 << 30)).normal(0, 6, pixels.shape) + pixels
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def pages(spec: dict[str, int], cache: Path) -> list[Path]:
    """The pages as PNG files (rendered once, then read from the cache)."""
    big = spec.get("big", 0)  # 1: every page big, 2: every other page
    d = cache / f"ocr-pages-{spec['seed']}-{spec['n']}{['', '-big', '-mixed'][big]}"
    if not (d / "done").exists():
        d.mkdir(parents=True, exist_ok=True)
        rng = random.Random(spec["seed"])
        for i in range(spec["n"]):
            page = render_page(rng, degraded=i % 2 == 1)
            if big == 1 or (big == 2 and i % 2 == 0):
                big_page(page, rng).save(d / f"page{i:03d}.jpg", quality=90)  # type: ignore[attr-defined]
            else:
                page.save(d / f"page{i:03d}.png")  # type: ignore[attr-defined]
        (d / "done").write_text("")
    return sorted(d.glob("page*.*g"))


def normalize(result: object) -> list[list[object]]:
    """One page's OCR result as compared: each line's box rounded to whole pixels, and its text."""
    if not result:
        return []
    return [[np.round(np.asarray(box, dtype=np.float64)).astype(int).tolist(), text] for box, text, _ in result]  # type: ignore[attr-defined]


def main() -> None:
    from rapidocr_onnxruntime import RapidOCR

    mode, cache = sys.argv[1], Path(sys.argv[2])
    spec = HELDOUT if mode == "heldout" else {**CALIB, "n": int(sys.argv[3]) if len(sys.argv) > 3 else CALIB["n"],
                                              "big": {"big": 1, "mixed": 2}.get(mode, 0)}
    files = pages(spec, cache)
    engine = RapidOCR()
    results = {}
    for f in files:
        result, _ = engine(str(f))
        results[f.stem] = normalize(result)
    if mode == "heldout":
        Path(sys.argv[3]).write_text(json.dumps(results, sort_keys=True, ensure_ascii=False))
    print(f"{mode}: {len(results)} pages, {sum(len(v) for v in results.values())} lines")


if __name__ == "__main__":
    main()
