"""One `hatch-shrinkray wheel` of a package's PyPI wheel from a stub project, with a given tool venv,
and what shipped per model.

    python build.py TOOL_BIN PROJECT_DIR WHEEL OUT_JSON [-- EXTRA FLAGS...]

PROJECT_DIR holds the pyproject.toml (written by the caller); the rewritten wheel goes to
PROJECT_DIR/out-<name>/ where <name> is OUT_JSON's stem. The JSON: exit code, wall and CPU seconds
(the child's, indicative), every line printed, and per model its original and shipped bytes and
sha256 (a model absent from the output wheel is reported as such)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import zipfile
from pathlib import Path


def models(whl: Path) -> dict[str, tuple[int, str]]:
    with zipfile.ZipFile(whl) as z:
        return {i.filename: (i.file_size, hashlib.sha256(z.read(i)).hexdigest())
                for i in z.infolist() if i.filename.endswith(".onnx")}


def main() -> None:
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    tool, proj, wheel, out_json = Path(args[0]), Path(args[1]), Path(args[2]), Path(args[3])
    out = proj / f"out-{out_json.stem}"
    if out.exists():
        for f in out.iterdir():
            f.unlink()
    env = dict(os.environ)
    env.setdefault("HATCH_SHRINKRAY_CACHE_DIR", str(proj / f".cache-{out_json.stem}"))
    env["PATH"] = f"{tool}:{env['PATH']}"
    cmd = [str(tool / "hatch-shrinkray"), "wheel", str(wheel), "-o", str(out), *extra]
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(["nice", "-n", "5", *cmd], cwd=proj, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    text, _ = p.communicate()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1)
    orig = models(wheel)
    shipped = {}
    outs = list(out.glob("*.whl")) if out.exists() else []
    if outs:
        got = models(outs[0])
        for name, (size, sha) in orig.items():
            if name in got:
                shipped[name] = {"orig": size, "bytes": got[name][0], "sha": got[name][1],
                                 "original": got[name][1] == sha}
            else:
                shipped[name] = {"orig": size, "bytes": None, "sha": None, "original": False}
    res = {"cmd": " ".join(cmd[1:]), "rc": p.returncode, "wall": round(wall, 1), "cpu": cpu,
           "lines": text.splitlines(), "models": shipped, "wheel": str(outs[0]) if outs else None}
    out_json.write_text(json.dumps(res, indent=1, ensure_ascii=False))
    print(f"{out_json.stem}: rc {p.returncode}, {wall:.0f} s")
    for name, m in shipped.items():
        print(f"  {name}: {m['orig']} -> {m['bytes']}{' (original)' if m['original'] else ''}")


if __name__ == "__main__":
    main()
