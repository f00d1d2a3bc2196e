"""README and docs say what the tool does and what the benchmarks measured, so that a newcomer can
take them literally: every flag they name exists where they name it, every command they quote
parses, docs/cli.md's promises about usage errors hold, every figure in a paragraph that cites a
benchmark file is in a row of that file about what the sentence quoting it names (a share or a ratio
as one written so there), the defaults they quote are the code's, and the headline figure is one
figure on every page.

In-process: the parser is called, never the console script (``tests/test_docs.py`` runs the error
lines of docs/troubleshooting.md through it)."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from hatch_shrinkray import __version__
from hatch_shrinkray.cli import parser
from hatch_shrinkray.evidence import upper_bound
from hatch_shrinkray.options import VerifyOptions
from hatch_shrinkray.recording import caps as env
from hatch_shrinkray.sizes import ESTIMATE_HIGH
from hatch_shrinkray.verification.compare import flip_rate_lower_bound

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
BENCHMARKS = REPO / "benchmarks"
GENERATED = re.compile(r"<!-- generated: \w+ -->.*?<!-- end of generated -->", re.S)
"""The references ``docs/hooks.py`` writes from the parser and the key table (tests/test_docs.py)."""

FLAG = r"(?<![\w-])(--[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*)"
"""A flag as written, with what a wrong hint once glued to it (``--models.samples``)."""
OTHER_TOOLS = {"--find-links", "--no-deps", "--wheel", "--sdist", "--no-isolation", "--require-archs", "--hooks-only",
               "--format", "--no-cache-dir", "--force-reinstall", "--onefile", "--collect-data", "--from", "--selftest"}
"""Flags of pip, build, delocate, hatch, git, PyInstaller (``pyi-makespec``) and a Dockerfile's ``COPY``
that the recipes and messages use, and ``--selftest``, the example app's own (docs/bundles.md)."""


def _pages() -> dict[str, str]:
    pages = {"README.md": (REPO / "README.md").read_text(encoding="utf-8")}
    pages |= {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}
    return {name: GENERATED.sub("", text) for name, text in pages.items()}


PAGES = _pages()


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()
TOP_FLAGS = {flag for action in parser()._actions for flag in action.option_strings}


def _flags(command: str) -> set[str]:
    return {flag for action in COMMANDS[command]._actions for flag in action.option_strings} | TOP_FLAGS


