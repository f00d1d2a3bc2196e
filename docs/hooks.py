"""mkdocs hook: the pages that must follow the code are generated from it at build time.

* ``<!-- generated: configuration -->``: every key the configuration table accepts, its TOML
  type, its default and its meaning, as ``option_table.py`` declares them (the hook's own keys'
  defaults are its ``HookConfig`` fields');
* ``<!-- generated: cli -->``: every command and flag of ``hatch-shrinkray``, from the argparse
  parser ``cli.parser()`` itself;
* ``<!-- generated: runtimes -->``: the runtime compatibility table, from
  ``tests/runtime_matrix.json``, which the compatibility tests (``python -m pytest -m compat``)
  compare with what they measure.

The benchmark plots are added to the site from ``benchmarks/`` (one copy in the repository).
``tests/test_docs.py`` checks that these generators cover every key, command and flag. The pages hold
the generated regions too (between the marker and ``END``), so they read whole on the repository's
site; ``python docs/hooks.py`` writes them anew, and a test fails when one no longer matches the code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "tests" / "runtime_matrix.json"
IMAGES = {"img/curves.png": ROOT / "benchmarks" / "curves.png", "img/results.png": ROOT / "benchmarks" / "results.png",
          "img/auto_download.png": ROOT / "benchmarks" / "auto_download.png"}


def config_keys() -> list[str]:
    """Every key the configuration table accepts (hatchling's own reserved keys aside), in table order."""
    from hatch_shrinkray.option_table import HOOK_KEYS, OPTIONS

    return ["models", *(o.key for o in OPTIONS), *(k.key for k in HOOK_KEYS if k.key != "models")]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _code(text: str) -> str:
    return f"`{text}`"


def key_row(key: str) -> tuple[str, str, str]:
    """A key's TOML type, default and meaning, as the reference shows them."""
    from hatch_shrinkray.option_table import BY_KEY, HOOK_BY_KEY, KINDS
    from hatch_shrinkray.shipping.config import HookConfig

    if key in HOOK_BY_KEY:
        hook = HOOK_BY_KEY[key]
        return hook.words, hook.shown or _code(_toml(getattr(HookConfig, key))), hook.help
    option = BY_KEY[key]
    value = option.default()
    if option.shown is not None:
        shown = option.shown
    elif option.kind in ("dims", "encodings", "judges"):
        shown = _code("{}" if not value else str(dict(value)))
    else:
        shown = _code(_toml(value))
    return KINDS[option.kind].words, shown, option.help


def config_reference() -> str:
    from hatch_shrinkray.shipping import config

    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key in config_keys():
        kind, default, meaning = key_row(key)
        rows.append(f"| `{key}` | {kind} | {default.replace('|', '&#124;')} | {meaning} |")
    engine = ", ".join(f"`{k}`" for k in config.ENGINE_KEYS)
    reserved = ", ".join(f"`{k}`" for k in config.RESERVED_KEYS)
    return "\n".join([
        *rows, "",
        f"Allowed in an `overrides` table besides `models`: {engine}.", "",
        f"Hatchling's own keys of every hook table are accepted and left to hatchling: {reserved}.",
    ])


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        return f"`{name}`" + (" ..." if action.nargs in ("+", "*", argparse.REMAINDER) else "")
    metavar = action.metavar
    if action.nargs == 0:
        value = ""
    elif isinstance(metavar, tuple):
        value = " " + " ".join(metavar)
    else:
        value = " " + (metavar or action.dest.upper())
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _default_text(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or default in (None, [], argparse.SUPPRESS) or action.required:
        return ""
    if isinstance(default, list):
        return " ".join(map(str, default))
    return str(default)


def _cell(text: str | None) -> str:
    """Help text as plain text in a table cell: no markdown emphasis, links or HTML from it."""
    text = (text or "").replace("\n", " ")
    for char, escaped in (("&", "&amp;"), ("<", "&lt;"), ("|", "&#124;"), ("*", "\\*"), ("[", "\\["), ("_", "\\_")):
        text = text.replace(char, escaped)
    return text


def _action_rows(actions: list[argparse.Action]) -> list[str]:
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for action in actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        if action.dest == "argv" and not action.option_strings and action.nargs != argparse.REMAINDER:
            continue  # check's COMMAND is split off before parsing (its usage line shows it)
        help_text = argparse.HelpFormatter("")._expand_help(action) if action.help else ""  # as --help prints it
        if action.required and action.option_strings:
            help_text = f"required; {help_text}" if help_text else "required"
        rows.append(f"| {_flags(action)} | {_cell(_default_text(action))} | {_cell(help_text)} |")
    return rows


def commands() -> dict[str, argparse.ArgumentParser]:
    """``hatch-shrinkray``'s subcommands by name, from the parser the command line uses."""
    from hatch_shrinkray.cli import parser

    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def cli_reference() -> str:
    from hatch_shrinkray.cli import parser
    from hatch_shrinkray.cli.usage import GLOBAL

    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    out = ["Options before the command:", "", *_action_rows([a for a in top._actions if a is not sub]), ""]
    for name, command in commands().items():
        summary = helps.get(name) or ""
        out += [f"## hatch-shrinkray {name}", ""]
        if not (command.description or "").lower().startswith(summary.lower()):
            out += [_cell(summary[:1].upper() + summary[1:]) + ".", ""]
        if command.description:
            out += [_cell(command.description), ""]
        usage = command.format_usage().removeprefix("usage: ").strip()
        out += ["```text", " ".join(usage.split()), "```", ""]
        for group in command._action_groups:  # the headings of its --help
            if group.title == GLOBAL:  # as before the command (above)
                flags = ", ".join(f"`{s}`" for a in group._group_actions for s in a.option_strings)
                out += [f"**{group.title}** (as before the command): {flags}", ""]
            elif group._group_actions:
                out += [f"**{group.title}**", "", *_action_rows(group._group_actions), ""]
    return "\n".join(out)


def runtimes_table() -> str:
    data = json.loads(MATRIX.read_text(encoding="utf-8"))
    runtimes: list[str] = data["runtimes"]
    rows = [f"| encoding | {' | '.join(runtimes)} |", "|---" * (len(runtimes) + 1) + "|"]
    for encoding, cells in data["cells"].items():
        rows.append(f"| {encoding} | " + " | ".join(cells[r] for r in runtimes) + " |")
    return "\n".join(rows)


GENERATORS = {"<!-- generated: configuration -->": config_reference, "<!-- generated: cli -->": cli_reference,
              "<!-- generated: runtimes -->": runtimes_table}


END = "<!-- end of generated -->"
"""Closes a generated region in the committed pages, so a page reads whole on the repository's site
too; ``python docs/hooks.py`` writes the regions anew and ``tests/test_docs.py`` fails when one is stale."""


def fill(markdown: str, *, keep_markers: bool = True) -> str:
    """``markdown`` with each generated region made anew from the code: between its marker and
    ``END`` (committed pages), or the marker alone (``keep_markers=False``: the site's page)."""
    for marker, generate in GENERATORS.items():
        if marker not in markdown:
            continue
        head, _, rest = markdown.partition(marker)
        _, closed, tail = rest.partition(END)
        body = generate().strip("\n")
        region = f"{marker}\n{body}\n{END}" if keep_markers else body
        markdown = head + region + (tail if closed else rest)
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill(markdown, keep_markers=False)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, path in IMAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


if __name__ == "__main__":  # python docs/hooks.py: the committed pages' generated regions, anew
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if fill(text) != text:
            page.write_text(fill(text), encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
