"""Speech clips in noise for the streaming VADs (akiki): espeak-ng reads sentences from the docstrings
of standard-library modules at a random speed and pitch, with 0.2-1.2 s of silence around each, white or
brown noise at 5-30 dB SNR, int16 16 kHz WAVs.

    python gen_audio.py calib OUT_DIR     # 40 clips: texts of os/shutil, voices en, en-us, de, fr (seed 11)
    python gen_audio.py heldout OUT_DIR   # 100 clips: texts of json/collections/subprocess/random, voices
                                          # en-gb-x-rp, en-us, es, it, en (seed 22)

The two sets share no sentence and no seed (the round-1 generator did not stay on disk; this one is
written from PANEL.md's description of it)."""

from __future__ import annotations

import importlib
import io
import random
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np

SETS = {
    "calib": {"n": 40, "seed": 11, "modules": ["os", "shutil"], "voices": ["en", "en-us", "de", "fr"]},
    "heldout": {"n": 100, "seed": 22, "modules": ["json", "collections", "subprocess", "random"],
                "voices": ["en-gb-x-rp", "en-us", "es", "it", "en"]},
}
SR = 16000


def sentences(modules: list[str]) -> list[str]:
    out = []
    for name in modules:
        mod = importlib.import_module(name)
        for obj in [mod, *(getattr(mod, a) for a in dir(mod) if not a.startswith("_"))]:
            doc = getattr(obj, "__doc__", None) or ""
            for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                if 20 <= len(s) <= 140 and re.fullmatch(r"[A-Za-z ,.;:'()-]+", s):
                    out.append(s)
    return sorted(set(out))


def say(text: str, voice: str, rng: random.Random) -> np.ndarray:
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(rng.randint(120, 200)), "-p", str(rng.randint(30, 70)),
                          "--stdout", text], capture_output=True, check=True).stdout
    with wave.open(io.BytesIO(wav)) as w:
        rate = w.getframerate()
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float64) / 32768
    n = int(len(a) * SR / rate)
    return np.interp(np.linspace(0, len(a) - 1, n), np.arange(len(a)), a)


def main() -> None:
    which, out = sys.argv[1], Path(sys.argv[2])
    spec = SETS[which]
    rng = random.Random(spec["seed"])
    nrng = np.random.default_rng(spec["seed"])
    texts = sentences(spec["modules"])
    out.mkdir(parents=True, exist_ok=True)
    for i in range(spec["n"]):
        parts = [np.zeros(int(rng.uniform(0.2, 1.2) * SR))]
        for _ in range(rng.randint(1, 2)):
            parts += [say(rng.choice(texts), rng.choice(spec["voices"]), rng), np.zeros(int(rng.uniform(0.2, 1.2) * SR))]
        a = np.concatenate(parts) * rng.uniform(0.3, 0.9)
        noise = nrng.standard_normal(a.size)
        if i % 2:  # brown noise, its slow drift removed
            noise = np.cumsum(noise)
            noise -= np.convolve(noise, np.ones(801) / 801, mode="same")
        speech = a[np.abs(a) > 1e-3]
        power = float(np.mean(speech**2)) if speech.size else 1e-4
        noise *= np.sqrt(power / (np.mean(noise**2) * 10 ** (rng.uniform(5, 30) / 10)))
        pcm = np.clip(np.round((a + noise) * 32767), -32768, 32767).astype(np.int16)
        with wave.open(str(out / f"clip{i:03d}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SR)
            w.writeframes(pcm.tobytes())
    print(f"{which}: {spec['n']} clips into {out} from {len(texts)} sentences")


if __name__ == "__main__":
    main()
