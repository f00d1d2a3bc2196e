"""Nakdimon (Hebrew diacritizer, Loop ops): agreement with the original through piper's own pipeline.

No vocalised reference text is available offline, so the task metric is agreement: the diacritized
output of each hand-written Hebrew sentence (piper-tts's ``NakdimonDiacritizer`` with the model
swapped) compared with the original model's - character error rate vs the original and the fraction of
identical sentences. piper's ``hebrew`` module is loaded from the extracted wheel by file path, so the
rest of piper (and its native extension) is not needed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import Feed, TaskOutput
from benchmarks.tasks.ocr_rec import edit_distance

SENTENCES = [
    "שלום עולם, מה שלומך היום?",
    "הילדים הלכו לבית הספר בבוקר.",
    "אני אוהב לקרוא ספרים בערב.",
    "מזג האוויר היום חם ונעים.",
    "הרכבת לירושלים יוצאת בשעה שמונה.",
    "היא קנתה ירקות טריים בשוק.",
    "אנחנו גרים בדירה קטנה ליד הים.",
    "המורה הסבירה את השיעור לתלמידים.",
    "הכלב רץ בגן אחרי הכדור.",
    "אבא שלי עובד בבית חולים גדול.",
    "בשבת נסענו לטייל בצפון הארץ.",
    "המחשב החדש מהיר מאוד.",
    "תודה רבה על העזרה שלך.",
    "הספרייה פתוחה עד השעה שש.",
    "הם שרו שירים יפים במסיבה.",
    "אני צריך לקנות לחם וחלב.",
    "הסטודנטים מתכוננים למבחן הגדול.",
    "העיר תל אביב שוכנת על חוף הים התיכון.",
    "השמש שוקעת מאחורי ההרים.",
    "סבתא אפתה עוגה טעימה לכל המשפחה.",
    "הרופא אמר לו לנוח כמה ימים.",
    "המשחק הסתיים בתיקו אחד אחד.",
    "אנחנו נפגשים מחר בבית הקפה.",
    "התינוק ישן כל הלילה בשקט.",
    "החברה הודיעה על מוצר חדש.",
    "בחורף יורד גשם רב בצפון.",
    "הוא כתב מכתב ארוך לחבר שלו.",
    "המוזיאון מציג ציורים עתיקים.",
    "הילדה ציירה פרח אדום וגדול.",
    "הממשלה החליטה להוריד את המחירים.",
]


def _hebrew_module() -> ModuleType:
    root = corpus.extract_wheel(corpus.BY_KEY["nakdimon"])
    spec = importlib.util.spec_from_file_location("piper_hebrew_bench", root / "piper" / "hebrew" / "__init__.py")
    if spec is None or spec.loader is None:
        raise ImportError("piper/hebrew not found in the extracted wheel")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class NakdimonTask:
    def __init__(self) -> None:
        self.mod = _hebrew_module()
        self._ref: list[str] | None = None
        ids = [self.mod._CHAR_TO_ID[self.mod.normalize(c)] for c in SENTENCES[17]]
        self._feed: Feed = {"input_1": np.array([ids], dtype=np.float32)}

    def latency_feed(self) -> Feed:
        return self._feed

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput:
        if path is None:
            raise ValueError("NakdimonTask needs the model path (it runs piper's own pipeline)")
        diacritizer = self.mod.NakdimonDiacritizer(path)
        outs = [diacritizer.diacritize(s) for s in SENTENCES]
        raw = []
        name = diacritizer._input_name
        for s in SENTENCES[:10]:
            ids = np.array([[self.mod._CHAR_TO_ID[self.mod.normalize(c)] for c in s]], dtype=np.float32)
            raw += list(diacritizer.session.run(None, {name: ids}))
        if self._ref is None:
            self._ref = outs  # the first run is the original model's
        errs = sum(edit_distance(r, o) for r, o in zip(self._ref, outs, strict=True))
        metrics = {
            "char_agreement": 1.0 - errs / sum(len(r) for r in self._ref),
            "sentence_agreement": sum(r == o for r, o in zip(self._ref, outs, strict=True)) / len(outs),
        }
        return TaskOutput(metrics=metrics, decisions=outs, raw=raw)
