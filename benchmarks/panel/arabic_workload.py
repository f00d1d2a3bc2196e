"""arabic-name-romanizer 0.2.0 workload: seeded made-up names (two or three units of Arabic letters in
common name shapes, so most are not in the package's dictionary and reach its models), Arabic-script
and Persian-script (with پ چ ژ گ), through ``Transliterator().transliterate(name, top_k=3)``.

    python arabic_workload.py calib             # 40 Arabic + 20 Persian names (seed 5)
    python arabic_workload.py heldout OUT.json  # 100 Arabic + 50 Persian names (seed 6)

The answer per name: its top-3 candidate texts (top-1 first)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

CONS = list("بتثجحخدذرزسشصضطظعغفقكلمنهوي")
PERS = list("پچژگ")
SHAPES = ["C{a}C{i}C", "C{a}CC{a}", "C{u}CC{a}C", "C{a}C{i}C{a}", "{a}CC{a}C", "C{a}C{u}C", "C{i}C{a}C"]
LONG = {"a": "ا", "i": "ي", "u": "و"}


def unit(rng: random.Random, persian: bool) -> str:
    shape = rng.choice(SHAPES)
    out = []
    for part in shape.replace("{", " {").replace("}", "} ").split():
        if part.startswith("{"):
            if rng.random() < 0.6:
                out.append(LONG[part[1]])
        else:
            for _ in part:
                pool = CONS + PERS if persian and rng.random() < 0.3 else CONS
                out.append(rng.choice(pool))
    s = "".join(out)
    if persian and not any(c in s for c in PERS):
        s = rng.choice(PERS) + s[1:]
    return s


def names(seed: int, n_ar: int, n_fa: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(unit(rng, i >= n_ar) for _ in range(rng.randint(2, 3))) for i in range(n_ar + n_fa)]


def main() -> None:
    from arabic_name_romanizer import Transliterator

    mode = sys.argv[1]
    todo = names(5, 40, 20) if mode == "calib" else names(6, 100, 50)
    t = Transliterator()
    res = {f"{i:03d}:{n}": [c.text for c in t.transliterate(n, top_k=3)] for i, n in enumerate(todo)}
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(res, ensure_ascii=False))
    src = [c.source for n in todo for c in t.transliterate(n, top_k=3)[:1]]
    print(f"{mode}: {len(res)} names; top-1 sources", {s: src.count(s) for s in sorted(set(src))})


if __name__ == "__main__":
    main()
