"""Silero VAD: frame F1 and ROC AUC on espeak-ng speech mixed with noise at several SNRs.

Audio: espeak-ng (Debian package ``espeak-ng``) utterances at 22.05 kHz, resampled to 16 kHz, placed at
seeded offsets in 8-second clips; ground truth per 32 ms frame (512 samples) = clean-speech energy
above -35 dB of the clip's peak frame energy, with pauses < 250 ms filled. Noise: white and
brown (integrated white), scaled to SNR 20 / 10 / 5 / 0 / -5 dB over the speech frames. The model is streamed
exactly like silero_vad's OnnxWrapper (64 context samples + 512 new, state fed back). The 8 kHz
``If`` branch is exercised too (clips decimated to 8 kHz, 32 + 256 samples per chunk).
"""

from __future__ import annotations

import itertools
import pickle
import random
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import CACHE_DIR, Feed, TaskOutput

SR = 16000
CLIP_S = 8.0
FRAME = 512
SNRS_DB = (20.0, 10.0, 5.0, 0.0, -5.0)
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "It is a beautiful morning, and the train leaves at half past seven.",
    "Six spoons of fresh snow peas and five thick slabs of blue cheese.",
    "We also need a small plastic snake and a big toy frog for the kids.",
    "The meeting has been moved to Thursday afternoon in the large conference room.",
    "Turn left at the second traffic light, then keep going until you see the river.",
    "Could you send me the report before the end of the week?",
    "Numbers like one hundred and twenty three are hard to hear in noise.",
    "The weather forecast says there will be heavy rain tomorrow evening.",
    "She sells sea shells by the sea shore.",
    "Our software shrinks neural network models without changing their answers.",
]
CALIB_SENTENCES = [
    "A small boat drifted slowly past the old lighthouse.",
    "Remember to water the plants on the balcony twice a week.",
    "The library closes early on Sundays during the summer.",
    "He painted the fence green and then changed his mind.",
    "Seven geese crossed the road in front of the yellow truck.",
    "Bring a warm jacket, the evenings get cold in the hills.",
]
"""Sentences of the calibration clips (``use``): none is a test sentence."""
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-gb+m3", "en-us+f2"]


def _espeak(text: str, voice: str, speed: int, pitch: int, out: Path) -> None:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise FileNotFoundError("espeak-ng not installed (apt-get install -y espeak-ng)")
    subprocess.run([exe, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(out), text],
                   check=True, capture_output=True)


def _load_wav_16k(path: Path) -> np.ndarray:
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    sr, a = wavfile.read(str(path))
    x = a.astype(np.float32) / 32768.0
    if sr != SR:
        g = np.gcd(sr, SR)
        x = resample_poly(x, SR // g, sr // g).astype(np.float32)
    return x


def _labels(clean: np.ndarray) -> np.ndarray:
    n = len(clean) // FRAME
    e = (clean[: n * FRAME].reshape(n, FRAME) ** 2).mean(axis=1)
    thr = e.max() * 10 ** (-35 / 10)
    lab = e > thr
    # fill short pauses (< 250 ms = ~8 frames) between speech frames
    idx = np.flatnonzero(lab)
    for a, b in itertools.pairwise(idx):
        if 1 < b - a <= 8:
            lab[a:b] = True
    return lab


def build_clips(n_clips: int, seed: int, sentences: Sequence[str] = SENTENCES) -> list[dict[str, Any]]:
    """Clean speech clips with frame labels (cached)."""
    tag = "" if list(sentences) == SENTENCES else "_calib"
    cache = CACHE_DIR / "tasks" / f"vad_clips_{n_clips}_{seed}{tag}.pkl"
    if cache.exists():
        with open(cache, "rb") as f:
            cached: list[dict[str, Any]] = pickle.load(f)
        return cached
    rng = random.Random(seed)
    n = int(CLIP_S * SR)
    clips: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as td:
        for i in range(n_clips):
            clean = np.zeros(n, dtype=np.float32)
            pos = int(rng.uniform(0.3, 1.5) * SR)
            for _ in range(rng.randint(1, 2)):
                wav = Path(td) / f"u{i}.wav"
                _espeak(rng.choice(sentences), rng.choice(VOICES), rng.randint(140, 190), rng.randint(30, 70),
                        wav)
                u = _load_wav_16k(wav) * rng.uniform(0.3, 0.9)
                if pos + len(u) > n:
                    break
                clean[pos: pos + len(u)] += u
                pos += len(u) + int(rng.uniform(0.5, 1.5) * SR)
            clips.append({"clean": clean, "labels": _labels(clean)})
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache, "wb") as f:
        pickle.dump(clips, f)
    return clips


