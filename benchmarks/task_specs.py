"""Which task measures each corpus model, and how it is built: shared by the drivers, so that none of them
imports another driver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmarks.common import Feed, TaskOutput


class Task(Protocol):
    def latency_feed(self) -> Feed: ...

    def run(self, sess: Any, path: Path | None = None) -> TaskOutput: ...


@dataclass(frozen=True)
class TaskSpec:
    name: str
    primary: str  # metric plotted / summarised
    higher_is_better: bool
    build: Callable[[Path, bool], Task]
    signature: Callable[[bool], str]


def _ocr_rec(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.ocr_rec import OcrRecTask

    return OcrRecTask(path, n_lines=60 if quick else 200)


def _vad(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.vad import VadTask

    return VadTask(n_clips=6 if quick else 24)


def _ocr_det(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.ocr_det import OcrDetTask

    return OcrDetTask(n_pages=10 if quick else 30)


def _magika(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.magika_task import MagikaTask

    return MagikaTask(per_label=5 if quick else 15)


def _sentence(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.sentence import SentenceTask

    return SentenceTask()


def _mpnet(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.sentence import SentenceTask

    return SentenceTask("mpnet")


def _nudenet(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.nudenet_task import NudeNetTask

    return NudeNetTask(n_images=12 if quick else 40)


def _nakdimon(path: Path, quick: bool) -> Task:
    from benchmarks.tasks.nakdimon_task import NakdimonTask

    return NakdimonTask()


TASKS: dict[str, TaskSpec] = {
    "ppocrv6_rec": TaskSpec("ocr_rec", "cer", False, _ocr_rec, lambda q: f"ocr_rec-{60 if q else 200}"),
    "ppocrv4_rec": TaskSpec("ocr_rec", "cer", False, _ocr_rec, lambda q: f"ocr_rec-{60 if q else 200}"),
    "silero_vad": TaskSpec("vad", "f1", True, _vad, lambda q: f"vad-{6 if q else 24}"),
    "ppocrv6_det": TaskSpec("ocr_det", "f1_iou70", True, _ocr_det, lambda q: f"ocr_det-{10 if q else 30}"),
    "ppocrv4_det": TaskSpec("ocr_det", "f1_iou70", True, _ocr_det, lambda q: f"ocr_det-{10 if q else 30}"),
    "magika": TaskSpec("magika", "accuracy", True, _magika, lambda q: f"magika-{5 if q else 15}"),
    "minilm": TaskSpec("sentence", "paraphrase_top1", True, _sentence, lambda q: "sentence-1"),
    "mpnet": TaskSpec("sentence", "paraphrase_top1", True, _mpnet, lambda q: "sentence-mpnet-1"),
    "nudenet": TaskSpec("nudenet", "det_f1_vs_original", True, _nudenet, lambda q: f"nudenet-{12 if q else 40}"),
    "nakdimon": TaskSpec("nakdimon", "char_agreement", True, _nakdimon, lambda q: "nakdimon-1"),
}
QUICK_MODELS = ["ppocrv6_rec", "silero_vad"]
