"""Whether onnxruntime loads a model file, asked in a process of its own.

Bytes the build did not just write (a cache entry, a manifest match) may crash onnxruntime, which
must not take the build down without a word; a child process that dies says so in its exit code.
"""

from __future__ import annotations

from pathlib import Path

LOAD_CHECK = """
import sys
try:
    import onnxruntime as ort
except Exception as exc:
    print("cannot import onnxruntime: " + " ".join(str(exc).split())[:300])
    sys.exit(4)
options = ort.SessionOptions()
options.log_severity_level = 4
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
try:
    ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
except Exception as exc:
    print(" ".join(str(exc).split())[:300])
    sys.exit(3)
"""
"""Creates an onnxruntime session from a file. Optimizations are off: the graph is resolved,
typed and given kernels, which is what loading proves, without folding every weight (seconds and
gigabytes on a big model)."""
LOAD_TIMEOUT = 900


def onnxruntime_installed() -> bool:
    """Whether onnxruntime can be loaded here (not in an isolated build from our sdist, which
    installs nothing heavy)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def load_problem(path: Path) -> str | None:
    """Why onnxruntime cannot create a session from ``path``, or ``None`` when it can (or when
    onnxruntime is not installed: see :func:`onnxruntime_installed`)."""
    import subprocess
    import sys

    if not onnxruntime_installed():
        return None
    try:
        proc = subprocess.run([sys.executable, "-c", LOAD_CHECK, str(path)], capture_output=True, text=True,
                              check=False, timeout=LOAD_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"onnxruntime did not load it within {LOAD_TIMEOUT} s"
    except OSError as exc:
        return f"cannot start {sys.executable} to load it: {exc.strerror or exc}"
    said = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode in {0, 4}:  # 4: onnxruntime does not import; nothing to judge with
        return None
    if proc.returncode == 3:
        return f"onnxruntime cannot load it: {said}"
    return f"onnxruntime crashed loading it (exit code {proc.returncode})"
