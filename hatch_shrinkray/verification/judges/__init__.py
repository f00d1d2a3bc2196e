"""Judges: what a package takes from each output, compared between the original and the shrunk model.

One module per output kind behind one interface (``base.Judge``), like the encodings; used alike by
the build's verification, ``check --shadow``, ``check --search`` and ``auto``'s budget, so a judge
added here serves every command. Each output gets the judge its shape and values imply
(``detect``), unless the ``judges`` key names one (``judge_for``):

========== ============================================================ ========================== ==================
judge      detected for                                                 an answer is               the same within
========== ============================================================ ========================== ==================
map        ``[N, C, H, W]`` in [0, 1] (H x W >= 256)                    a map's regions            IoU >= 0.9
sequence   ``[N, T, C]`` or ``[T, N, C]`` probabilities or log-         a decoded text line        0 edits
           probabilities whose class 0 or C-1 dominates (CTC); raw
           logits so where the calls' inputs are images or audio
tags       ``[N, T, C]`` scores (C <= 64) whose ``[N, T]`` is a         a text's tag sequence      0 tags
           token-id input's shape (one tag per character)
boxes      ``[B, 4+C, N]`` or ``[B, N, 4+C]`` candidates (scores in     an image's set of boxes    IoU >= 0.9 or 1 px
           [0, 1], pixel coordinates, N >= 64), ``[N, 6]`` after NMS
top-1      class scores (``[N, C]``, or softmax along the last axis)    a row's label              a near tie (1%)
decision   probabilities with a trailing axis of 1, or scalars          a call's decisions         0.01 of 0.5
segments   ``decision`` outputs of a recurrent model, per stream; a     a segment list             1 step or frame
           streaming model's ``[1, T, C]`` frame probabilities whose
           silence class dominates and whose speech lasts (FSMN-VAD)
equal      integer outputs                                              a sample's values          exact
values     everything else, and a recurrent model's state               (no answers: numbers only) the numeric limits
========== ============================================================ ========================== ==================

A tolerance is set per output after the judge's name: ``judges = { logits = "segments:2" }``.
``off`` switches an output's judging off altogether (it is not gated either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hatch_shrinkray.options import JUDGES as JUDGE_NAMES
from hatch_shrinkray.options import judge_spec
from hatch_shrinkray.verification.judges.base import THRESHOLD, Answers, Arrays, Judge, in_unit_range
from hatch_shrinkray.verification.judges.boxes import Boxes, layout_of
from hatch_shrinkray.verification.judges.decisions import MIN_RUN, Decisions, Segments, speech_runs
from hatch_shrinkray.verification.judges.labels import Equal, Labels, Values
from hatch_shrinkray.verification.judges.maps import Maps
from hatch_shrinkray.verification.judges.sequences import Sequences, batch_first, blank_class, raw_ctc
from hatch_shrinkray.verification.judges.tags import Tags, per_character

__all__ = ["JUDGE_NAMES", "THRESHOLD", "UNKNOWN", "Answers", "Arrays", "Calls", "Judge", "calls_of", "detect",
           "judge_for", "per_character"]

MAP_MIN_PIXELS = 256
MEDIA_VALUES = 256
"""Values a float input needs to be an image or audio (a feature vector of a few dozen is neither)."""


@dataclass(frozen=True)
class Calls:
    """What the calls' inputs and outputs tell about a model, beyond one output's values."""

    streaming: bool = False
    """It carries state from call to call: the recording saw an output fed back, or each call returns
    an output shaped like one of its inputs (FSMN-VAD's caches, fed back by the package even where
    each clip is one call)."""
    media: bool = False
    """Its inputs are images or audio: a float input of at least ``MEDIA_VALUES`` values in every call,
    and no integer input of two or more axes (token ids)."""
    batches: tuple[int, ...] = ()
    """Per call, the leading axis of its largest float input (the batch of images or clips), where
    every call has one: an output ``[T, batch, C]`` is then time-major whatever the batch."""


UNKNOWN = Calls()
"""Nothing known of the calls beyond one output's values."""