def _quoted_commands(text: str) -> Iterator[tuple[str, bool]]:
    """Each ``hatch-shrinkray ...`` the text quotes, and whether it is a line of a code block (a
    command to run as written) rather than a span in prose (which may name a command and a flag)."""
    for block in re.findall(r"```(?:sh|console|toml)\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for m in re.finditer(r"hatch-shrinkray (?:-[vq] )?[a-z]+\b[^&\"`]*", line.split("  #", 1)[0]):
                yield m.group(0).strip(), True
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    for span in re.findall(r"`(hatch-shrinkray (?:-[vq] )?[a-z][^`]*)`", prose):
        yield span, False


def _argv(quoted: str) -> tuple[list[str], str]:
    """The arguments of a quoted command before its COMMAND part, and the command's name: the
    parser sees what it sees when the line is typed (``main`` splits off ``check``'s and
    ``bundle``'s COMMAND, with its ``--``; ``record``'s follows its ``--`` as a positional of its
    own, here ``true``)."""
    argv = shlex.split(quoted)[1:]
    name = next(a for a in argv if not a.startswith("-"))
    if "--" in argv:
        argv = argv[:argv.index("--")] + (["--", "true"] if name == "record" else [])
    return argv, name


def _parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        parser().parse_args(argv)
    except SystemExit as exc:
        return f"exit {exc.code}: {capsys.readouterr().err.strip()}"
    return ""


def test_every_flag_the_docs_name_exists() -> None:
    """A flag in prose exists on some command or in the pytest plugin; a flag in a quoted
    ``hatch-shrinkray CMD ...`` exists on CMD."""
    every = set().union(*(_flags(c) for c in COMMANDS)) | _plugin_flags() | OTHER_TOOLS
    wrong = [f"{name}: {flag}" for name, text in PAGES.items()
             for flag in sorted(set(re.findall(FLAG, text))) if flag not in every]
    for name, text in PAGES.items():
        for quoted, _ in _quoted_commands(text):
            command = next((w for w in quoted.split()[1:] if not w.startswith("-")), "")
            if command not in COMMANDS:
                wrong.append(f"{name}: `{quoted}`: no command {command!r}")
                continue
            wrong += [f"{name}: `{quoted}`: {command} has no {flag}"
                      for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", quoted.split(" -- ")[0])
                      if flag not in _flags(command)]
    assert wrong == []


def test_every_flag_the_package_names_exists() -> None:
    """The same for the package's own words (messages, hints, help, docstrings): a flag it names is
    one of the command line's, the pytest plugin's, or another tool's the recipes use."""
    every = set().union(*(_flags(c) for c in COMMANDS)) | _plugin_flags() | OTHER_TOOLS
    wrong = [f"{path.relative_to(REPO)}: {flag}" for path in sorted((REPO / "hatch_shrinkray").rglob("*.py"))
             for flag in sorted(set(re.findall(FLAG, path.read_text(encoding="utf-8"))))
             if flag not in every]
    assert wrong == []


def _plugin_flags() -> set[str]:
    from hatch_shrinkray.capture import pytest_plugin

    return set(re.findall(r"addoption\(\"(--[a-z-]+)\"", Path(pytest_plugin.__file__).read_text(encoding="utf-8")))


def test_every_quoted_command_line_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """Each ``hatch-shrinkray`` line of a code block parses as written, and so does each command in
    prose that is quoted whole (with its ``-- COMMAND``)."""
    seen, wrong = 0, []
    for name, text in PAGES.items():
        for quoted, in_block in _quoted_commands(text):
            if not in_block and " -- " not in quoted:
                continue  # a name in prose: `hatch-shrinkray shrink --plan`
            argv, _ = _argv(quoted.replace("{dest_dir}", "out").replace("{wheel}", "a.whl"))
            seen += 1
            if why := _parse_error(argv, capsys):
                wrong.append(f"{name}: `{quoted}`: {why}")
    assert wrong == [] and seen >= 20


def test_the_checker_catches_what_the_docs_could_get_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parse_error(_argv("hatch-shrinkray shrink m.onnx -o out --levles 3")[0], capsys)
    assert _parse_error(_argv("hatch-shrinkray record -- python -m pytest")[0], capsys)  # no --output
    assert not _parse_error(_argv("hatch-shrinkray record -o d -- python -m pytest")[0], capsys)
    assert not _parse_error(_argv("hatch-shrinkray check --fix -- python -m pytest tests")[0], capsys)
    assert "--models.samples" not in _flags("wheel") and "--inputs" in _flags("check")
    assert re.findall(FLAG, "lower `--models.samples`, or --force.") == ["--models.samples", "--force"]


@pytest.mark.parametrize("argv", [
    ["shrink", "m.onnx", "-o", "out", "--levles", "3"],  # a mistyped flag
    ["shrink", "m.onnx"],                                 # a required flag missing
    ["wheel", "w.whl", "--pins", "always"],              # a value outside the choices
    ["shrnk", "m.onnx"],                                  # a mistyped command
    [],                                                   # no command
])
def test_usage_errors_are_one_line_and_exit_1_as_the_command_reference_says(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "Every user mistake, a mistyped flag included, prints one\nline, `error: ...`, and exits 1" in text
    with pytest.raises(SystemExit) as raised:
        parser().parse_args(argv)
    err = capsys.readouterr().err
    assert raised.value.code == 1 and len(err.splitlines()) == 1 and err.startswith("error: "), err


def test_version_and_verbose_are_where_the_command_reference_puts_them(capsys: pytest.CaptureFixture[str]) -> None:
    """`hatch-shrinkray --version` says which; `-v` goes before or after the command."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "`hatch-shrinkray --version` says which" in text and "`-v` (before or after the command)" in text
    with pytest.raises(SystemExit) as raised:
        parser().parse_args(["--version"])
    assert raised.value.code == 0 and capsys.readouterr().out.strip() == f"hatch-shrinkray {__version__}"
    assert parser().parse_args(["-v", "info", "m.onnx"]).verbose
    assert parser().parse_args(["info", "m.onnx", "-v"]).verbose


# -- Figures -----------------------------------------------------------------------------------------

FIGURE = re.compile(r"(?<![\w.+-])~?(\d+(?:\.\d+)?)(?:x?-(\d+(?:\.\d+)?))?\s?(%|x\b(?! \d)|MB\b|KB\b|GB\b|s\b)")
"""A measured figure: a number (or a range) with a unit (``120 x 18710`` is a shape, not a ratio)."""
WRITTEN_AS = {"%": r"(?<![\w.])(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? ?%",
              "x": r"(?<![\w.])x(\d+(?:\.\d+)?)|(?<![\w.])(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?x\b"}
"""Where the benchmark writes a share or a ratio the way the docs quote it (``94.50% (189/200)``, ``0.61x``,
the load table's ``x1.04``), a figure with that unit must be one of those, not any number of the row: a
percentage matches a cell that is a percentage, never a size, a count or an error that happens to round to it."""

SETTINGS = {
    "8 MB": env.MAX_BYTES / 1e6, "64 MB": env.MAX_BYTES_FOR_UNITS / 1e6, "512 MB": env.MAX_MEMORY / 1e6,
    "32 MB": env.MAX_MEMORY / 16 / 1e6, "32.00 MB": env.MAX_MEMORY / 16 / 1e6, "1.5x": ESTIMATE_HIGH,
}
"""Figures in a benchmark paragraph that are the tool's own defaults, each checked against the code."""

COMPUTED = {"28.2%", "27.5%", "31.1%", "1.75-2.75x", "13-26%", "9.7%", "0.65x the original's", "1.0x raw"}
"""Figures computed from two cells of a benchmark file (a size as a share of the original's) or by the
code (what packed codes fold), each as written where it is quoted; the tests below compute each one."""

STOP_WORDS = frozenset({
    "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "before", "beside", "but", "by",
    "can", "each", "every", "for", "from", "has", "have", "in", "into", "is", "it", "its", "kb", "gb", "mb",
    "more", "no", "not", "of", "on", "one", "only", "or", "over", "same", "so", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "under", "up", "was", "were", "what", "when",
    "where", "which", "while", "with", "within", "without"
})
"""Words that name no subject, and the units."""


def _numbers(line: str) -> list[float]:
    return [float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", line.replace(",", ""))]


def _supported(value: str, numbers: set[float]) -> bool:
    """``value`` (as written: ``21.2``) is one of ``numbers`` rounded to its precision."""
    digits = len(value.split(".")[1]) if "." in value else 0
    return any(abs(round(n, digits) - float(value)) < 10 ** -digits / 2 for n in numbers)


def _written_as(text: str, unit: str) -> set[float]:
    return {float(n) for m in re.finditer(WRITTEN_AS[unit], text.replace(",", "")) for n in m.groups() if n}


def _holds(row: str, value: str, unit: str) -> bool:
    return _supported(value, _written_as(row, unit) if unit in WRITTEN_AS else set(_numbers(row)))


def _words(text: str) -> set[str]:
    """The words of ``text`` that could name what a figure is about: lower case, a hyphenated name one word
    and a snake_case one its parts (``PP-OCRv6`` and ``ppocrv6_rec`` both give ``ppocrv6``), no stop word."""
    text = re.sub(r"(?<=[a-z0-9])-(?=[a-z0-9])", "", text.lower())
    return {w for w in re.findall(r"[a-z][a-z0-9]+", text) if w not in STOP_WORDS}


def _cited(part: str) -> list[str]:
    return re.findall(r"benchmarks/([A-Z_-]+\.md)", part)


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _quoting(text: str) -> Iterator[tuple[str, str, str, list[str]]]:
    """(what quotes figures, its own words, its paragraph's first sentence, the benchmark files cited) for each
    sentence of a paragraph or list item, and for each cell of a table row, whose own words are its row's
    first cell and its column's header too. A paragraph, list item or row cites the files it names; a
    table's rows, and a list's items if the paragraph before ends with a colon, also those it names."""
    before: list[str] = []
    intro = False
    for para in re.split(r"\n\s*\n", text):
        header: list[str] = []
        for part in re.split(r"\n(?=[*-] |\|)", para):
            cited = _cited(part) + (before if part.startswith("|") or (intro and part.startswith(("* ", "- "))) else [])
            if not part.startswith("|"):
                sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\[])", part)
                for sentence in sentences:
                    yield sentence, sentence, sentences[0], cited
            elif not header:
                header = _cells(part)
            elif not set(part) <= set("|-: \n"):
                cells = _cells(part)
                for i, cell in enumerate(cells):
                    yield cell, " ".join([cells[0], header[i] if i < len(header) else "", cell]), "", cited
        before, intro = _cited(para), para.rstrip().endswith(":")


def _rows(text: str) -> Iterator[tuple[str, list[str]]]:
    """(row, the headings it sits under) for each table row, list item and paragraph of a benchmark file, its
    code blocks left out."""
    headings: dict[int, str] = {}
    for para in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S)):
        for part in re.split(r"\n(?=[*-] |\||#)", para):
            if m := re.match(r"(#+) (.*)", part):
                headings = {k: v for k, v in headings.items() if k < len(m.group(1))} | {len(m.group(1)): m.group(2)}
            else:
                yield part, list(headings.values())


@cache
def _benchmark(name: str) -> tuple[list[tuple[str, set[str], set[str]]], set[str]]:
    """Each row of ``benchmarks/NAME`` with its distinguishing words (its headings' included) and the names
    of the sections it sits in; and all the section names' words. A word distinguishes rows if fewer than half
    of the rows that hold a number have it (a file's units, command lines and column words do not); a
    section's name is its heading up to a parenthesis or colon (``## ppocrv6_rec``, ``## Small tensors in
    fp16``), less the words every row's headings have (the title)."""
    rows = [(row, _words(row), _words(" ".join(headings)), _words(" ".join(re.split(r"[(:]", h)[0] for h in headings)))
            for row, headings in _rows((BENCHMARKS / name).read_text("utf-8"))]
    counted = [words for row, words, _, _ in rows if _numbers(row)]
    common = {w for w in set().union(*counted) if 2 * sum(w in words for words in counted) >= len(counted)}
    title = set.intersection(*(named for *_, named in rows))
    return ([(row, (words | headed) - common, named - common - title) for row, words, headed, named in rows],
            set().union(*(named for *_, named in rows)) - common - title)


def figure_ties(text: str) -> Iterator[tuple[str, str, list[str], list[str]]]:
    """(figure, a value of it, the rows of the cited files that hold the value, those of them about what the
    words quoting it are about: ``figure_problems``) for every figure of ``text`` quoted from a benchmark
    file, the tool's defaults and the computed figures left out."""
    def words_of(text: str) -> set[str]:
        return _words(FIGURE.sub(" ", re.sub(r"benchmarks/\S+", " ", text)))

    for quoted, around, topic, cited in _quoting(text):
        files = [c for c in dict.fromkeys(cited) if (BENCHMARKS / c).is_file()]
        own = words_of(around)
        words = own | words_of(topic)
        for m in FIGURE.finditer(quoted) if files else ():
            if m.group(0).lstrip("~") in SETTINGS or any(quoted.startswith(c, m.start()) for c in COMPUTED):
                continue
            for value in (v for v in m.groups()[:2] if v is not None):
                held, tied = [], []
                for c in files:
                    rows, sections = _benchmark(c)
                    named = own & sections
                    for row, row_words, under in rows:
                        if _holds(row, value, m.group(3)):
                            held.append(f"{c}: {row[:100]}")
                            if words & row_words and (not named or under & words or (not under and row_words & named)):
                                tied.append(held[-1])
                yield m.group(0), value, held, tied


def figure_problems(page: str, text: str) -> list[str]:
    """The figures of ``text`` that no row of the benchmark files its paragraphs cite holds, or that only rows
    about something else hold.

    A row is a table row, list item or paragraph of the benchmark file, read with its headings. It holds a
    share or a ratio written as one there (``WRITTEN_AS``), any other figure as one of its numbers. It is
    about what the docs say if it shares a distinguishing word with the sentence quoting the figure or that
    paragraph's first sentence (a later sentence says "it"), or for a table cell with the cell, its row's
    first cell and its column's header: no stop word, and not a word of half or more of the file's rows (its
    units, command lines, column words). Where that sentence or cell names a section of the file (a model in
    a file with a section per model), the row must also sit in a section the quote names (or, outside every
    section, name one itself). So a sentence about one model quoting another model's row of the file fails;
    a sentence that names both models, or names none, is tied by its other words only."""
    problems = [f"{page}: cites benchmarks/{c}, which does not exist"
                for c in dict.fromkeys(_cited(text)) if not (BENCHMARKS / c).is_file()]
    for figure, value, held, tied in figure_ties(text):
        if not held:
            problems.append(f"{page}: {figure!r}: {value} is in no row of the files its paragraph cites")
        elif not tied:
            problems.append(f"{page}: {figure!r}: {value} is only in rows about something else: {held[:3]}")
    return problems


def _figure_pages() -> dict[str, str]:
    """README, the docs, and benchmarks/README.md, which names the files beside it without the folder."""
    index = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    return PAGES | {"benchmarks/README.md": re.sub(r"(?<![\w/.])([A-Z][A-Z_-]+\.md)", r"benchmarks/\1", index)}


def test_every_figure_of_a_paragraph_that_cites_a_benchmark_is_in_it() -> None:
    problems = [p for page, text in _figure_pages().items() for p in figure_problems(page, text)]
    assert problems == []


def test_the_figure_checker_catches_a_figure_the_benchmark_does_not_hold() -> None:
    """The paragraph of issue 31: one fact, three figures on three pages."""
    good = "reads 94.5% of 200 unseen lines, 28.2% of the file (`benchmarks/AUTO_DOWNLOAD.md`)"
    assert figure_problems("p", good) == []
    assert figure_problems("p", good.replace("94.5%", "96.5%"))
    assert figure_problems("p", good.replace("28.2%", "28.3%"))
    assert figure_problems("p", "(`auto` on PP-OCRv6: 29.5 s, `benchmarks/SHRINK_TIME.md`)") == []
    assert figure_problems("p", "(`auto` on PP-OCRv6: 30.5 s, `benchmarks/SHRINK_TIME.md`)")
    assert figure_problems("p", "(`benchmarks/NO_SUCH.md`)")
    # a number of the file, but not a share there (PP-OCRv6's round-to-nearest rel-L2 is 0.0742)
    assert figure_problems("p", "(PP-OCRv6: 0.0742, `benchmarks/DOWNLOAD.md`)") == []
    assert figure_problems("p", "(PP-OCRv6: 0.0742%, `benchmarks/DOWNLOAD.md`)")
    assert figure_problems("p", "(PP-OCRv6: 5.984x, `benchmarks/DOWNLOAD.md`)")  # a size there, not a ratio
    table = "from `benchmarks/DOWNLOAD.md`:\n\n| levels | PP-OCRv6 |\n|---|---|\n| 255 | 5.09 / 4.92 MB, 85.5% |\n"
    assert figure_problems("p", table) == [] and figure_problems("p", table.replace("4.92", "4.93"))


def test_the_figure_checker_catches_a_figure_copied_from_another_models_row() -> None:
    """A real paragraph and a real table, each given a figure the cited file holds, but in another model's row:
    README's headline with PP-OCRv4 rec's 85.0% (its `int8` with the recording) for PP-OCRv6's 94.5%, and
    docs/methods.md's level table with Magika's 63-level answers in PP-OCRv6's column."""
    readme = next(p for p in PAGES["README.md"].split("\n\n") if "reads 94.5% of 200 unseen" in p)
    assert figure_problems("README.md", readme) == []
    wrong = figure_problems("README.md", readme.replace("94.5%", "85.0%"))
    assert len(wrong) == 1 and "'85.0%'" in wrong[0] and "rows about something else" in wrong[0], wrong
    methods = PAGES["methods.md"]
    table = methods[methods.index("Each task's"):methods.index("| 31 |")]
    assert "| 63 | 0.80x / 0.75x, 71.5% / 88.5% | 0.76x / 0.72x, 99.1% / 99.4% |" in table
    assert figure_problems("methods.md", table) == []
    wrong = figure_problems("methods.md", table.replace("71.5% / 88.5% |", "99.1% / 99.4% |"))
    assert [w.split(":")[1] for w in wrong] == [" '99.1%'", " '99.4%'"], wrong


def test_the_defaults_the_docs_quote_are_the_codes() -> None:
    assert SETTINGS["8 MB"] == 8 and SETTINGS["64 MB"] == 64 and SETTINGS["512 MB"] == 512
    assert SETTINGS["32 MB"] == 32
    assert f"each estimate taken to be off by up to {ESTIMATE_HIGH}x" in " ".join(PAGES["methods.md"].split())
    recording = PAGES["recording.md"] + PAGES["trust.md"]
    assert f"`--max-samples`\n  ({env.MAX_SAMPLES})" in recording
    assert f"at most {env.MAX_SAMPLES} samples and 8 MB" in recording
    d = VerifyOptions()
    troubleshooting = PAGES["troubleshooting.md"]
    assert f"the\n  default {d.rel_l2_limit}" in troubleshooting
    assert f"the default {d.agreement_limit}" in PAGES["recording.md"]


@pytest.mark.parametrize(("quoted", "flips", "positions"), [("12%", 1, 2), ("2.0%", 15, 500)])
def test_the_gate_examples_are_what_the_gate_computes(quoted: str, flips: int, positions: int) -> None:
    """docs/recording.md's worked lower bounds of the agreement gate."""
    assert f"(lower bound {quoted} >" in PAGES["recording.md"]
    digits = len(quoted.rstrip("%").split(".")[1]) if "." in quoted else 0
    assert f"{100 * flip_rate_lower_bound(flips, positions):.{digits}f}%" == quoted


@pytest.mark.parametrize(("quoted", "changed", "units"), [
    ("<= 3.1% at 95%", 2, 200), ("<= 63% at 95%", 0, 3), ("the bound is 17%", 0, 16), ("it is 78%", 0, 2)])
def test_the_evidence_bounds_are_what_the_bound_computes(quoted: str, changed: int, units: int) -> None:
    assert quoted in PAGES["evidence.md"]
    figure = re.search(r"(\d+(?:\.\d+)?)%", quoted)
    assert figure is not None
    digits = len(figure.group(1).split(".")[1]) if "." in figure.group(1) else 0
    assert f"{100 * upper_bound(changed, units):.{digits}f}" == figure.group(1)


def _row(text: str, section: str, variant: str) -> list[str]:
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in body.splitlines() if line.startswith(f"| {variant} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_derived_figures_are_computed_from_their_rows() -> None:
    """`int8` with the recording keeps the bytes of round-to-nearest: 28.2% and 31.1% of the file
    for PP-OCRv6 and PP-OCRv4 rec (docs/recording.md), from AUTO_DOWNLOAD.md's rows."""
    bench = (BENCHMARKS / "AUTO_DOWNLOAD.md").read_text(encoding="utf-8")
    shares = []
    for model in ("ppocrv6_rec", "ppocrv4_rec"):
        original, fitted = _row(bench, model, "original"), _row(bench, model, "int8 with the recording")
        shares.append(f"{100 * float(fitted[1]) / float(original[1]):.1f}%")
    assert f"({shares[0]} and {shares[1]} of the file)" in " ".join(PAGES["recording.md"].split())
    assert set(shares) <= COMPUTED


def test_the_level_tables_derived_figures_are_computed_from_download_md() -> None:
    """docs/methods.md: int8's wheel member is 13-26% smaller than its raw file, and output-aware rounding adds
    up to 9.7% to round-to-nearest's bytes at the same level count, over DOWNLOAD.md's three models."""
    bench = (BENCHMARKS / "DOWNLOAD.md").read_text(encoding="utf-8")
    smaller, added = [], []
    for model in ("ppocrv6_rec", "magika", "silero_vad"):
        plain = _row(bench, model, "int8, round-to-nearest")
        smaller.append(round(100 * (1 - float(plain[2]) / float(plain[1]))))
        for levels in ("", " 127 levels", " 63 levels", " 31 levels", " 15 levels", " 7 levels"):
            rtn, fit = (_row(bench, model, f"int8{levels}, {how}") for how in ("round-to-nearest", "output-aware"))
            added += [100 * (float(fit[i]) / float(rtn[i]) - 1) for i in (2, 3)]
    methods = " ".join(PAGES["methods.md"].split())
    assert f"only {min(smaller)}-{max(smaller)}% smaller than its raw file" in methods
    assert f"output-aware rounding adds up to {max(added):.1f}%" in methods
    assert {f"{min(smaller)}-{max(smaller)}%", f"{max(added):.1f}%"} <= COMPUTED


def test_float_levels_sizes_in_the_method_table_are_computed_from_download_md() -> None:
    """docs/methods.md's method table: `float-levels` keeps the raw size (1.0x on DOWNLOAD.md's three models)
    and Silero VAD's wheel at 256 levels is 0.65x the original's."""
    bench = (BENCHMARKS / "DOWNLOAD.md").read_text(encoding="utf-8")
    ratios = {}
    for model in ("ppocrv6_rec", "magika", "silero_vad"):
        body = bench.split(f"## {model}\n", 1)[1].split("\n## ", 1)[0]
        original = re.search(r"Original: ([\d.]+) raw, ([\d.]+) wheel", body)
        assert original is not None, model
        levels = _row(bench, model, "float-levels 256")
        ratios[model] = [float(levels[i]) / float(original.group(i)) for i in (1, 2)]
    row = next(line for line in PAGES["methods.md"].splitlines() if line.startswith("| `float-levels` |"))
    assert all(f"{raw:.1f}x raw" in row for raw, _ in ratios.values())
    assert f"Silero VAD, 256 levels: wheel {ratios['silero_vad'][1]:.2f}x the original's" in row
    assert {f"{ratios['silero_vad'][0]:.1f}x raw", f"{ratios['silero_vad'][1]:.2f}x the original's"} <= COMPUTED


def test_the_headline_is_one_figure_on_every_page() -> None:
    """PP-OCRv6 rec with `int8` and a recording: the size and the lines kept, computed from the one
    benchmark row they come from, are what README, the docs' index and every page that gives them say."""
    bench = (BENCHMARKS / "AUTO_DOWNLOAD.md").read_text(encoding="utf-8")
    original = _row(bench, "ppocrv6_rec", "original")
    fitted = _row(bench, "ppocrv6_rec", "int8 with the recording")
    nearest = _row(bench, "ppocrv6_rec", "int8, round-to-nearest")
    raw = f"{100 * float(fitted[1]) / float(original[1]):.1f}%"
    wheel = f"{100 * float(fitted[2]) / float(original[2]):.1f}%"
    kept = f"{float(fitted[4].split('%')[0]):.1f}%"
    plain = f"{float(nearest[4].split('%')[0]):.1f}%"
    size = f"{float(original[1]):.1f} MB"
    for page in ("README.md", "index.md"):
        text = " ".join(PAGES[page].split())
        assert f"PP-OCRv6 text recogniser ({size})" in text, page
        assert f"{raw} of the file ({wheel} of its wheel bytes)" in text, page
        assert f"{kept} of 200 unseen" in text and plain in text, page
    assert f"output-aware rounding: {kept} against {plain}" in " ".join(PAGES["evidence.md"].split())
    assert f"keeps {kept} of PP-OCRv6 rec's lines identical (round-to-nearest: {plain})" in " ".join(
        PAGES["recording.md"].split())
    claims = [(page, m.group(1)) for page, text in PAGES.items()
              for m in re.finditer(r"(\d+\.\d)% of\s+(?:200 unseen|PP-OCRv6 rec's lines)", " ".join(text.split()))]
    assert claims and all(f"{value}%" == kept for _, value in claims), claims


def test_packed_codes_fold_what_the_docs_say() -> None:
    """docs/runtimes.md and docs/methods.md: packed 4/6/10/12-bit codes fold 1.75-2.75x int8's bytes."""
    import numpy as np

    from hatch_shrinkray.encodings import packing
    from hatch_shrinkray.encodings._decode import float_decode
    from hatch_shrinkray.numerics.quant import quantize_symmetric

    w = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    int8 = float_decode(quantize_symmetric(w, 0, 8, None), w.dtype, 17, "int8").folded_bytes
    ratios = []
    for bits in (4, 6, 10, 12):
        q = quantize_symmetric(w, 0, bits, None)
        ratios.append(packing.packed_decode(q.codes, q.scale, bits, opset=17, decoded=q.decoded,
                                            label="packed").folded_bytes / int8)
    band = f"{min(ratios):.2f}-{max(ratios):.2f}x"
    assert band in COMPUTED
    assert f"{band} int8's" in PAGES["runtimes.md"] and f"{band} int8's" in PAGES["methods.md"]


def test_the_layout_table_is_the_layer_contract() -> None:
    """docs/development.md's layout table names the layers of pyproject.toml's import-linter
    contract, top to bottom, one row per layer."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    expected = [sorted(re.split(r"\s*[|:]\s*", layer.strip())) for layer in layers]
    table = PAGES["development.md"].split("| layer | what it does |", 1)[1].split("\n* ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines()[2:] if line.strip().startswith("|")]
    assert [sorted(re.findall(r"`([a-z_]+)/?`", row)) for row in rows] == expected


@pytest.mark.parametrize(("command", "target"), [("compare", None), ("shrink", "wheel")])
def test_the_size_tables_note_names_flags_of_the_command_that_prints_it(command: str, target: str | None) -> None:
    """`compare` has `--sizes` but no `--target`; `shrink --sizes` has both."""
    from hatch_shrinkray.report import sizes_table
    from hatch_shrinkray.sizes import Sizes

    note = sizes_table(Sizes(100, 90, 88, True), Sizes(25, 22, 21, True), target).splitlines()[-1]
    named = re.findall(FLAG, note)
    assert "--sizes" in named and all(flag in _flags(command) for flag in named), note
    assert figure_problems("report.py", note + " (`benchmarks/DOWNLOAD.md`)") == []  # its band is DOWNLOAD.md's


def _quotes() -> list[tuple[str, str]]:
    """(page, words) the docs say about a constant of the code, built from the constant."""
    from hatch_shrinkray import progress
    from hatch_shrinkray.evidence import MIN_UNITS
    from hatch_shrinkray.fitting.candidates import MIN_ROWS_PER_FEATURE
    from hatch_shrinkray.hatch.plugin import PYPI_FILE_LIMIT, PYPI_NEAR
    from hatch_shrinkray.verification.compare import NEAR_TIE
    from hatch_shrinkray.verification.judges import MAP_MIN_PIXELS, boxes, decisions, maps, sequences, tags

    low, mid, high = maps.THRESHOLDS
    return [
        ("evidence.md", f"at least {MAP_MIN_PIXELS} pixels"),
        ("evidence.md", f"regions above {low}, {mid} and {high}: same count, matched one to one (IoU >= {maps.MATCH})"),
        ("evidence.md", f"each matched region drawn with IoU >= {maps.SAME}"),
        ("evidence.md", f"the blank is the argmax of {sequences.BLANK_SHARE:.0%} to {sequences.MAX_BLANK_SHARE:.0%} "
                        "of the frames"),
        ("evidence.md", f"runs above 0.5 of at least {decisions.MIN_RUN} frames on average"),
        ("evidence.md", f"boundaries within {decisions.TOLERANCE} step or frame"),
        ("evidence.md", f"the argmax of at least {sequences.BLANK_SHARE:.0%} of the frames"),
        ("evidence.md", f"2 to {tags.MAX_TAGS} tags"),
        ("evidence.md", f"at least {boxes.MIN_CANDIDATES} candidates"),
        ("evidence.md", f"candidates whose best class scores >= {boxes.SCORE}, NMS per class at IoU {boxes.NMS_IOU}"),
        ("evidence.md", f"each pair drawn with IoU >= {boxes.SAME}, or no corner moved by more than a pixel"),
        ("evidence.md", f"below **{MIN_UNITS} independent units**"),
        ("recording.md", f"gap below {NEAR_TIE:.0%} of the row's range, or a probability within {NEAR_TIE} of 0.5"),
        ("recording.md", f"Below {MIN_UNITS} independent units nothing is fitted"),
        ("recording.md", f"fewer than {MIN_ROWS_PER_FEATURE} calibration rows per input feature"),
        ("evidence.md", f"fewer than {MIN_ROWS_PER_FEATURE}\n  recorded rows per input feature"),
        ("quickstart.md", f"from {PYPI_NEAR:.0%} of PyPI's\n  default limit of {PYPI_FILE_LIMIT // 2 ** 20} MiB"),
        ("configuration.md", f"the seconds between progress lines (default {progress.INTERVAL:.0f})"),
    ]


@pytest.mark.parametrize(("page", "words"), _quotes())
def test_the_constants_the_docs_quote_are_the_codes(page: str, words: str) -> None:
    assert " ".join(words.split()) in " ".join(PAGES[page].split())


def test_the_readmes_quick_start_pins_and_installs_as_the_quick_start_page_does() -> None:
    """Both quick starts pin the core at this version, and both install the package before its
    tests are recorded (they import it)."""
    readme = PAGES["README.md"].split("## Quick start: a Hatch project", 1)[1].split("\n## ", 1)[0]
    page = PAGES["quickstart.md"]
    for text in (readme, page):
        assert f'"hatch-shrinkray-core=={__version__}"' in text
        record = text.index("hatch-shrinkray record --output")
        assert 'PIP_FIND_LINKS="$WHEELHOUSE" python -m pip install -e .' in text[:record]


def _table_keys() -> set[str]:
    from hatch_shrinkray.shipping.config import _HOOK_KEYS, ENGINE_KEYS

    return {*_HOOK_KEYS, *ENGINE_KEYS}


def test_every_key_the_docs_set_exists() -> None:
    """A `key = value` in prose, and every key of a TOML block's hatch-shrinkray table (or of a
    block that is a fragment of one), is a key the table accepts, with a value TOML reads."""
    import tomllib

    keys, wrong = _table_keys(), []
    for page, text in PAGES.items():
        for span in re.findall(r"`([^`\n]+)`", text):
            if (m := re.fullmatch(r"([a-z][a-z0-9-]*) = (.+)", span)) and m.group(1) not in keys:
                wrong.append(f"{page}: `{span}`")
        for block in re.findall(r"```toml\n(.*?)```", text, flags=re.S):
            data = tomllib.loads(block)
            tool = data.get("tool", {})
            tables = [tool.get("hatch-shrinkray", {}), tool.get("hatch", {}).get("build", {}).get("hooks", {})
                      .get("shrinkray", {})] if "tool" in data or "build-system" in data else [data]
            tables += [o for table in tables for o in table.get("overrides", [])]
            wrong += [f"{page}: {key} in a TOML block" for table in tables for key in table if key not in keys]
    assert wrong == []




