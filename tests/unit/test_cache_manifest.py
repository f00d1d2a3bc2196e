"""The shrink cache's key and atomic entries, and the sdist manifest's determinism (in this process; the
builds that trust or refuse an entry are in tests/test_cache_manifest.py)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import ShrinkOptions, VerifyOptions
from hatch_shrinkray.result import VerificationRecord
from hatch_shrinkray.shipping.cache import CachedShrink, ShrinkCache, cache_key, default_cache_dir
from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, file_sha256, read_manifest, render

VERSIONS = {"hatch-shrinkray": "0.1.0", "onnx": "1.0", "onnxruntime": "1.0"}


def entry(shrunk_sha256: str = "b" * 64) -> ManifestEntry:
    return ManifestEntry(original_sha256="a" * 64, shrunk_sha256=shrunk_sha256, method="int8",
                         options=ShrinkOptions().describe(), versions=VERSIONS,
                         verification=VerificationRecord(passed=True))


def test_cache_dir_env_override_and_platform_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("HATCH_SHRINKRAY_CACHE_DIR")
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg/hatch-shrinkray"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert default_cache_dir() == tmp_path / "local/hatch-shrinkray"


def test_key_covers_bytes_options_inputs_and_versions_but_not_paths(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(b"inputs")
    (tmp_path / "copy.npz").write_bytes(b"inputs")
    (tmp_path / "other.npz").write_bytes(b"other inputs")

    def key(sha: str = "0" * 64, inputs: str | None = None, versions: dict[str, str] = VERSIONS,
            **options: object) -> str:
        verify = VerifyOptions(inputs=None if inputs is None else tmp_path / inputs)
        return cache_key(sha, ShrinkOptions(verify=verify, **options), versions)  # type: ignore[arg-type]

    base = key()
    assert key() == base
    assert key(sha="1" * 64) != base
    assert key(method="fp16") != base
    assert key(versions={**VERSIONS, "onnxruntime": "2.0"}) != base
    assert key(inputs="a.npz") != base
    assert key(inputs="a.npz") == key(inputs="copy.npz")
    assert key(inputs="a.npz") != key(inputs="other.npz")


def test_put_then_get_round_trips_and_leaves_no_temp_files(tmp_path: Path) -> None:
    model = tmp_path / "shrunk.onnx"
    model.write_bytes(b"shrunk bytes")
    record = CachedShrink(entry(file_sha256(model)), original_size=100, shrunk_size=12, seconds=1.5,
                          summary="cos 1.0")
    cache = ShrinkCache(tmp_path / "cache")
    assert cache.get("k" * 64) is None
    assert cache.put("k" * 64, model, record) is None
    hit = cache.get("k" * 64)
    assert hit is not None
    assert hit[0].read_bytes() == b"shrunk bytes"
    assert hit[1] == record
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k" * 64 + ".json", "k" * 64 + ".onnx"]


def test_damaged_entries_are_misses(tmp_path: Path) -> None:
    model = tmp_path / "shrunk.onnx"
    model.write_bytes(b"shrunk bytes")
    cache = ShrinkCache(tmp_path / "cache")
    cache.put("k", model, CachedShrink(entry(file_sha256(model)), 100, 12, 1.0, None))
    (tmp_path / "cache/k.onnx").write_bytes(b"half-writ")
    assert cache.get("k") is None
    (tmp_path / "cache/k.onnx").write_bytes(b"shrunk bytes")
    (tmp_path / "cache/k.json").write_text("{not json")
    assert cache.get("k") is None


def test_an_unusable_cache_reports_instead_of_raising(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    model = tmp_path / "shrunk.onnx"
    model.write_bytes(b"x")
    problem = ShrinkCache(tmp_path / "file/cache").put("k", model, CachedShrink(entry(), 1, 1, 0.0, None))
    assert problem is not None and "Error" in problem


def test_manifest_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    a, b = entry("1" * 64), entry("2" * 64)
    text = render({"src/b.onnx": b, "src/a.onnx": a})
    assert text == render({"src/a.onnx": a, "src/b.onnx": b})
    assert text.endswith("\n") and list(json.loads(text)) == ["src/a.onnx", "src/b.onnx"]
    (tmp_path / MANIFEST_NAME).write_text(text)
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: p\nVersion: 1\n")  # an unpacked sdist
    assert read_manifest(tmp_path) == {"src/a.onnx": a, "src/b.onnx": b}


def test_missing_manifest_is_empty_and_a_broken_one_is_an_error(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) == {}
    (tmp_path / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: p\nVersion: 1\n")  # an unpacked sdist
    (tmp_path / MANIFEST_NAME).write_text('{"src/a.onnx": {"method": "int8"}}')
    with pytest.raises(ShrinkrayError) as caught:
        read_manifest(tmp_path)
    path = tmp_path / MANIFEST_NAME
    assert str(caught.value).splitlines() == [  # every problem, one line each, naming the file and the field
        f'{path}: ["src/a.onnx"].original_sha256: missing',
        f'{path}: ["src/a.onnx"].shrunk_sha256: missing (hatch-shrinkray writes it; delete it to shrink from scratch)']


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path: Path) -> None:
    """Parallel builds race to store the same entry; a reader sees nothing or all of it."""
    model = tmp_path / "shrunk.onnx"
    model.write_bytes(bytes(range(256)) * 4096)
    record = CachedShrink(entry(file_sha256(model)), 2_000_000, 1_048_576, 1.0, "cos 1.0")
    cache = ShrinkCache(tmp_path / "cache")
    seen: list[object] = []

    def write() -> None:
        for _ in range(10):
            assert cache.put("k", model, record) is None

    def read() -> None:
        for _ in range(200):
            hit = cache.get("k")
            seen.append(None if hit is None else hit[1])

    threads = [threading.Thread(target=write) for _ in range(4)] + [threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 200 and all(s is None or s == record for s in seen)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k.json", "k.onnx"]
