"""Synthetic text rendering with Pillow + DejaVu fonts (seeded, offline)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIRS = [Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/dejavu")]
FONT_NAMES = [
    "DejaVuSans.ttf",
    "DejaVuSerif.ttf",
    "DejaVuSansMono.ttf",
    "DejaVuSans-Bold.ttf",
    "DejaVuSerif-Italic.ttf",
    "DejaVuSansCondensed.ttf",
    "DejaVuSerif-Bold.ttf",
]

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "are",
    "have",
    "not",
    "be",
    "had",
    "one",
    "all",
    "were",
    "which",
    "when",
    "we",
    "there",
    "can",
    "an",
    "their",
    "been",
    "if",
    "more",
    "will",
    "would",
    "about",
    "other",
    "some",
    "time",
    "these",
    "two",
    "may",
    "first",
    "could",
    "then",
    "do",
    "any",
    "like",
    "my",
    "now",
    "over",
    "such",
    "our",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "Mr",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "invoice",
    "total",
    "amount",
    "payment",
    "receipt",
    "order",
    "number",
    "customer",
    "account",
    "balance",
    "address",
    "street",
    "avenue",
    "station",
    "platform",
    "ticket",
    "window",
    "open",
    "closed",
    "exit",
    "entrance",
    "warning",
    "danger",
    "caution",
    "price",
    "discount",
    "tax",
    "date",
    "page",
    "chapter",
    "section",
    "figure",
    "table",
    "report",
    "summary",
    "model",
    "weights",
    "quantized",
    "network",
    "latency",
    "memory",
    "server",
    "client",
    "build",
    "wheel",
    "package",
    "version",
    "release",
    "London",
    "Paris",
    "Berlin",
    "Tokyo",
    "Madrid",
    "Oslo",
    "Boston",
    "Denver",
    "Sydney",
    "Toronto",
    "Monday",
    "Friday",
    "January",
    "October",
    "café",
    "naïve",
    "résumé",
    "Zürich",
    "façade",
]


def font_paths() -> list[Path]:
    out: list[Path] = []
    for name in FONT_NAMES:
        for d in FONT_DIRS:
            if (d / name).exists():
                out.append(d / name)
                break
    if not out:
        raise FileNotFoundError("DejaVu fonts not found (apt-get install fonts-dejavu-core)")
    return out


def _token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.70:
        w = rng.choice(WORDS)
        if rng.random() < 0.15:
            w = w.capitalize()
        elif rng.random() < 0.05:
            w = w.upper()
        return w
    if r < 0.80:
        return str(rng.randint(0, 99999))
    if r < 0.87:
        return f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    if r < 0.93:
        return f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if r < 0.97:
        return (
            f"{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}-{rng.randint(100, 9999)}"
        )
    return rng.choice(["(see below)", "#42", "50%", "a/b", "x+y=z", "1:30", "e.g.", "Q&A"])


def random_line(rng: random.Random, charset: set[str], min_words: int = 2, max_words: int = 6) -> str:
    """A line of words/numbers whose characters are all in ``charset`` (the model's dictionary)."""
    while True:
        n = rng.randint(min_words, max_words)
        words = [_token(rng) for _ in range(n)]
        text = " ".join(words)
        if rng.random() < 0.3:
            text += rng.choice([".", ",", ":", ";", "!", "?"])
        if all(c in charset or c == " " for c in text):
            return text


def render_line(text: str, rng: random.Random, degraded: bool) -> Image.Image:
    """Render one text line, tightly cropped with a small margin, RGB."""
    fonts = font_paths()
    # degraded lines are small (11-17 px fonts: the model upsamples them to 48 px) and low-contrast
    font = ImageFont.truetype(str(rng.choice(fonts)), rng.randint(11, 17) if degraded else rng.randint(26, 40))
    if degraded:
        fg = tuple(rng.randint(60, 130) for _ in range(3))
        bg = tuple(rng.randint(140, 210) for _ in range(3))
    else:
        fg = tuple(rng.randint(0, 40) for _ in range(3))
        bg = tuple(rng.randint(235, 255) for _ in range(3))
    left, top, right, bottom = font.getbbox(text)
    mx, my = (rng.randint(2, 5), rng.randint(1, 3)) if degraded else (rng.randint(4, 12), rng.randint(3, 8))
    img = Image.new("RGB", (right - left + 2 * mx, bottom - top + 2 * my), bg)
    ImageDraw.Draw(img).text((mx - left, my - top), text, font=font, fill=fg)
    if degraded:
        img = degrade(img, rng)
    return img


def degrade(img: Image.Image, rng: random.Random) -> Image.Image:
    """Blur / rotation / down-up sampling / noise / JPEG, 2-4 of them, seeded."""
    ops = rng.sample(["blur", "rotate", "downsample", "noise", "jpeg"], k=rng.randint(2, 4))
    for op in ops:
        if op == "blur":
            img = img.filter(ImageFilter.GaussianBlur(radius=rng.uniform(0.4, 0.9)))
        elif op == "rotate":
            bg = img.getpixel((0, 0))
            img = img.rotate(rng.uniform(-2.0, 2.0), resample=Image.Resampling.BILINEAR, expand=False, fillcolor=bg)
        elif op == "downsample":
            f = rng.uniform(0.6, 0.8)
            w, h = img.size
            img = img.resize((max(1, int(w * f)), max(1, int(h * f))), Image.Resampling.BILINEAR)
            img = img.resize((w, h), Image.Resampling.BILINEAR)
        elif op == "noise":
            a = np.asarray(img).astype(np.float32)
            nrng = np.random.default_rng(rng.randint(0, 2**31))
            a = a + nrng.normal(0.0, rng.uniform(10.0, 28.0), a.shape)
            img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
        elif op == "jpeg":
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=rng.randint(15, 40))
            buf.seek(0)
            img = Image.open(buf).convert("RGB")
    return img