def mix(clean: np.ndarray, labels: np.ndarray, snr_db: float, kind: str, seed: int) -> np.ndarray:
    nrng = np.random.default_rng(seed)
    noise = nrng.standard_normal(len(clean)).astype(np.float64)
    if kind == "brown":
        noise = np.cumsum(noise)
        noise -= np.convolve(noise, np.ones(1601) / 1601, mode="same")  # remove drift
    mask = np.repeat(labels, FRAME)
    mask = np.concatenate([mask, np.zeros(len(clean) - len(mask), dtype=bool)])
    p_speech = float((clean[mask].astype(np.float64) ** 2).mean()) if mask.any() else 1e-4
    p_noise = float((noise**2).mean())
    noise *= np.sqrt(p_speech / (p_noise * 10 ** (snr_db / 10)))
    return np.clip(clean + noise, -1.0, 1.0).astype(np.float32)


def stream_probs(sess: Any, audio: np.ndarray, sr: int = SR) -> np.ndarray:
    """Speech probability per chunk, streamed like silero_vad.OnnxWrapper."""
    chunk = 512 if sr == 16000 else 256
    ctx_n = 64 if sr == 16000 else 32
    state = np.zeros((2, 1, 128), dtype=np.float32)
    ctx = np.zeros((1, ctx_n), dtype=np.float32)
    srt = np.array(sr, dtype=np.int64)
    n = len(audio) // chunk
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        x = np.concatenate([ctx, audio[None, i * chunk: (i + 1) * chunk]], axis=1)
        p, state = sess.run(None, {"input": x, "state": state, "sr": srt})
        out[i] = p[0, 0]
        ctx = x[:, -ctx_n:]
    return out


def f1(labels: np.ndarray, pred: np.ndarray) -> float:
    tp = float((labels & pred).sum())
    fp = float((~labels & pred).sum())
    fn = float((labels & ~pred).sum())
    return 2 * tp / max(1.0, 2 * tp + fp + fn)


def mixes(clips: list[dict[str, Any]], seed: int, snrs: Sequence[float]) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """(snr, audio, labels): every clip at every SNR, white and brown noise alternating."""
    items = []
    for ci, c in enumerate(clips):
        for si, snr in enumerate(snrs):
            kind = "white" if (ci + si) % 2 == 0 else "brown"
            items.append((snr, mix(c["clean"], c["labels"], snr, kind, seed * 1000 + ci * 10 + si), c["labels"]))
    return items


def at_8k(audio: np.ndarray) -> np.ndarray:
    from scipy.signal import resample_poly

    return resample_poly(audio, 1, 2).astype(np.float32)


class VadTask:
    def __init__(self, n_clips: int = 24, seed: int = 4321, snrs: tuple[float, ...] = SNRS_DB) -> None:
        self.items = mixes(build_clips(n_clips, seed), seed, snrs)
        # 8 kHz branch: the SNR-10 mixes decimated by 2
        self.items_8k = [(at_8k(a), lab) for snr, a, lab in self.items if snr == 10.0]

    def latency_feed(self) -> Feed:
        a = self.items[0][1]
        return {"input": a[None, : 64 + 512].copy(), "state": np.zeros((2, 1, 128), np.float32),
                "sr": np.array(SR, dtype=np.int64)}

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        from sklearn.metrics import roc_auc_score

        all_lab: list[np.ndarray] = []
        all_p: list[np.ndarray] = []
        per_snr: dict[float, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        for snr, audio, lab in self.items:
            p = stream_probs(sess, audio)
            lab_n = lab[: len(p)]
            all_lab.append(lab_n)
            all_p.append(p)
            per_snr.setdefault(snr, ([], []))[0].append(lab_n)
            per_snr[snr][1].append(p)
        lab_all = np.concatenate(all_lab)
        p_all = np.concatenate(all_p)
        metrics: dict[str, float] = {
            "f1": f1(lab_all, p_all > 0.5),
            "auc": float(roc_auc_score(lab_all, p_all)),
        }
        for snr, (ls, ps) in per_snr.items():
            metrics[f"f1_snr{int(snr)}"] = f1(np.concatenate(ls), np.concatenate(ps) > 0.5)
        p8: list[np.ndarray] = []
        l8: list[np.ndarray] = []
        for audio, lab in self.items_8k:
            p = stream_probs(sess, audio, sr=8000)
            p8.append(p)
            l8.append(lab[: len(p)])
        metrics["f1_8k"] = f1(np.concatenate(l8), np.concatenate(p8) > 0.5)
        decisions = [bool(v) for v in (p_all > 0.5)] + [bool(v) for v in (np.concatenate(p8) > 0.5)]
        return TaskOutput(metrics=metrics, decisions=decisions, raw=[p_all, np.concatenate(p8)])


def use(model_path: Path, n_clips: int = 4, seed: int = 99) -> int:
    """Stream ``n_clips`` clips of other sentences and voices draws (``CALIB_SENTENCES``, ``seed``) at
    every SNR through the model like silero_vad's OnnxWrapper, at 16 kHz and (at 10 dB) at 8 kHz: the
    workload ``hatch-shrinkray record`` watches."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    items = mixes(build_clips(n_clips, seed, CALIB_SENTENCES), seed, SNRS_DB)
    for _, audio, _ in items:
        stream_probs(sess, audio)
    for snr, audio, _ in items:
        if snr == 10.0:
            stream_probs(sess, at_8k(audio), sr=8000)
    return len(items)
