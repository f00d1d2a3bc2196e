"""Speech workloads for silero-vad 6.2.3, run through the package's own API in its own venv
(``benchmarks/packages.py`` drives it). Standard library + numpy + the installed ``silero_vad`` (with
torch); espeak-ng (Debian package) speaks the sentences.

    python packages_silero.py calibrate CACHE_DIR          # the user's calibration script (10 clips)
    python packages_silero.py heldout CACHE_DIR OUT.json   # 24 held-out clips -> timestamps per model

Four paths of the package, each a model it ships: ``load_silero_vad(onnx=True)`` at 16 kHz and at
8 kHz (``silero_vad.onnx``, one ``run()`` per chunk, state fed back), ``load_silero_vad(onnx=True,
opset_version=15)`` (``silero_vad_16k_op15.onnx``) and ``load_silero_vad(sequence=True)``
(``silero_vad_16k_sequence.onnx``, one call per clip). The calibration clips use other sentences,
other seeds and other noise draws than the held-out clips: nothing of the held-out audio is recorded.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

SR = 16000
CLIP_S = 8
HELDOUT_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "It is a beautiful morning, and the train leaves at half past seven.",
    "Six spoons of fresh snow peas and five thick slabs of blue cheese.",
    "The meeting has been moved to Thursday afternoon in the large conference room.",
    "Turn left at the second traffic light, then keep going until you see the river.",
    "Could you send me the report before the end of the week?",
    "She sells sea shells by the sea shore.",
]
CALIB_SENTENCES = [
    "A small boat drifted slowly past the old lighthouse.",
    "Remember to water the plants on the balcony twice a week.",
    "The library closes early on Sundays during the summer.",
    "He painted the fence green and then changed his mind.",
    "Seven geese crossed the road in front of the yellow truck.",
    "Bring a warm jacket, the evenings get cold in the hills.",
]
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-gb+m3", "en-us+f2"]
SNRS_DB = (20.0, 10.0, 5.0, 0.0)
HELDOUT = {"n": 24, "seed": 4321, "sentences": HELDOUT_SENTENCES}
CALIB = {"n": 10, "seed": 99, "sentences": CALIB_SENTENCES}
PATHS = {
    "stock16k": "silero_vad.onnx",
    "stock8k": "silero_vad.onnx",
    "op15": "silero_vad_16k_op15.onnx",
    "sequence": "silero_vad_16k_sequence.onnx",
}
"""Each path of the package's API and the ONNX model it runs."""


def _speech(text: str, voice: str, speed: int, pitch: int, out: Path) -> np.ndarray:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("espeak-ng is not installed (apt-get install -y espeak-ng)")
    subprocess.run([exe, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(out), text],
                   check=True, capture_output=True)
    with wave.open(str(out)) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    t = np.arange(int(len(x) * SR / rate)) * rate / SR
    return np.interp(t, np.arange(len(x)), x).astype(np.float32)


def clips(n: int, seed: int, sentences: list[str], cache: Path) -> list[np.ndarray]:
    """``n`` clips of 8 s: 1-2 sentences at seeded offsets, white or brown noise at 20/10/5/0 dB SNR
    (cycling), quantized to 16-bit PCM like a recorded file. Cached as .npy."""
    key = hashlib.sha256(json.dumps([n, seed, sentences, VOICES, SNRS_DB]).encode()).hexdigest()[:12]
    path = cache / f"silero-clips-{seed}-{n}-{key}.npy"
    if path.exists():
        return list(np.load(path))
    rng = random.Random(seed)
    out = []
    with tempfile.TemporaryDirectory() as td:
        for i in range(n):
            clean = np.zeros(CLIP_S * SR, dtype=np.float32)
            pos = int(rng.uniform(0.3, 1.5) * SR)
            for _ in range(rng.randint(1, 2)):
                u = _speech(rng.choice(sentences), rng.choice(VOICES), rng.randint(140, 190), rng.randint(30, 70),
                            Path(td) / "u.wav") * rng.uniform(0.3, 0.9)
                if pos + len(u) > len(clean):
                    break
                clean[pos:pos + len(u)] += u
                pos += len(u) + int(rng.uniform(0.5, 1.5) * SR)
            noise = np.random.default_rng(seed * 1000 + i).standard_normal(len(clean))
            if i % 2:
                noise = np.cumsum(noise)
                noise -= np.convolve(noise, np.ones(1601) / 1601, mode="same")
            speech = clean[np.abs(clean) > 1e-3]
            power = float(np.mean(speech.astype(np.float64) ** 2)) if speech.size else 1e-4
            snr = SNRS_DB[i % len(SNRS_DB)]
            noise *= np.sqrt(power / (np.mean(noise**2) * 10 ** (snr / 10)))
            pcm = np.round(np.clip(clean + noise, -1, 1) * 32767) / 32768
            out.append(pcm.astype(np.float32))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, np.stack(out))
    tmp.replace(path)
    return out


def run_paths(audio: np.ndarray, models: dict[str, object]) -> dict[str, list[dict[str, int]]]:
    import torch
    from silero_vad import get_speech_timestamps, get_speech_timestamps_sequence

    at8k = (audio[: len(audio) // 2 * 2].reshape(-1, 2).mean(axis=1)).astype(np.float32)
    return {
        "stock16k": get_speech_timestamps(torch.from_numpy(audio), models["stock"], sampling_rate=16000),
        "stock8k": get_speech_timestamps(torch.from_numpy(at8k), models["stock"], sampling_rate=8000),
        "op15": get_speech_timestamps(torch.from_numpy(audio), models["op15"], sampling_rate=16000),
        "sequence": get_speech_timestamps_sequence(audio, models["sequence"], sampling_rate=16000),
    }


def load_models() -> dict[str, object]:
    from silero_vad import load_silero_vad

    return {"stock": load_silero_vad(onnx=True), "op15": load_silero_vad(onnx=True, opset_version=15),
            "sequence": load_silero_vad(sequence=True)}


def main() -> None:
    mode, cache = sys.argv[1], Path(sys.argv[2])
    spec = CALIB if mode == "calibrate" else HELDOUT
    audio = clips(spec["n"], spec["seed"], spec["sentences"], cache)  # type: ignore[arg-type]
    models = load_models()
    results = {f"clip{i:02d}": run_paths(a, models) for i, a in enumerate(audio)}
    if mode == "heldout":
        Path(sys.argv[3]).write_text(json.dumps(results, sort_keys=True))
    print(f"{mode}: {len(results)} clips through {', '.join(PATHS)}")


if __name__ == "__main__":
    main()
