"""Frozen dataclasses to JSON and back: the one codec of every file hatch-shrinkray writes and reads
again (the manifest, the plan, cache records and the verification records in them).

A field's type hint says what its JSON is: ``str``, ``int``, ``float``, ``bool``, ``None``, unions
of them, ``tuple``/``list`` (a list), ``dict[str, X]`` (an object), a dataclass (an object of its
fields), an ``Enum`` (its value), ``Any`` (as it is), and ``Annotated[X, Check(...)]`` (X, then the
check). A non-finite float is written as the string
``"nan"``, ``"inf"`` or ``"-inf"`` (JSON has no such numbers) and read back from it. Reading a file
finds every problem before it fails, each one line naming its place (``models.3f2a.remedy.method: expected
one of int8, fp16, got "int3"``); keys a reader does not know are skipped, so a file a later
version wrote still reads, unless the class says ``json_closed``. A class may reshape its JSON with
``json_out(self, body) -> body`` (keys written beside its fields for people, or in their place) and
``json_in(cls, body) -> body`` (the reverse); a field with ``metadata=SKIP`` is never written, and
one with ``metadata=OMIT`` is left out while it has its default.

Only the standard library: the hook's build environment reads the manifest before anything heavy
is installed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")
SKIP = {"json": "skip"}
OMIT = {"json": "omit default"}
NAME = r"[A-Za-z0-9_-]+"


@dataclass(frozen=True)
class Check:
    """What a value must also be, beyond its type: ``expected`` says it in words."""

    test: Callable[[Any], bool]
    expected: str


def one_of(choices: Iterable[object]) -> Check:
    allowed = tuple(choices)
    return Check(allowed.__contains__, "one of " + ", ".join(map(str, allowed)))


AT_LEAST_0 = Check(lambda n: n >= 0, "a number >= 0")
SHA256 = Check(lambda s: len(s) == 64 and all(c in "0123456789abcdef" for c in s), "a sha256")


class Invalid(ValueError):
    """Data that is not what it should be: every problem, one line each, naming where it is."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class Format:
    """A versioned file: ``{"format": name, "version": version, ...}``; ``reads``: the versions read."""

    name: str
    version: int
    reads: tuple[int, ...]

    def wrap(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"format": self.name, "version": self.version, **body}

    def problem(self, data: Any) -> str | None:
        """Why ``data`` is not a file of this format in a version this code reads, or None."""
        if not isinstance(data, dict) or data.get("format") != self.name:
            return f"not a {self.name} file (format is not {self.name!r})"
        if data.get("version") not in self.reads or isinstance(data.get("version"), bool):
            reads = ", ".join(map(str, self.reads))
            return f"version {json.dumps(data.get('version'))}; this hatch-shrinkray reads versions {reads}"
        return None


def loads(kind: Any, text: bytes | str, fmt: Format | None = None) -> Any:
    """The ``kind`` that the JSON ``text`` holds (a ``fmt`` file's body without its format keys)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise Invalid(["its JSON is nested too deeply"]) from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise Invalid([f"not valid JSON: {exc}"]) from exc
    if fmt is not None:
        problem = fmt.problem(data)
        if problem:
            raise Invalid([problem])
        data = {k: v for k, v in data.items() if k not in ("format", "version")}
    return decode(kind, data)


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (dicts, lists, strings, numbers, booleans, None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata != SKIP and not (f.metadata == OMIT and getattr(value, f.name) == f.default)}
        return value.json_out(body) if hasattr(value, "json_out") else body
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    return value


def decode(kind: Any, data: Any, where: str = "") -> Any:
    """The ``kind`` that ``data`` holds; :class:`Invalid` listing every problem otherwise."""
    problems: list[str] = []
    value = _decode(kind, data, where, problems)
    if problems:
        raise Invalid(problems)
    return value


def _decode(kind: Any, data: Any, where: str, problems: list[str]) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Annotated:
        count = len(problems)
        value = _decode(args[0], data, where, problems)
        for check in args[1:]:
            if len(problems) == count and value is not None and not check.test(value):
                problems.append(_wrong(where, check.expected, data))
        return value
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None) or data is None]
        tried: list[list[str]] = []
        for option in options:
            tried.append([])
            value = _decode(option, data, where, tried[-1])
            if not tried[-1]:
                return value
        problems.extend(tried[0] if len(options) == 1 else [_wrong(where, " or ".join(map(_name, args)), data)])
        return None
    if kind is type(None) or kind is None:
        return None if data is None else _bad(problems, where, "null", data)
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(data)
        except ValueError:
            return _bad(problems, where, f"one of {', '.join(json.dumps(m.value) for m in kind)}", data)
    if origin in (tuple, list) or kind in (tuple, list):
        if not isinstance(data, list):
            return _bad(problems, where, "a list", data)
        fixed = origin is tuple and args and args[-1] is not Ellipsis
        if fixed and len(data) != len(args):
            return _bad(problems, where, f"a list of {len(args)}", data)
        items = [_decode(args[i] if fixed else args[0] if args else Any, item, f"{where}[{i}]", problems)
                 for i, item in enumerate(data)]
        return list(items) if origin is list or kind is list else tuple(items)
    if origin is dict or kind is dict:
        if not isinstance(data, dict):
            return _bad(problems, where, "an object", data)
        key_kind, item_kind = args or (str, Any)
        return {_decode(key_kind, key, _at(where, key), problems): _decode(item_kind, item, _at(where, key), problems)
                for key, item in data.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _record(kind, data, where, problems)
    if kind is float:
        if isinstance(data, str) and data in ("nan", "inf", "-inf"):
            return float(data)
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif kind in (str, int, bool) and type(data) is kind:
        return data
    return _bad(problems, where, _name(kind), data)


def _record(kind: type, data: Any, where: str, problems: list[str]) -> Any:
    if not isinstance(data, dict):
        return _bad(problems, where, "an object", data)
    if hasattr(kind, "json_in"):
        data = kind.json_in(data)
    hints, required = _fields(kind)
    if getattr(kind, "json_closed", False):
        problems += [f"{_at(where, key)}: unknown key (known: {', '.join(hints)})" for key in data if key not in hints]
    missing = [name for name in required if name not in data]
    problems += [f"{_at(where, name)}: missing" for name in missing]
    count = len(problems)
    values = {name: _decode(hint, data[name], _at(where, name), problems) for name, hint in hints.items()
              if name in data}
    return None if missing or len(problems) > count else kind(**values)


@functools.cache
def _fields(kind: type) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A dataclass's fields that JSON holds (name -> type hint), and those it must hold."""
    hints = typing.get_type_hints(kind, include_extras=True)
    fields = [f for f in dataclasses.fields(kind) if f.metadata != SKIP]
    required = tuple(f.name for f in fields
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return {f.name: hints[f.name] for f in fields}, required


def _at(where: str, key: Any) -> str:
    key = str(key)
    if re.fullmatch(NAME, key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


def _bad(problems: list[str], where: str, expected: str, data: Any) -> None:
    problems.append(_wrong(where, expected, data))


def _wrong(where: str, expected: str, data: Any) -> str:
    got = "an object" if isinstance(data, dict) else "a list" if isinstance(data, list) else json.dumps(data)
    got = got if len(got) <= 40 else got[:37] + "..."
    return f"{where or 'the top level'}: expected {expected}, got {got}"


def _name(kind: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null",
             list: "a list", tuple: "a list", dict: "an object"}
    origin = typing.get_origin(kind)
    if origin is typing.Annotated:
        return ", ".join(c.expected for c in typing.get_args(kind)[1:])
    return names.get(origin or kind, "an object")
