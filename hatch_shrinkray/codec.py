"""Frozen dataclasses to JSON and back: the one codec of every file we write and read again (the
manifest, the plan, cache records and the verification records in them). Standard library only:
the hook's build environment reads the manifest before anything heavy is installed.

A field's type hint says what its JSON is: ``str``, ``int``, ``float`` (``"nan"``, ``"inf"``,
``"-inf"`` where JSON has no number), ``bool``, ``None``, unions, ``tuple`` (a list), ``dict[str, X]``,
a dataclass (an object of its fields), an ``Enum`` (its value), ``Any``, ``Annotated[X, Check(...)]``.
Reading finds every problem before it fails, one line each naming its place (``models.3f2a.remedy.method:
expected one of int8, fp16, got "int3"``); keys a reader does not know are skipped (a later version's
file still reads) unless the class is ``json_closed``. A class may reshape its JSON with
``json_out(self, body)`` and ``json_in(cls, body)``; a field with ``metadata=SKIP`` is never written,
one with ``OMIT`` not while it has its default.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

SKIP = {"json": "skip"}
OMIT = {"json": "omit default"}
NAME = r"[A-Za-z0-9_-]+"


class Check(NamedTuple):
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


def loads(kind: Any, text: bytes | str, fmt: Format | None = None) -> Any:
    """The ``kind`` that the JSON ``text`` holds (the body of a ``fmt`` file in a version it reads)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise Invalid(["its JSON is nested too deeply"]) from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise Invalid([f"not valid JSON: {exc}"]) from exc
    return decode(kind, data if fmt is None else opened(data, fmt))


def opened(data: Any, fmt: Format) -> Any:
    """The body of ``data``, a ``fmt`` file in a version this reads (its envelope's keys removed)."""
    version = data.get("version") if isinstance(data, dict) and data.get("format") == fmt.name else False
    if version is False:
        raise Invalid([f"not a {fmt.name} file (format is not {fmt.name!r})"])
    if version not in fmt.reads or isinstance(version, bool):
        raise Invalid([f"version {json.dumps(version)}; this hatch-shrinkray reads versions "
                       f"{', '.join(map(str, fmt.reads))}"])
    return {k: v for k, v in data.items() if k not in ("format", "version")}


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
    return {key: encode(item) for key, item in value.items()} if isinstance(value, dict) else value


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
                _bad(problems, where, check.expected, data)
        return value
    if origin in (typing.Union, types.UnionType):
        tried: list[list[str]] = []
        for option in [a for a in args if a is not type(None) or data is None]:
            tried.append([])
            value = _decode(option, data, where, tried[-1])
            if not tried[-1]:
                return value
        if len(tried) == 1:
            problems.extend(tried[0])
        else:
            _bad(problems, where, " or ".join(map(_name, args)), data)
    elif kind is Any or (kind is type(None) and data is None):
        return data
    elif isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(data)
        except ValueError:
            _bad(problems, where, f"one of {', '.join(json.dumps(m.value) for m in kind)}", data)
    elif origin is tuple and isinstance(data, list):
        fixed = args[-1] is not Ellipsis
        if not fixed or len(data) == len(args):
            return tuple(_decode(args[i if fixed else 0], x, f"{where}[{i}]", problems) for i, x in enumerate(data))
        _bad(problems, where, f"a list of {len(args)}", data)
    elif origin is dict and isinstance(data, dict):
        return {_decode(args[0], key, _at(where, key), problems): _decode(args[1], item, _at(where, key), problems)
                for key, item in data.items()}
    elif dataclasses.is_dataclass(kind) and isinstance(data, dict):
        return _record(kind, data, where, problems)
    elif kind is float and (data in ("nan", "inf", "-inf") or type(data) in (int, float)):
        return float(data)
    elif kind in (str, int, bool) and type(data) is kind:
        return data
    else:
        _bad(problems, where, _name(kind), data)
    return None


def _record(kind: Any, data: dict[str, Any], where: str, problems: list[str]) -> Any:
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
    """``where.key``, or ``where["a key"]`` for a key that is not a plain name."""
    return (where + (f".{key}" if re.fullmatch(NAME, str(key)) else f"[{json.dumps(str(key))}]")).removeprefix(".")


def _bad(problems: list[str], where: str, expected: str, data: Any) -> None:
    got = "an object" if isinstance(data, dict) else "a list" if isinstance(data, list) else json.dumps(data)
    got = got if len(got) <= 40 else got[:37] + "..."
    problems.append(f"{where or 'the top level'}: expected {expected}, got {got}")


NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null",
         tuple: "a list", dict: "an object"}


def _name(kind: Any) -> str:
    if typing.get_origin(kind) is typing.Annotated:
        return ", ".join(c.expected for c in typing.get_args(kind)[1:])
    return NAMES.get(typing.get_origin(kind) or kind, "an object")
