"""Variants compared per model: the original, our methods, the peer (onnx-shrink-ray), ORT quantize_dynamic.

Every shrink runs in its own subprocess; wall time and the child's peak RSS (``ru_maxrss`` from
``os.wait4``) are recorded. The peer runs from its own virtualenv (``benchmarks/.cache/venv-peer``) via
its CLI, so its dependencies never touch the project venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import CACHE_DIR, sha256_file

REPO_DIR = Path(__file__).resolve().parent.parent
PEER_VENV = CACHE_DIR / "venv-peer"
PEER_REQ = ["onnx-shrink-ray==0.0.11", "onnx_graphsurgeon"]
SHRUNK_DIR = CACHE_DIR / "shrunk"


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # "original" | "ours" | "peer" | "ortdyn"
    label: str
    method: str = ""  # ours: ShrinkOptions.method
    peer_args: tuple[str, ...] = ()
    options: str = "{}"  # ours: extra ShrinkOptions fields as JSON; "verify" is None unless given here


VARIANTS: list[Variant] = [
    Variant("original", "original", "original fp32"),
    Variant("ours-int8", "ours", "ours int8 (default)", method="int8"),
    Variant("ours-fp16", "ours", "ours fp16", method="fp16"),
    Variant("ours-float-levels", "ours", "ours float-levels", method="float-levels"),
    Variant("ours-dedup", "ours", "ours dedup", method="dedup"),
    Variant("ours-dynamic", "ours", "ours dynamic", method="dynamic"),
    Variant("ours-int4", "ours", "ours int4", method="int4"),
    Variant("ours-auto", "ours", "ours auto (default budgets, default verification)", method="auto",
            options='{"verify": "default"}'),
    Variant("ours-auto-real", "ours", "ours auto, one real sample as verification input", method="auto",
            options='{"verify": "task-inputs"}'),
    Variant("peer-default", "peer", "shrink-ray integer_weights",
            peer_args=("--action", "integer_weights")),
    Variant("peer-per-channel", "peer", "shrink-ray integer_weights --per-channel",
            peer_args=("--action", "integer_weights", "--per-channel")),
    Variant("peer-float256", "peer", "shrink-ray float_weights 256",
            peer_args=("--action", "float_weights", "--float_levels", "256")),
    Variant("ort-dynamic", "ortdyn", "onnxruntime quantize_dynamic"),
]
BY_NAME = {v.name: v for v in VARIANTS}


@dataclass
class ShrinkRun:
    variant: str
    model: str
    ok: bool
    path: str | None
    seconds: float
    peak_rss_mb: float
    returncode: int
    command: list[str]
    input_sha256: str
    engine_key: str
    error: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def ensure_peer_venv() -> Path:
    py = PEER_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PEER_REQ], check=True)
    return py


ENGINE_REV = os.environ.get("HSR_BENCH_ENGINE", "HEAD")  # a git revision, or "worktree"


def engine_dir(rev: str = ENGINE_REV) -> Path | None:
    """A snapshot of hatch_shrinkray/ at ``rev`` (git archive), so results name one commit and do not
    change while the engine is being edited; None = use the work tree as imported."""
    if rev == "worktree":
        return None
    sha = subprocess.run(["git", "rev-parse", rev], capture_output=True, text=True, cwd=REPO_DIR,
                         check=True).stdout.strip()
    dest = CACHE_DIR / "engine" / sha
    if not (dest / "hatch_shrinkray" / "__init__.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", "--format=tar", sha, "hatch_shrinkray"], capture_output=True,
                                 cwd=REPO_DIR, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def engine_key() -> str:
    """Identity of our engine's sources: cached shrunk models are reused only for the same code."""
    d = engine_dir()
    if d is not None:
        return "git:" + d.name[:12]
    h = hashlib.sha256()
    pkg = REPO_DIR / "hatch_shrinkray"
    for p in sorted(pkg.rglob("*.py")):
        h.update(p.relative_to(pkg).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


PEAK_WRAPPER = Path(__file__).resolve().parent / "peak_rss.py"


def _run_measured(python: str, module_args: list[str]) -> tuple[int, float, float, str]:
    """(returncode, wall seconds, child peak RSS MB, output tail) of ``python -m MODULE ARGS``.

    The module runs under ``peak_rss.py``, which prints the child's own VmHWM; ``ru_maxrss`` from
    ``wait4`` is only a fallback (it includes the parent's RSS at fork time).
    """
    cmd = [python, str(PEAK_WRAPPER), "-m", *module_args]
    t0 = time.perf_counter()
    env = dict(os.environ)
    edir = engine_dir()
    if edir is not None:
        env["HSR_ENGINE_DIR"] = str(edir)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(REPO_DIR), env=env)
    assert proc.stdout is not None
    out = proc.stdout.read()  # child exits after closing stdout
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    dt = time.perf_counter() - t0
    lines = out.decode(errors="replace").strip().splitlines()
    rss_mb = rusage.ru_maxrss / 1024.0
    for line in lines:
        if line.startswith("PEAK_RSS_KB "):
            rss_mb = int(line.split()[1]) / 1024.0
    tail = [ln for ln in lines if not ln.startswith("PEAK_RSS_KB ")][-6:]
    return proc.returncode, dt, rss_mb, "\n".join(tail)


def shrink_variant(variant: Variant, model_key: str, src: Path, force: bool = False) -> ShrinkRun:
    """Produce (or reuse from cache) the shrunk model of ``src`` for ``variant``."""
    sha = sha256_file(src)
    if variant.kind == "original":
        return ShrinkRun(variant.name, model_key, True, str(src), 0.0, 0.0, 0, [], sha, "")
    ekey = engine_key() if variant.kind == "ours" else variant.kind
    out_dir = SHRUNK_DIR / model_key
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{variant.name}.onnx"
    meta = out_dir / f"{variant.name}.json"
    if not force and meta.exists():
        prev = json.loads(meta.read_text())
        if prev["input_sha256"] == sha and prev["engine_key"] == ekey and (not prev["ok"] or out.exists()):
            return ShrinkRun(**prev)
    if out.exists():
        out.unlink()
    if variant.kind == "peer":
        py = ensure_peer_venv()
        tmp_dir = out_dir / f"{variant.name}.peer"
        shutil.rmtree(tmp_dir, ignore_errors=True)
        tmp_dir.mkdir()
        python = str(py)
        margs = ["onnx_shrink_ray.shrink", *variant.peer_args, "--output_dir", str(tmp_dir),
                 "--output_suffix", "_peer.onnx", str(src)]
        produced = tmp_dir / f"{src.stem}_peer.onnx"
    else:
        python = sys.executable
        margs = ["benchmarks.shrink_one", variant.kind, variant.method or "-", str(src), str(out)]
        if variant.options != "{}":
            margs.append(variant.options)
        produced = out
    cmd = [python, "-m", *margs]
    rc, dt, rss, tail = _run_measured(python, margs)
    ok = rc == 0 and produced.exists()
    if ok and produced != out:
        produced.replace(out)
    if variant.kind == "peer":
        shutil.rmtree(out_dir / f"{variant.name}.peer", ignore_errors=True)
    extra: dict[str, object] = {}
    if variant.kind == "ours":
        for line in tail.splitlines():
            if line.startswith("RESULT "):
                extra = json.loads(line[len("RESULT "):])
    run = ShrinkRun(variant.name, model_key, ok, str(out) if ok else None, dt, rss, rc, cmd, sha, ekey,
                    error=None if ok else tail[-600:], extra=extra)
    meta.write_text(json.dumps(asdict(run), indent=1))
    return run
