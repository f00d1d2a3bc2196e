"""Text pages for occular-deskew (orientation) and isbnx (copyright pages), seeded, with Pillow.

    python gen_pages.py orient calib OUT_DIR    # 40 pages: texts of os/shutil/pathlib, even DejaVu files (seed 31)
    python gen_pages.py orient heldout OUT_DIR  # 120 pages (json/collections/subprocess/random/typing, odd
                                                # DejaVu files, seed 32) + 120 hard crops of them (2-4 lines,
                                                # blur, noise, JPEG q15-60)
    python gen_pages.py isbn calib|heldout OUT_DIR   # 40 / 120 copyright pages (seeds 111 / 122)

Orientation pages: English lines, 500-900 x 650-1100 px, off-white, 14-30 px, rotated by k*90 degrees
clockwise (k in the file name). Copyright pages: 1-6 English lines, then (80%) a Chinese CIP block or an
English ISBN line, and (85%) an EAN-13 barcode on a white label; Chinese text needs a CJK font
(fonts-noto-cjk: Sans for calibration, Serif for held-out). Written from PANEL.md's description of the
round-1 generators (which did not stay on disk)."""

from __future__ import annotations

import importlib
import io
import random
import re
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

DEJAVU = sorted(p for p in Path("/usr/share/fonts/truetype/dejavu").glob("DejaVu*.ttf") if "Math" not in p.name)
MODS = {"calib": ["os", "shutil", "pathlib"], "heldout": ["json", "collections", "subprocess", "random", "typing"]}


def lines_of(modules: list[str]) -> list[str]:
    out = []
    for name in modules:
        mod = importlib.import_module(name)
        for obj in [mod, *(getattr(mod, a) for a in dir(mod) if not a.startswith("_"))]:
            doc = getattr(obj, "__doc__", None)
            for line in (doc if isinstance(doc, str) else "").splitlines():
                line = line.strip()
                if 25 <= len(line) <= 70 and re.fullmatch(r"[ -~]+", line):
                    out.append(line)
    return sorted(set(out))


def text_page(rng: random.Random, texts: list[str], fonts: list[Path]) -> Image.Image:
    w, h = rng.randint(500, 900), rng.randint(650, 1100)
    page = Image.new("RGB", (w, h), tuple(rng.randint(228, 255) for _ in range(3)))
    d = ImageDraw.Draw(page)
    font = ImageFont.truetype(str(rng.choice(fonts)), rng.randint(14, 30))
    y = rng.randint(20, 60)
    while y < h - 60:
        d.text((rng.randint(20, 50), y), rng.choice(texts), font=font, fill=tuple(rng.randint(0, 70) for _ in range(3)))
        y += int(font.size * rng.uniform(1.3, 2.0)) + (font.size * 2 if rng.random() < 0.1 else 0)
    return page


def orient(which: str, out: Path) -> None:
    rng = random.Random(31 if which == "calib" else 32)
    fonts = DEJAVU[0::2] if which == "calib" else DEJAVU[1::2]
    texts = lines_of(MODS[which])
    n = 40 if which == "calib" else 120
    rot = {0: None, 1: Image.Transpose.ROTATE_270, 2: Image.Transpose.ROTATE_180, 3: Image.Transpose.ROTATE_90}
    for i in range(n):
        page, k = text_page(rng, texts, fonts), i % 4
        img = page if rot[k] is None else page.transpose(rot[k])
        img.save(out / f"page{i:03d}_k{k}.png")
        if which == "heldout":  # a hard crop: 2-4 lines of the same page, degraded
            lh = page.height // 12
            top = rng.randint(0, max(0, page.height - 5 * lh))
            crop = page.crop((0, top, page.width, top + rng.randint(2, 4) * lh + lh // 2))
            crop = crop.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 1.6)))
            px = crop.load()
            for _ in range(crop.width * crop.height // 30):
                x, y = rng.randrange(crop.width), rng.randrange(crop.height)
                v = rng.randint(0, 255)
                px[x, y] = (v, v, v)
            crop = crop if rot[k] is None else crop.transpose(rot[k])
            buf = io.BytesIO()
            crop.save(buf, "JPEG", quality=rng.randint(15, 60))
            Image.open(buf).convert("RGB").save(out / f"hard{i:03d}_k{k}.png")


def ean13(digits: str) -> list[int]:
    L = ["0001101", "0011001", "0010011", "0111101", "0100011", "0110001", "0101111", "0111011", "0110111", "0001011"]
    G = ["0100111", "0110011", "0011011", "0100001", "0011101", "0111001", "0000101", "0010001", "0001001", "0010111"]
    R = ["1110010", "1100110", "1101100", "1000010", "1011100", "1001110", "1010000", "1000100", "1001000", "1110100"]
    par = ["LLLLLL", "LLGLGG", "LLGGLG", "LLGGGL", "LGLLGG", "LGGLLG", "LGGGLL", "LGLGLG", "LGLGGL", "LGGLGL"][int(digits[0])]
    bits = "101" + "".join((L if p == "L" else G)[int(c)] for p, c in zip(par, digits[1:7])) + "01010"
    bits += "".join(R[int(c)] for c in digits[7:]) + "101"
    return [int(b) for b in bits]


def isbn13(rng: random.Random) -> str:
    d = "9787" + "".join(str(rng.randint(0, 9)) for _ in range(8))
    s = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(d))
    return d + str((10 - s % 10) % 10)


