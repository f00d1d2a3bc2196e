"""Running a command under recording, and turning what its processes wrote into one file per model.

Every Python process of the command finds a ``sitecustomize`` on ``PYTHONPATH`` (in a temporary
directory, beside a link to this package so that other interpreters can import it too) that
instruments onnxruntime; each process leaves its samples in ``DIR/.parts`` at exit; ``finish``
merges the parts per model (ordered by content, so the same run gives the same files), bounds them
again and writes ``DIR/<model>-<sha256>.npz``, replacing an older recording of the same model.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hatch_shrinkray.capture import env
from hatch_shrinkray.capture.env import MAX_BYTES, MAX_SAMPLES
from hatch_shrinkray.capture.session import PARTS
from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.result import human, render_table
from hatch_shrinkray.signals import deferred
from hatch_shrinkray.verification.recordings import Recording, merge, read_recording, write_recording

SITECUSTOMIZE = '''\
"""Written by hatch-shrinkray record: instrument onnxruntime in this process, then run the
sitecustomize this file shadows, if any."""
import os, sys


def _hatch_shrinkray_start():
    try:
        from hatch_shrinkray.capture import boot
    except Exception as exc:  # never break the recorded program
        sys.stderr.write(f"hatch-shrinkray: not recording in {sys.executable}: {exc}\\n")
        return
    boot.install()


def _hatch_shrinkray_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        sys.modules["sitecustomize"] = me
    finally:
        sys.path[:] = saved


_hatch_shrinkray_start()
_hatch_shrinkray_chain()
'''


@dataclass(frozen=True)
class Recorded:
    """One model's recording as written: for the summary table."""

    path: Path
    recording: Recording


@contextmanager
def recording_environment(output: Path, max_samples: int = MAX_SAMPLES,
                          max_bytes: int = MAX_BYTES) -> Iterator[dict[str, str]]:
    """Environment variables that make Python processes record into ``output``; the temporary
    ``sitecustomize`` directory is removed afterwards."""
    parts = output / PARTS
    shutil.rmtree(parts, ignore_errors=True)  # left by an interrupted run
    try:
        parts.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShrinkrayError(f"cannot create the recording directory: {exc.strerror}", path=str(output),
                             hint="choose a writable --output directory") from exc
    with instrumented_path() as path:
        yield {env.RECORD: str(parts.resolve()), env.RECORD_SAMPLES: str(max_samples),
               env.RECORD_BYTES: str(max_bytes), "PYTHONPATH": path}


@contextmanager
def instrumented_path() -> Iterator[str]:
    """A ``PYTHONPATH`` value whose first entry is a temporary directory with the ``sitecustomize``
    that instruments onnxruntime (what it does is up to the environment, ``capture.env``); the
    directory is removed afterwards."""
    site: Path | None = None
    try:
        with deferred():  # a signal right after mkdtemp is delivered inside the try, which cleans up
            site = Path(tempfile.mkdtemp(prefix="hatch-shrinkray-record-"))
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        package = Path(__file__).resolve().parents[1]
        # No symlinks (Windows without the privilege): interpreters of this environment still work.
        with contextlib.suppress(OSError):
            (site / package.name).symlink_to(package, target_is_directory=True)
        yield os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    finally:
        if site is not None:
            shutil.rmtree(site, ignore_errors=True)


def record(command: Sequence[str], output: Path, max_samples: int = MAX_SAMPLES,
           max_bytes: int = MAX_BYTES) -> tuple[int, list[Recorded]]:
    """Run ``command`` with recording on; its exit code and what was recorded."""
    if not command:
        raise ShrinkrayError("no command to record", hint="hatch-shrinkray record --output DIR -- COMMAND [ARGS...]")
    with recording_environment(output, max_samples, max_bytes) as env:
        try:
            proc = subprocess.run(list(command), env={**os.environ, **env}, check=False)
        except BaseException as exc:  # Ctrl-C included: leave no parts behind
            shutil.rmtree(output / PARTS, ignore_errors=True)
            if isinstance(exc, OSError):
                raise ShrinkrayError(f"cannot run {command[0]}: {exc.strerror or exc}",
                                     hint="check the command after --") from exc
            raise
    return proc.returncode, finish(output, max_samples, max_bytes)


def finish(output: Path, max_samples: int = MAX_SAMPLES, max_bytes: int = MAX_BYTES) -> list[Recorded]:
    """Merge the parts left in ``output/.parts`` into one recording per model; removes the parts."""
    parts_dir = output / PARTS
    try:
        by_model: dict[str, list[Recording]] = defaultdict(list)
        for part in sorted(parts_dir.glob("*.npz")) if parts_dir.is_dir() else []:
            rec = read_recording(part)
            by_model[rec.model_sha256].append(rec)
        written = []
        for sha in sorted(by_model):
            merged = merge(by_model[sha], max_samples, max_bytes)
            for old in output.glob(f"*-{sha[:16]}.npz"):
                old.unlink()
            written.append(Recorded(write_recording(output, merged), merged))
        return sorted(written, key=lambda r: r.path.name)
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)


def summary(written: Sequence[Recorded], output: Path) -> str:
    """What was recorded, a line per model, for people."""
    if not written:
        return (f"nothing recorded into {output}: no onnxruntime InferenceSession ran a model from a file or bytes "
                "in a Python process of the command")
    rows = [["model", "recording", "samples", "calls", "bytes", "shapes"]]
    total = 0
    for item in written:
        rec = item.recording
        total += item.path.stat().st_size
        shapes = sorted({", ".join("x".join(map(str, s[n].shape)) or "scalar" for n in rec.inputs)
                         for s in rec.samples})
        shown = "; ".join(shapes[:3]) + (f"; ... ({len(shapes)} shapes)" if len(shapes) > 3 else "")
        rows.append([rec.model, item.path.name, str(len(rec.samples)), str(rec.calls), human(rec.nbytes), shown])
    return f"{render_table(rows)}\nrecorded {len(written)} model(s) into {output} ({human(total)} on disk)"
