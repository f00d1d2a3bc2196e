"""A speech workload for Silero VAD (silero-vad==6.2.3) to run under ``hatch-shrinkray check``:
espeak-ng sentences in 8-second clips with white noise at 10 dB SNR, each clip through the
package's own API, both paths: the stock streaming ONNX model (``load_silero_vad(onnx=True)``,
one ``run()`` per 32 ms chunk) and the sequence model (``load_silero_vad(sequence=True)``).
Prints one line per clip (sha256 of its speech timestamps), so two runs can be compared clip by clip.

    python benchmarks/silero_workload.py [CLIPS] [OUT.json]

Needs espeak-ng (Debian package) and silero-vad with torch; standard library + numpy otherwise.
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
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "It is a beautiful morning, and the train leaves at half past seven.",
    "Six spoons of fresh snow peas and five thick slabs of blue cheese.",
    "The meeting has been moved to Thursday afternoon in the large conference room.",
    "Turn left at the second traffic light, then keep going until you see the river.",
    "Could you send me the report before the end of the week?",
    "She sells sea shells by the sea shore.",
]
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-gb+m3", "en-us+f2"]


def _speech(text: str, voice: str, speed: int, out: Path) -> np.ndarray:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("espeak-ng is not installed (apt-get install -y espeak-ng)")
    subprocess.run([exe, "-v", voice, "-s", str(speed), "-w", str(out), text], check=True, capture_output=True)
    with wave.open(str(out)) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    t = np.arange(int(len(x) * SR / rate)) * rate / SR
    return np.interp(t, np.arange(len(x)), x).astype(np.float32)


def clips(n: int, seed: int = 4321) -> list[np.ndarray]:
    rng = random.Random(seed)
    out = []
    with tempfile.TemporaryDirectory() as td:
        for i in range(n):
            clean = np.zeros(8 * SR, dtype=np.float32)
            pos = int(rng.uniform(0.3, 1.5) * SR)
            for _ in range(rng.randint(1, 2)):
                u = _speech(rng.choice(SENTENCES), rng.choice(VOICES), rng.randint(140, 190),
                            Path(td) / f"u{i}.wav") * rng.uniform(0.3, 0.9)
                if pos + len(u) > len(clean):
                    break
                clean[pos:pos + len(u)] += u
                pos += len(u) + int(rng.uniform(0.5, 1.5) * SR)
            noise = np.random.default_rng(seed + i).standard_normal(len(clean))
            speech = clean[np.abs(clean) > 1e-3]
            power = float(np.mean(speech.astype(np.float64) ** 2)) if speech.size else 1e-4
            noise *= np.sqrt(power / (np.mean(noise**2) * 10 ** (10 / 10)))
            out.append(np.clip(clean + noise, -1, 1).astype(np.float32))
    return out


def main() -> None:
    import torch
    from silero_vad import get_speech_timestamps, get_speech_timestamps_sequence, load_silero_vad

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    stock, seq = load_silero_vad(onnx=True), load_silero_vad(sequence=True)
    results = {}
    for i, audio in enumerate(clips(n)):
        a = get_speech_timestamps(torch.from_numpy(audio), stock, sampling_rate=SR)
        b = get_speech_timestamps_sequence(audio, seq, sampling_rate=SR)
        results[f"clip{i:02d}"] = {"stock": a, "sequence": b}
        print(f"clip{i:02d} stock {hashlib.sha256(repr(a).encode()).hexdigest()[:12]} "
              f"sequence {hashlib.sha256(repr(b).encode()).hexdigest()[:12]}")
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