def isbn(which: str, out: Path) -> None:
    rng = random.Random(111 if which == "calib" else 122)
    cjk = Path("/usr/share/fonts/opentype/noto") / ("NotoSansCJK-Regular.ttc" if which == "calib" else "NotoSerifCJK-Regular.ttc")
    fonts = DEJAVU[0::2] if which == "calib" else DEJAVU[1::2]
    texts = lines_of(MODS[which])
    n = 40 if which == "calib" else 120
    for i in range(n):
        w, h = rng.randint(650, 1000), rng.randint(800, 1200)
        page = Image.new("RGB", (w, h), tuple(rng.randint(235, 255) for _ in range(3)))
        d = ImageDraw.Draw(page)
        f = ImageFont.truetype(str(rng.choice(fonts)), rng.randint(14, 22))
        y = rng.randint(30, 80)
        for _ in range(rng.randint(1, 6)):
            d.text((40, y), rng.choice(texts), font=f, fill=(20, 20, 20))
            y += int(f.size * 1.8)
        code = isbn13(rng)
        pretty = f"ISBN {code[:3]}-{code[3]}-{code[4:8]}-{code[8:12]}-{code[12]}"
        r = rng.random()
        if r < 0.5:
            c = ImageFont.truetype(str(cjk), rng.randint(16, 24))
            y += 30
            for line in ["图书在版编目(CIP)数据", f"书名{rng.randint(1, 99)}/作者{rng.randint(1, 99)}著.—北京:出版社,{rng.randint(2001, 2024)}",
                         pretty, f"Ⅰ.①书… Ⅱ.①作… Ⅲ.①I{rng.randint(200, 299)}", f"中国版本图书馆CIP数据核字({rng.randint(2001, 2024)})第{rng.randint(10000, 99999)}号"]:
                d.text((40, y), line, font=c, fill=(10, 10, 10))
                y += int(c.size * 1.8)
        elif r < 0.8:
            y += 30
            d.text((40, y), f"{pretty}    Price: {rng.randint(10, 99)}.00", font=f, fill=(10, 10, 10))
            y += int(f.size * 2)
        if rng.random() < 0.85:
            m = rng.randint(2, 4)
            bars = ean13(code)
            bw, bh = len(bars) * m + 40, rng.randint(60, 110)
            x0 = rng.randint(30, max(31, w - bw - 30))
            y0 = min(max(y + 30, rng.randint(y + 30, h - bh - 60)), h - bh - 40)
            d.rectangle([x0, y0, x0 + bw, y0 + bh + 30], fill=(255, 255, 255))
            for k, b in enumerate(bars):
                if b:
                    d.rectangle([x0 + 20 + k * m, y0 + 10, x0 + 20 + (k + 1) * m - 1, y0 + bh], fill=(0, 0, 0))
            d.text((x0 + 20, y0 + bh + 4), code, font=ImageFont.truetype(str(DEJAVU[0]), 14), fill=(0, 0, 0))
        page.save(out / f"page{i:03d}.png")


def main() -> None:
    kind, which, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    (orient if kind == "orient" else isbn)(which, out)
    print(kind, which, len(list(out.glob("*.png"))), "images into", out)


if __name__ == "__main__":
    main()
