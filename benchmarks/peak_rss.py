"""Run a module as ``__main__`` and report this process's own peak RSS (VmHWM) on exit.

    python benchmarks/peak_rss.py -m MODULE ARGS...

Why not ``ru_maxrss`` from ``wait4``: on Linux a child's ``ru_maxrss`` includes the parent's RSS at
fork time (the high-water mark survives ``exec``), so a 900 MB harness would report >= 900 MB for every
shrink. ``VmHWM`` in ``/proc/self/status`` belongs to the post-exec address space only.
Standard library only: it also runs under the peer tool's virtualenv.
"""

from __future__ import annotations

import atexit
import runpy
import sys


def _report() -> None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    print(f"PEAK_RSS_KB {int(line.split()[1])}", file=sys.stderr, flush=True)
    except OSError:
        pass


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        raise SystemExit(__doc__)
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    atexit.register(_report)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
