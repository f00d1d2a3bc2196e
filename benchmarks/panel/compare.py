"""Held-out answers of each variant against the original's, counted each package's way.

    python compare.py PKG        # every label of /tmp/p8/res/PKG/labels.json against "orig"

akiki: clips whose segment lists are identical (and frames flipped); arabic: names whose top-1 /
top-3 list is identical; nsfw: labels identical, scores within 1e-3 / 1e-4; occular: classes identical
on pages / hard crops; isbnx: pages whose box lists are identical / within 1 px; silero: per API path,
clips whose timestamps are identical; magika: labels identical; ocr: pages / lines (box + text) / line
texts identical; fsmn: segment lists identical / within 20 ms; captcha: texts identical."""

from __future__ import annotations

import json
import sys
from pathlib import Path

W = Path("/tmp/p8/res")


def count(pkg: str, a: dict, b: dict) -> str:
    n = len(a)
    if pkg == "akiki":
        same = sum(a[k]["segments"] == b[k]["segments"] for k in a)
        flips = sum(x != y for k in a for x, y in zip(a[k]["frames"], b[k]["frames"]))
        frames = sum(len(a[k]["frames"]) for k in a)
        return f"{same}/{n} clips (segments); {flips}/{frames} frames flipped"
    if pkg == "arabic":
        t1 = sum(a[k][:1] == b[k][:1] for k in a)
        t3 = sum(a[k] == b[k] for k in a)
        return f"top-1 {t1}/{n}, top-3 {t3}/{n} names"
    if pkg == "nsfw":
        lab = sum(a[k].get("label") == b[k].get("label") for k in a)
        d = [abs(a[k]["score"] - b[k]["score"]) for k in a if "score" in a[k]]
        return (f"labels {lab}/{n}; scores within 1e-3 {sum(x <= 1e-3 for x in d)}/{len(d)}, "
                f"1e-4 {sum(x <= 1e-4 for x in d)}/{len(d)}; max delta {max(d):.5f}")
    if pkg == "occular":
        pages = [k for k in a if k.startswith("page")]
        hard = [k for k in a if k.startswith("hard")]
        p = sum(a[k]["class"] == b[k]["class"] for k in pages)
        h = sum(a[k]["class"] == b[k]["class"] for k in hard)
        return f"pages {p}/{len(pages)}, hard crops {h}/{len(hard)}"
    if pkg == "isbnx":
        same = sum(a[k] == b[k] for k in a)
        near = sum(len(a[k]) == len(b[k]) and all(x[4] == y[4] and max(abs(p - q) for p, q in zip(x[:4], y[:4])) <= 1
                                                 for x, y in zip(a[k], b[k])) for k in a)
        return f"{same}/{n} pages identical, {near}/{n} within 1 px"
    if pkg == "silero":
        paths = sorted(next(iter(a.values())))
        return ", ".join(f"{p} {sum(a[k][p] == b[k][p] for k in a)}/{n}" for p in paths)
    if pkg == "magika":
        return f"{sum(a[k] == b[k] for k in a)}/{n} files"
    if pkg == "ocr":
        pages = sum(a[k] == b[k] for k in a)
        la = [json.dumps(x, ensure_ascii=False) for k in a for x in a[k]]
        lines = sum(sum(x in b[k] for x in a[k]) for k in a)
        texts = sum(sum(t in [y[1] for y in b[k]] for _, t in a[k]) for k in a)
        return f"pages {pages}/{n}, lines {lines}/{len(la)}, line texts {texts}/{len(la)}"
    if pkg == "fsmn":
        same = sum(a[k] == b.get(k) for k in a)
        near = sum(b.get(k) is not None and len(a[k]) == len(b[k])
                   and all(abs(p - q) <= 20 for s, t in zip(a[k], b[k]) for p, q in zip(s, t)) for k in a)
        return f"{same}/{n} segment lists identical, {near}/{n} within 20 ms"
    if pkg == "captcha":
        return f"{sum(a[k] == b.get(k) for k in a)}/{n} texts"
    raise SystemExit(pkg)


def main() -> None:
    pkg = sys.argv[1]
    labels = json.loads((W / pkg / "labels.json").read_text())
    orig = json.loads((W / pkg / f"held-{labels['orig']}.json").read_text())
    for label, key in sorted(labels.items()):
        f = W / pkg / f"held-{key}.json"
        if f.exists():
            print(f"{pkg:8s} {label:16s} {key}  {count(pkg, orig, json.loads(f.read_text()))}")


if __name__ == "__main__":
    main()
