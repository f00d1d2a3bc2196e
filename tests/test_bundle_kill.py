"""A bundle run killed at any point (SIGKILL: nothing of ours runs after it) leaves every file of
the tree either original or complete, and the next run finishes the job.

The command is killed at a sweep of moments through its run and at the moment its journal appears;
the moments between two renames, which a sweep rarely hits, are taken one by one in process
(``bundles.commit``: a stop after each rename, then what the next run does first).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hardening import CONSOLE_SCRIPT
from test_bundle import MODEL, SITE, digests, make_venv, pip, put, record_mismatches

from hatch_shrinkray.bundles import commit
from hatch_shrinkray.bundles.commit import JOURNAL, Change, apply, recover

LEFTOVER = (".shrinkray-new", ".shrinkray-old", JOURNAL)


def _state_is_sound(tree: Path, before: dict[str, str], after: dict[str, str]) -> None:
    """Each file is its original or its final bytes; only our own leftovers may be extra."""
    for rel, digest in digests(tree).items():
        if rel.endswith(LEFTOVER):
            continue
        assert digest in (before.get(rel), after.get(rel)), f"{rel} is neither original nor complete"


def _kill_when(tree: Path, env: dict[str, str], *, after: float | None = None, seen: str | None = None) -> None:
    """Start `bundle --in-place` on ``tree`` and SIGKILL it ``after`` seconds, or as soon as a file
    named ``seen`` exists at the tree's root (or the run ends)."""
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "bundle", str(tree), "--in-place", "--pins", "rewrite"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if after is not None:
            time.sleep(after)
        else:
            assert seen is not None
            while proc.poll() is None and not (tree / seen).exists():
                pass
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_killed_anywhere_original_or_complete_and_a_second_run_finishes(tmp_path: Path, env: dict[str, str]) -> None:
    template = make_venv(tmp_path / "t", shared=True)
    before = digests(template)
    reference = tmp_path / "reference"
    shutil.copytree(template, reference, symlinks=True)
    start = time.perf_counter()
    subprocess.run([str(CONSOLE_SCRIPT), "bundle", str(reference), "--in-place", "--pins", "rewrite"], env=env,
                   check=True, capture_output=True)
    took = time.perf_counter() - start
    after = digests(reference)
    assert after[MODEL] != before[MODEL]
    cold = {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cold")}
    kills: list[tuple[dict[str, str], float | None, str | None]] = [
        (cold, took * k / 4, None) for k in (1, 3)]  # a cold cache: the shrink itself is interrupted
    kills += [(env, None, JOURNAL)]  # a warm one: the replacements are
    for n, (environment, delay, seen) in enumerate(kills):
        tree = tmp_path / f"kill{n}"
        shutil.copytree(template, tree, symlinks=True)
        _kill_when(tree, environment, after=delay, seen=seen)
        _state_is_sound(tree, before, after)
        again = subprocess.run([str(CONSOLE_SCRIPT), "bundle", str(tree), "--in-place", "--pins", "rewrite"],
                               env=env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stderr
        assert digests(tree) == after, n
        assert record_mismatches(tree / SITE) == []
    pip(tree, "check")


def _stopping_after(n: int, real: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """``os.replace`` that stops the run (as SIGKILL would: nothing after it runs) at its call ``n``."""
    calls: list[object] = []

    def stopping(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) > n:
            raise KeyboardInterrupt("stopped")
        real(src, dst)

    return stopping


@pytest.mark.parametrize("keep", [False, True])
def test_a_stop_between_any_two_renames_is_finished_or_undone(tmp_path: Path, keep: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without kept originals the next run finishes the renames; with them (a check was judging the
    tree) it puts every original back. Either way no file is ever half-written."""
    work = tmp_path / "work"
    sources = {f"m{i}.onnx": put(work / f"new{i}.onnx") for i in range(3)}
    for n in range(len(sources) + 1):  # os.replace: the journal first, then each model
        tree = tmp_path / f"tree{n}"
        for i in range(3):
            (tree / "models").mkdir(parents=True, exist_ok=True)
            (tree / "models" / f"m{i}.onnx").write_bytes(b"original %d" % i)
        (tree / "models/gone.bin").write_bytes(b"leaves")
        before = digests(tree)
        changes = [Change(f"models/{rel}", path) for rel, path in sources.items()]
        changes.append(Change("models/gone.bin", None))
        real = os.replace
        monkeypatch.setattr(commit.os, "replace", _stopping_after(n, real))
        with contextlib.suppress(KeyboardInterrupt):
            apply(tree, changes, keep=keep)
        monkeypatch.setattr(commit.os, "replace", real)
        final = {**before, **{f"models/{r}": digests(work)[p.name] for r, p in sources.items()}}
        final.pop("models/gone.bin")
        _state_is_sound(tree, before, final)
        recover(tree)
        assert digests(tree) == (before if keep or n == 0 else final), n  # n == 0: stopped before the journal
        assert not (tree / JOURNAL).exists()
