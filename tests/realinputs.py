"""Inputs real models read, made in numpy alone for the real-model tests: speech-like audio and the
features FSMN-VAD takes, and captcha-like lines of characters.

``vowels``: harmonics of a voice's pitch shaped by two formants, four syllables a second, between
silences: what a voice-activity detector calls speech. ``fsmn_features``: the front end funasr's
``WavFrontend`` computes with kaldi-native-fbank (80 log-mel energies of 25 ms Hamming frames every
10 ms, five frames stacked, normalised by the model's ``am.mvn``), closely enough for the model to
find those syllables. ``glyph_line``: characters of a 5x7 bitmap font, scaled and jittered on a
grey, noisy 60x160 background, as captcha-whisperer's CRNN takes them (BGR, 0..255)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

RATE = 16000


def vowels(pattern: list[tuple[float, float]], seed: int = 0) -> npt.NDArray[np.float32]:
    """``pattern``: (seconds, pitch in Hz; 0 for silence) in turn."""
    rng = np.random.default_rng(seed)
    parts = []
    for seconds, f0 in pattern:
        t = np.arange(int(seconds * RATE)) / RATE
        if not f0:
            parts.append(np.zeros(t.size))
            continue
        formants = [np.exp(-(((f0 * k - 700) / 300) ** 2)) + 0.6 * np.exp(-(((f0 * k - 1200) / 400) ** 2))
                    for k in range(1, 30)]
        sig = sum(np.sin(2 * np.pi * f0 * k * t) * w for k, w in enumerate(formants, 1))
        parts.append(sig * (0.5 - 0.5 * np.cos(2 * np.pi * 4 * t)))
    a = np.concatenate(parts)
    a = a / np.abs(a).max() * 0.5 + rng.standard_normal(a.size) * 0.003
    return a.astype(np.float32)


def _mel_banks(bins: int, mels: int = 80) -> npt.NDArray[np.float64]:
    def mel(f: Any) -> Any:
        return 1127.0 * np.log(1.0 + np.asarray(f) / 700.0)
    low, high = mel(20.0), mel(RATE / 2)
    centres = np.linspace(low, high, mels + 2)
    freqs = mel(np.arange(bins) * RATE / 2 / (bins - 1))
    banks = np.zeros((mels, bins))
    for m in range(mels):
        left, centre, right = centres[m], centres[m + 1], centres[m + 2]
        banks[m] = np.clip(np.minimum((freqs - left) / (centre - left), (right - freqs) / (right - centre)), 0, None)
    return banks


def fsmn_features(wave: npt.NDArray[np.float32], mvn: Path) -> npt.NDArray[np.float32]:
    """``[1, T, 400]`` features of ``wave`` (16 kHz, in [-1, 1])."""
    x = wave.astype(np.float64) * 32768
    frames = 1 + (x.size - 400) // 160
    idx = np.arange(400)[None, :] + 160 * np.arange(frames)[:, None]
    f = x[idx]
    f = f - f.mean(axis=1, keepdims=True)
    f[:, 1:] -= 0.97 * f[:, :-1]
    power = np.abs(np.fft.rfft(f * np.hamming(400), 512)) ** 2
    feats = np.log(np.maximum(power @ _mel_banks(257).T, 1e-10))
    padded = np.vstack([np.repeat(feats[:1], 2, axis=0), feats, np.repeat(feats[-1:], 2, axis=0)])
    stacked = np.stack([padded[i:i + 5].reshape(-1) for i in range(feats.shape[0])])
    words = mvn.read_text().split("<LearnRateCoef>")
    shift = np.array(words[1].split("[")[1].split("]")[0].split(), np.float64)
    scale = np.array(words[2].split("[")[1].split("]")[0].split(), np.float64)
    return ((stacked + shift) * scale).astype(np.float32)[None]


FONT = {
    "A": "01110 10001 10001 11111 10001 10001 10001", "B": "11110 10001 10001 11110 10001 10001 11110",
    "C": "01110 10001 10000 10000 10000 10001 01110", "E": "11111 10000 10000 11110 10000 10000 11111",
    "H": "10001 10001 10001 11111 10001 10001 10001", "K": "10001 10010 10100 11000 10100 10010 10001",
    "1": "00100 01100 00100 00100 00100 00100 01110", "2": "01110 10001 00001 00010 00100 01000 11111",
    "3": "11110 00001 00001 01110 00001 00001 11110", "7": "11111 00001 00010 00100 01000 01000 01000",
}


def glyph_line(text: str, seed: int = 0) -> npt.NDArray[np.float32]:
    """``[1, 3, 60, 160]``: ``text`` (characters of ``FONT``) drawn dark on light grey."""
    rng = np.random.default_rng(seed)
    img = np.full((60, 160), 230.0)
    x = 10
    for ch in text:
        glyph = np.array([[int(c) for c in row] for row in FONT[ch].split()], np.float64)
        y = int(rng.integers(6, 14))
        img[y:y + 42, x:x + 25] -= np.kron(glyph, np.ones((6, 5))) * 180
        x += 25 + int(rng.integers(6, 12))
    img += rng.standard_normal(img.shape) * 8
    return np.repeat(np.clip(img, 0, 255)[None], 3, axis=0)[None].astype(np.float32)
