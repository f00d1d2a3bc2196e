"""The package's docstrings and comments state contracts (what a piece does and why), not measurements.

A measured figure goes stale the day the engine changes, and a docstring that cites a benchmark report
sends the reader to a file that describes another engine. So figures live in ``benchmarks/`` (with the
command that measured them) and ``docs/`` (whose figures ``test_docs_consistency.py`` ties to their
benchmark rows), and the source says the rule and its reason. The rule checked here is deliberately
simple; in the docstrings and comments of ``hatch_shrinkray/``:

* no citation of a benchmark file: no ``benchmarks/NAME`` path and no bare name of a report there
  (``LOAD.md``);
* no measured figure: a decimal figure with a unit (``7.6%``, ``0.27 MB``, ``1.3x``), a rate (``MB/s``)
  or an approximate one (``~0.3``, ``about 10 MB``).

Text between double backticks is exempt: it is an example of what a function prints (``6.59 MB``,
``top-1 93.3% (152/163)``), a format, not a claim. Whole numbers with a unit are allowed outside them
(``95%`` confidence, ``2 GB`` protobuf limit, ``64 KB`` header): those are constants and definitions;
a whole-number measurement is for review to catch. Messages the package prints are not scanned.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "hatch_shrinkray"
REPORTS = {p.name for p in (REPO / "benchmarks").glob("*.md")} - {"README.md"}

LITERAL = re.compile(r"``.*?``", re.S)
UNIT = r"(?:%|x\b|[KMG]i?B\b|ms\b|s\b)"
RULES = {
    "cites a benchmark file": re.compile(
        r"benchmarks/\w|(?<![\w/])(?:" + "|".join(map(re.escape, sorted(REPORTS))) + r")"),
    "gives a measured figure": re.compile(
        r"(?<![\w.])\d+\.\d+ ?" + UNIT + r"|\d(?:\.\d+)? ?[KMG]B/s|~ ?\d|\babout \d+(?:\.\d+)? ?" + UNIT),
}


def prose(source: str) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every docstring (modules, classes, functions and attribute docstrings: any
    string statement) and every comment of ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def problems(name: str, source: str) -> list[str]:
    found = []
    for line, text in prose(source):
        claims = LITERAL.sub("``...``", text)
        for why, rule in RULES.items():
            found += [f"{name}:{line}: {why}: {m.group(0)!r} in ...{claims[max(0, m.start() - 60):m.end() + 20]!r}..."
                      for m in rule.finditer(claims)]
    return found


def test_docstrings_and_comments_state_contracts_not_measurements() -> None:
    found = [p for path in sorted(PACKAGE.rglob("*.py"))
             for p in problems(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_the_rule_catches_what_was_moved_out_and_passes_contracts() -> None:
    """The lines this rule replaced, and the kinds of text it must leave alone."""
    moved = [
        '"""Slow on weight data (benchmarks/DOWNLOAD.md)."""',
        '"""Why this chain (measured, LOAD.md): ..."""',
        '"""One outlier gave 7.6% relative error per-tensor vs 0.27% per-channel."""',
        '"""Brotli 11 at ~0.3 MB/s would only print a figure."""',
        '"""Allocators: about 10 MB."""',
        '"""The estimate was never below 0.9x of brotli 11."""',
        "x = 1  # twice the model's size (benchmarks/BIG_MODEL.md)",
    ]
    for source in moved:
        assert problems("m.py", source), source
    kept = [
        '"""``wheel 6.08 MB -> 1.45 MB (23.8%)``: the line it prints."""',
        '"""The one-sided 95% bound; a model over 2 GB; a header over 64 KB."""',
        '"""The benchmarks in ``benchmarks/`` import this module."""',
        'x = f"{ratio:.2f}x"  # no figure here',
        'raise SystemExit("measured 1.5x slower")',  # a message, not a docstring
    ]
    for source in kept:
        assert problems("m.py", source) == [], source