def calls_of(outputs: Sequence[Sequence[Any]], feeds: Sequence[Mapping[str, Any]], *, recurrent: bool = False) -> Calls:
    """``Calls`` from each call's ``outputs`` and ``feeds`` (``recurrent``: the recording saw feedback)."""
    if not feeds or len(feeds) != len(outputs):
        return Calls(streaming=recurrent)
    state = recurrent or any(_carries_state(out, feed) for out, feed in zip(outputs, feeds, strict=True))
    media = all(_media(feed) for feed in feeds)
    batches = [_batch(feed) for feed in feeds]
    return Calls(streaming=state, media=media,
                 batches=tuple(b for b in batches if b is not None) if None not in batches else ())


def _batch(feed: Mapping[str, Any]) -> int | None:
    floats = [np.asarray(v) for v in feed.values() if np.asarray(v).dtype.kind == "f" and np.ndim(v) >= 2]
    return int(max(floats, key=lambda a: a.size).shape[0]) if floats else None


def _time_major(ref: Arrays, calls: Calls) -> bool:
    """Every call's ``[a, b, C]`` has the batch of its input on the second axis, not the first."""
    return len(calls.batches) == len(ref) and all(np.ndim(r) == 3 and np.shape(r)[1] == n and np.shape(r)[0] != n
                                                  for r, n in zip(ref, calls.batches, strict=True))


def _carries_state(outputs: Sequence[Any], feed: Mapping[str, Any]) -> bool:
    """An output with the shape and dtype of an input of its own call, not that input handed back."""
    inputs = [np.asarray(v) for v in feed.values()]
    return any(x.shape == o.shape and x.dtype == o.dtype and x.size and not np.array_equal(x, o)
               for o in map(np.asarray, outputs) for x in inputs)


def _media(feed: Mapping[str, Any]) -> bool:
    arrays = [np.asarray(v) for v in feed.values()]
    return not any(a.dtype.kind in "iu" and a.ndim >= 2 for a in arrays) and any(
        a.dtype.kind == "f" and a.size >= MEDIA_VALUES for a in arrays)


def judge_for(name: str, ref: Arrays, *, recurrent: bool = False, fed_back: bool = False,
              characters: bool = False, calls: Calls = UNKNOWN) -> Judge | None:
    """The judge ``name`` (``auto``: detected from the original's outputs ``ref``), with the tolerance
    a ``name`` like ``segments:2`` gives it; None for ``off``. ``characters``: the output has one row
    per character of a token-id input (``per_character``); ``calls``: what the calls tell."""
    name, tolerance = judge_spec(name)
    if name == "off":
        return None
    judge = detect(ref, recurrent=recurrent, fed_back=fed_back, characters=characters, calls=calls) \
        if name == "auto" else _named(name, ref)
    if tolerance is not None and name != "auto" and not isinstance(judge, (Values, Equal)):
        judge.tolerance = tolerance
    return judge


def _named(name: str, ref: Arrays) -> Judge:
    made: dict[str, Any] = {"map": Maps, "top-1": Labels, "decision": Decisions, "equal": Equal, "values": Values,
                            "tags": Tags}
    if name == "sequence":
        return Sequences(blank_class(ref))
    if name == "segments":
        return _frames(ref) or Segments()
    if name == "tags" and np.ndim(ref[0]) < 2:
        return Values()  # no characters by classes here: the table says values
    if name == "boxes":
        layout = layout_of(ref, forced=True)
        return Boxes(layout) if layout is not None else Values()  # no box list in this shape: the table says values
    judge: Judge = made[name]()
    return judge


def _frames(ref: Arrays) -> Segments | None:
    """Frames of class probabilities (``[1, T, C]``, C >= 2) whose silence class, 0 or C-1, is the
    argmax of most frames, read as speech segments; None when the output is no such thing."""
    rows = batch_first(np.asarray(ref[0]))
    if rows.ndim != 3 or rows.shape[-1] < 2 or not all(np.isfinite(np.asarray(r)).all() for r in ref):
        return None
    log = not _softmax(rows) and _log_softmax(rows)
    if not (log or _softmax(rows)):
        return None
    silence = blank_class(ref)
    return Segments(silence, log=log) if silence is not None else None


