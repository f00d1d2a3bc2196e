"""``codec``: every persisted file's JSON from its dataclass and back. Bad input is every problem at
once, one line each naming the file and the field; a file's format and version are checked before
its body; what a later version adds is skipped, except where a key it does not know is a choice it
cannot make (a remedy)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import pytest
from hardening import MODEL, hook_build_error, write_project

from hatch_shrinkray.codec import AT_LEAST_0, OMIT, SKIP, Format, Invalid, decode, encode, loads, one_of
from hatch_shrinkray.errors import Malformed
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, load_manifest
from hatch_shrinkray.shipping.plan import read_plan

from onnx_builders import mlp, save

PERSISTED = Path(__file__).parent / "persisted"


class Colour(Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    size: Annotated[int, AT_LEAST_0]
    colour: Colour = Colour.RED


@dataclass(frozen=True)
class Outer:
    name: str
    inner: tuple[Inner, ...] = ()
    by_name: dict[str, float] = field(default_factory=dict)
    pair: tuple[str, int] | None = None
    kind: Annotated[str, one_of(("a", "b"))] | None = field(default=None, metadata=OMIT)
    scratch: tuple[bool, ...] = field(default=(), metadata=SKIP)
    anything: Any = None


def test_a_round_trip_keeps_every_type() -> None:
    value = Outer("x", (Inner(3), Inner(0)), {"a": 1.5, "b": float("nan")}, ("p", 2), "a", (True,), {"k": [1]})
    data = encode(value)
    assert data == {"name": "x", "inner": [{"size": 3, "colour": "red"}, {"size": 0, "colour": "red"}],
                    "by_name": {"a": 1.5, "b": "nan"}, "pair": ["p", 2], "kind": "a", "anything": {"k": [1]}}
    back = decode(Outer, json.loads(json.dumps(data)))
    assert back.inner == value.inner and back.pair == value.pair and back.scratch == ()
    assert back.by_name["a"] == 1.5 and back.by_name["b"] != back.by_name["b"]  # nan
    assert "kind" not in encode(Outer("x"))  # OMIT: left out while it has its default


def test_every_problem_is_reported_at_once_with_its_place() -> None:
    data = {"inner": [{"size": -1}, {"size": "3", "colour": "blue"}, 7], "by_name": {"a b": True},
            "pair": ["p"], "kind": "c", "future": 1}
    with pytest.raises(Invalid) as caught:
        decode(Outer, data)
    assert list(caught.value.problems) == [
        "name: missing",
        "inner[0].size: expected a number >= 0, got -1",
        'inner[1].size: expected an integer, got "3"',
        'inner[1].colour: expected one of "red", got "blue"',
        "inner[2]: expected an object, got 7",
        'by_name["a b"]: expected a number, got true',
        'pair: expected a list of 2, got a list',
        'kind: expected one of a, b, got "c"',
    ]  # and the key a later version added (`future`) is skipped


def test_a_file_s_format_and_version_come_before_its_body() -> None:
    fmt = Format("thing", 2, reads=(1, 2))

    def problems(text: str) -> tuple[str, ...]:
        with pytest.raises(Invalid) as caught:
            loads(Outer, text, fmt)
        return caught.value.problems

    assert loads(Outer, json.dumps({"format": "thing", "version": 1, "name": "x"}), fmt) == Outer("x")
    assert problems('{"format": "other", "version": 2}') == ("not a thing file (format is not 'thing')",)
    assert problems('{"format": "thing", "version": 3}') == ("version 3; this hatch-shrinkray reads versions 1, 2",)
    assert problems('{"format": "thing", "version": true}') == ("version true; this hatch-shrinkray reads versions "
                                                                "1, 2",)
    assert problems('{"format": "thing", "version": 1}') == ("name: missing",)
    assert problems("{") == ("not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
                             "(char 1)",)
    assert problems("[" * 100_000 + "]" * 100_000) == ("its JSON is nested too deeply",)


def test_a_bad_manifest_names_the_file_and_every_field(tmp_path: Path) -> None:
    data = json.loads((PERSISTED / "manifest-recorded.json").read_text())
    entry = data["src/toymodel/models/a.onnx"]
    entry.update(original_sha256=3, original_size=-1)
    entry["verification"]["fit"] = "maybe"
    entry["verification"]["outputs"][0]["cosine"] = "high"
    path = tmp_path / MANIFEST_NAME
    path.write_text(json.dumps(data))
    with pytest.raises(Malformed) as caught:
        load_manifest(path)
    where = f'{path}: ["src/toymodel/models/a.onnx"]'
    assert str(caught.value).splitlines() == [
        f"{where}.original_sha256: expected a string, got 3",
        f"{where}.verification.outputs[0].cosine: expected a number, got \"high\"",
        f'{where}.verification.fit: expected one of "kept", "not kept", "not fitted", got "maybe"',
        f"{where}.original_size: expected a number >= 0, got -1 (hatch-shrinkray writes it; delete it to shrink "
        "from scratch)"]


def test_a_remedy_this_version_cannot_apply_is_refused(tmp_path: Path) -> None:
    data = json.loads((PERSISTED / "plan-v2.json").read_text())
    data["models"]["b" * 64]["remedy"] = {"method": "int3", "levels": 3}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(Malformed) as caught:
        read_plan(path)
    assert [line.split(": ", 1)[1] for line in str(caught.value).splitlines()] == [
        f"models.{'b' * 64}.remedy.levels: unknown key (known: method, rounding, original, target)",
        f"models.{'b' * 64}.remedy.method: expected one of int8, float-levels, fp16, dedup, dynamic, int4, auto, "
        'got "int3" (hatch-shrinkray check --fix (or --search) writes it; fix the entry, or delete the file and run '
        "check --fix again)"]


def test_a_build_lists_every_problem_of_its_plan(tmp_path: Path) -> None:
    """The user sees each problem on its own line under the configuration's heading, not the first only."""
    root = write_project(tmp_path / "p", 'plan = "plan.json"\n')
    save(mlp(), root / MODEL)
    data = json.loads((PERSISTED / "plan-v2.json").read_text())
    data["models"]["a" * 64]["tensors"][0]["encoding"] = "int3"
    data["models"]["a" * 64]["checked"] = []
    (root / "plan.json").write_text(json.dumps(data))
    err = hook_build_error(root, tmp_path)
    lines = [line for line in err.splitlines() if "plan.json: models." in line]
    assert [line.split(f"models.{'a' * 64}.")[1] for line in lines] == [
        'tensors[0][2]: expected one of float32, fp16, int16, int12, int10, int8, int6, int4, got "int3"',
        "checked: expected an object, got a list (hatch-shrinkray check --fix (or --search) writes it; fix the "
        "entry, or delete the file and run check --fix again)"], err
    assert all(line.lstrip().startswith("- Field `tool.hatch.build.hooks.shrinkray.plan`: ") for line in lines), err


def test_the_codec_imports_alone_and_only_the_standard_library() -> None:
    code = ("import sys, hatch_shrinkray.codec; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hatch_shrinkray', 'numpy', 'onnx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hatch_shrinkray', 'hatch_shrinkray.codec']"
