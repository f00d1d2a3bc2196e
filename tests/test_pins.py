"""The pins of a model's digest in a package's text files, and their rewrite (pure functions over bytes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hatch_shrinkray.shipping.pins import Member, find_pins, rewrite_pins


def member(name: str, data: bytes) -> Member:
    return name, len(data), lambda: data


def test_every_pin_of_a_file_is_rewritten_in_its_case_and_nothing_else(tmp_path: Path) -> None:
    """Two models pinned in one file (one twice, once in upper case; one by md5) give one copy that
    names the shrunk ones, one line for the file, and no other byte changed; a pin of a file the
    archive no longer holds cannot be rewritten and stays."""
    files = {name: tmp_path / name for name in ("a.onnx", "a2.onnx", "b.onnx", "b2.onnx", "a.data")}
    for i, path in enumerate(files.values()):
        path.write_bytes(bytes([i]) * 100)
    a, a2 = (hashlib.sha256(files[n].read_bytes()).hexdigest() for n in ("a.onnx", "a2.onnx"))
    b, b2 = (hashlib.md5(files[n].read_bytes()).hexdigest() for n in ("b.onnx", "b2.onnx"))
    data = hashlib.sha1(files["a.data"].read_bytes()).hexdigest()
    text = f"a: {a}\nA: {a.upper()}  # again\nb = '{b}'\ndata: {data}\n".encode()
    members = [member("pkg/pins.yaml", text), member("pkg/none.json", b'{"x": 1}')]
    models = {"pkg/a.onnx": (files["a.onnx"], files["a2.onnx"]), "pkg/b.onnx": (files["b.onnx"], files["b2.onnx"]),
              "pkg/a.data": (files["a.data"], None)}
    pins = find_pins(members, models)
    assert sorted((p.file, p.model, p.algorithm) for p in pins) == [
        ("pkg/pins.yaml", "pkg/a.data", "sha1"), ("pkg/pins.yaml", "pkg/a.onnx", "sha256"),
        ("pkg/pins.yaml", "pkg/b.onnx", "md5")]
    (done,) = rewrite_pins(members, pins, tmp_path / "out")
    assert done.path == tmp_path / "out/pkg/pins.yaml"
    assert done.path.read_bytes() == f"a: {a2}\nA: {a2.upper()}  # again\nb = '{b2}'\ndata: {data}\n".encode()
    assert done.text() == ("pkg/pins.yaml: the pin of pkg/a.onnx now names the shrunk model's sha256; the pin of "
                           "pkg/b.onnx now names the shrunk model's md5 (pins = \"rewrite\")")
    assert not (tmp_path / "out/pkg/none.json").exists()
