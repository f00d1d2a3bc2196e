"""Every method fact lives on the method: outside ``methods/``, the registry and ``method_facts`` no
code names a method to decide something, so adding a method touches those only.

The check reads the source's syntax trees, not its text. A method's name (``options.METHODS``) is
also an encoding's (``int8``, ``fp16``, ``int4``) or a judge's (``auto``), so a string naming a
method counts where it is compared with, or looks up by, something that names a method
(``options.method == "auto"``, ``{"int4": ...}.get(method)``), and where a literal collection is
made of method names alone with one that names nothing else (``("int8", "auto")``)."""

from __future__ import annotations

import ast
from pathlib import Path

import hatch_shrinkray
from hatch_shrinkray.options import ENCODINGS, JUDGES, METHODS

PACKAGE = Path(hatch_shrinkray.__file__).parent
ALLOWED = ("methods/", "registry.py", "method_facts.py")
"""Where method names belong: the methods, the registry that names them, their facts."""
NOT_ENCODINGS = set(METHODS) - set(ENCODINGS)


def _names_method(node: ast.AST) -> bool:
    return "method" in ast.unparse(node)


def _strings(node: ast.AST) -> list[str]:
    """The string constants ``node`` is, or holds as a literal tuple, list, set or ``frozenset(...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 \
            and node.func.id in ("frozenset", "set", "tuple"):
        return _strings(node.args[0])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def method_names_deciding(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` for each method name ``source`` decides by."""
    tree = ast.parse(source)
    dicts = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
             for t in n.targets if isinstance(t, ast.Name)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            for i, part in enumerate(parts):
                others = [p for j, p in enumerate(parts) if j != i]
                for name in _strings(part):
                    if name in METHODS and (any(map(_names_method, others)) or _names_method(part)):
                        found.append((node.lineno, name))
        looked_up = None
        if isinstance(node, ast.Subscript) and _names_method(node.slice):
            looked_up = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and _names_method(node.args[0]):
            looked_up = node.func.value
        if isinstance(looked_up, ast.Name):
            looked_up = dicts.get(looked_up.id)
        if isinstance(looked_up, ast.Dict):
            found += [(looked_up.lineno, k.value) for k in looked_up.keys
                      if isinstance(k, ast.Constant) and k.value in METHODS]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = _strings(node)
            if names and len(names) == len(node.elts) and set(names) <= set(METHODS) and set(names) & NOT_ENCODINGS \
                    and not set(names) <= set(JUDGES):
                found.append((node.lineno, names[0]))
    return sorted(set(found))


def _decisions() -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(ALLOWED):
            out |= {(rel, line, name) for line, name in method_names_deciding(path.read_text(encoding="utf-8"))}
    return out


def test_no_method_name_decides_anything_outside_the_methods() -> None:
    found = _decisions()
    new = sorted(f"{rel}:{line}: {name!r}" for rel, line, name in found)
    assert not new, "method names compared outside methods/ (put the fact on the method, method_facts.Facts):\n" + \
        "\n".join(new)


def test_the_check_finds_what_it_is_for() -> None:
    """Each way of deciding by a method's name is found; an encoding's or a judge's name is not."""
    decides = ['ok = options.method in ("int8", "auto")', 'if result.method == "auto": pass',
               'PLANNED = ("int8", "auto", "int4")', 'ONLY = {"x": frozenset({"int4", "auto"})}',
               'kind = {"fp16": "fp16", "int4": "int4"}.get(method, "int8")',
               'TABLE = {"dedup": 1}\nx = TABLE[options.method]', 'f(m, encoding not in (method, "dedup"))']
    for source in decides:
        assert method_names_deciding(source), source
    fine = ['if encoding == "fp16": pass', 'if kind == "int8": pass', 'judge = "auto" if name == "auto" else name',
            'LADDER = ("int10", "int12", "fp16")', 'x = replace(options, method="int8")',
            'JUDGES = ("auto", "map", "off")', 'levels = LEVELS[opts.method]']
    for source in fine:
        assert not method_names_deciding(source), source


def test_every_method_has_its_facts_and_the_registry_names_them_all() -> None:
    from hatch_shrinkray.method_facts import FACTS
    from hatch_shrinkray.registry import METHODS as REGISTERED

    assert tuple(REGISTERED) == tuple(FACTS) == METHODS
