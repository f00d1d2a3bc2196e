"""Build example_project with the hatch-shrinkray hook and show what ships.

hatch-shrinkray is not on PyPI yet, so the isolated build environment gets it from a throw-away
wheelhouse built from this checkout (the `PIP_FIND_LINKS` / `UV_FIND_LINKS` recipe in
shared/notes/hatch-api.md). Steps: build the plugin wheel; run the frontend (default
`python -m build`: sdist, then the wheel from the sdist); list the archives; compare the
test-set accuracy of the shipped model with the original.

    python example_project/build_example.py                 # python -m build
    python example_project/build_example.py --frontend hatch # hatch build (needs `hatch` installed)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODEL = "src/digits_classifier/models/digits_mlp.onnx"
FRONTENDS = {
    "build": [sys.executable, "-m", "build", "--outdir", "{out}"],
    "hatch": ["hatch", "build", "{out}"],
    "uv": ["uv", "build", "--no-cache", "--out-dir", "{out}"],
    "pip": [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir", "-w", "{out}", "."],
}


def run(cmd: list[str], **kw: object) -> None:
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", choices=sorted(FRONTENDS), default="build")
    parser.add_argument("--out", type=Path, default=HERE / "dist", help="where the archives go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shrinkray-wheelhouse-") as house:
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", house, str(REPO)])
        env = {**os.environ, "PIP_FIND_LINKS": house, "UV_FIND_LINKS": house}
        for var in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN"):
            env.pop(var, None)
        if args.out.exists():
            shutil.rmtree(args.out)
        cmd = [c.replace("{out}", str(args.out)) for c in FRONTENDS[args.frontend]]
        run(cmd, cwd=HERE, env=env)
    print()
    for archive in sorted(args.out.iterdir()):
        print(f"{archive.name}:")
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    print(f"  {info.file_size:>10}  {info.filename}")
                shipped = zf.read(f"digits_classifier/models/{Path(MODEL).name}")
        else:
            with tarfile.open(archive) as tf:
                for member in tf.getmembers():
                    if member.isfile():
                        print(f"  {member.size:>10}  {member.name}")
    with tempfile.TemporaryDirectory() as tmp:
        shipped_path = Path(tmp) / "shipped.onnx"
        shipped_path.write_bytes(shipped)
        print()
        run([sys.executable, str(HERE / "evaluate.py"), str(HERE / MODEL), str(shipped_path)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