def detect(ref: Arrays, *, recurrent: bool = False, fed_back: bool = False, characters: bool = False,
           calls: Calls = UNKNOWN) -> Judge:
    """The judge an output's shape and values imply (``ref``: the original's values, per call;
    ``characters``: it has one row of scores per character of a token-id input; ``calls``: what the
    calls' inputs and outputs tell)."""
    first = np.asarray(ref[0])
    if fed_back:
        return Values()  # a recurrent state: its error shows in the outputs it feeds
    if first.dtype.kind != "f":
        return Equal()  # integers, booleans, strings: the exact values are the answer
    if not all(np.isfinite(np.asarray(r)).all() for r in ref):
        return Values()
    if _map(ref, first):
        return Maps()
    layout = layout_of(ref)
    if layout is not None:
        return Boxes(layout)
    if characters and first.ndim == 3 and first.shape[-1] >= 2:
        return Tags()  # before CTC: a dominant tag ("no break here") is no blank
    if calls.streaming or recurrent:
        frames = _frames(ref)
        if frames is not None and frames.silence is not None and \
                speech_runs(ref, frames.silence, frames.log, THRESHOLD) >= MIN_RUN:
            return frames  # a streaming detector's frames: speech lasts, where CTC characters are spikes
    time_major = _time_major(ref, calls)
    rows = batch_first(first, time_major)
    if rows.ndim == 3 and rows.shape[-2] >= 2 and rows.shape[-1] >= 3:
        if _softmax(rows) or _log_softmax(rows):
            blank = blank_class(ref)
            if blank is not None:
                return Sequences(blank, time_major=time_major)
        elif calls.media and not _unit_rows(first):
            blank = raw_ctc(ref, time_major)
            if blank is not None:
                return Sequences(blank, time_major=time_major)  # raw logits of a recogniser fed images or audio
    if _class_scores(ref, first):
        return Labels()
    if _probabilities(ref, first):
        return Segments() if recurrent else Decisions()
    return Values()


def _map(ref: Arrays, first: npt.NDArray[Any]) -> bool:
    return first.ndim == 4 and first.shape[-1] * first.shape[-2] >= MAP_MIN_PIXELS and min(first.shape[-2:]) >= 8 \
        and all(in_unit_range(r) for r in ref)


def _softmax(first: npt.NDArray[Any]) -> bool:
    return bool(np.all((first >= 0) & (first <= 1)) and np.allclose(first.sum(axis=-1), 1, atol=1e-3))


def _log_softmax(first: npt.NDArray[Any]) -> bool:
    """Log-probabilities along the last axis (a CTC head ending in LogSoftmax): each row's
    log-sum-exp is 0."""
    if not (first <= 1e-6).all():
        return False
    rows = first.reshape(-1, first.shape[-1]).astype(np.float64)
    top = rows.max(axis=1, keepdims=True)
    return bool(np.allclose(top[:, 0] + np.log(np.exp(rows - top).sum(axis=1)), 0.0, atol=1e-3))


def _class_scores(ref: Arrays, first: npt.NDArray[Any]) -> bool:
    """(batch, classes) logits, or probability vectors along the last axis. Unit-length rows are
    embeddings (sentence encoders L2-normalise), whose argmax is no answer anyone takes; so are rows of
    positive values past 1 on every call that are no probabilities: separate scores (a speech-quality
    model's three mean opinion scores, each 1 to 5). A classifier's logits are negative somewhere."""
    if first.ndim < 2 or first.shape[-1] < 2 or _unit_rows(first):
        return False
    if _softmax(first):
        return True
    rows = [np.asarray(r) for r in ref]
    separate = all((r > 0).all() for r in rows) and any((r > 1).any() for r in rows)
    return first.ndim <= 2 and not separate


def _probabilities(ref: Arrays, first: npt.NDArray[Any]) -> bool:
    """Probability outputs with a trailing axis of 1, one per position (1-D) or scalars: a voice-activity
    detector's speech probability, per chunk or per frame of a sequence."""
    return (first.ndim <= 1 or first.shape[-1] == 1) and all(in_unit_range(r) for r in ref)


def _unit_rows(x: npt.NDArray[Any]) -> bool:
    """Every row along the last axis has L2 norm 1 and the rows have negative values: an embedding
    (a confident softmax row also has norm close to 1, but no negative entries)."""
    if not np.isfinite(x).all() or not (x < 0).any():
        return False
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    norms = np.sqrt(np.square(rows).sum(axis=1))
    return bool(np.allclose(norms, 1.0, atol=1e-3) and (np.count_nonzero(np.abs(rows) > 1e-6, axis=1) > 1).all())
