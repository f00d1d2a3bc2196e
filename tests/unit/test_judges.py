"""Judges, evidence counted over units, and closed-loop running of streams: the pure pieces.

The end-to-end behaviour (the build line, the guard on real models) is in tests/test_evidence.py."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from hatch_shrinkray import VerifyOptions, verify
from hatch_shrinkray.capture.shadow import ModelStats
from hatch_shrinkray.codec import encode
from hatch_shrinkray.evidence import MIN_UNITS, Evidence, upper_bound
from hatch_shrinkray.samples import Sequencing, completed, grouped, run_in_order
from hatch_shrinkray.verification.compare import compare, expect
from hatch_shrinkray.verification.judges import Calls, calls_of, detect, judge_for
from hatch_shrinkray.verification.judges.base import Answers
from hatch_shrinkray.verification.judges.boxes import Boxes
from hatch_shrinkray.verification.judges.decisions import Decisions, Segments
from hatch_shrinkray.verification.judges.labels import Equal, Labels, Values
from hatch_shrinkray.verification.judges.maps import Maps, label
from hatch_shrinkray.verification.judges.sequences import Sequences, decode
from hatch_shrinkray.verification.judges.tags import Tags, per_character
from hatch_shrinkray.verification.judging import answer_counts, evidence_of

from onnx_builders import init, model, tagger, vi


def test_upper_bound_is_clopper_pearson() -> None:
    assert upper_bound(0, 16) == pytest.approx(1 - 0.05 ** (1 / 16))  # 17.1%
    assert upper_bound(1, 20) == pytest.approx(0.2161, abs=1e-4)  # the exact one-sided 95% bound
    assert upper_bound(5, 5) == 1.0
    assert upper_bound(0, 0) == 1.0
    bounds = [upper_bound(k, 40) for k in range(41)]
    assert bounds == sorted(bounds)


def test_weak_evidence_below_the_minimum_and_not_at_it() -> None:
    below = Evidence(MIN_UNITS - 1, 0, "streams", decisions=762, flips=0)
    at = Evidence(MIN_UNITS, 0, "streams", decisions=762, flips=0)
    assert below.weak and below.text().endswith(": weak evidence")
    assert not at.weak and "weak" not in at.text()
    assert below.text().startswith(f"0 of 762 decisions flipped over {MIN_UNITS - 1} streams")
    generated = Evidence(100, 0, "samples", real=False)
    assert generated.weak and "generated inputs, no evidence" in generated.text()


def test_evidence_without_answers_claims_no_bound() -> None:
    """Outputs judged as numbers only: no "(0 changed; <= 17% at 95%)", which reads as a measured
    bound on changed answers that were never compared (ddddocr's logits and boxes)."""
    none = Evidence(40, 0, "calls")
    assert none.text() == ("no answers judged over 40 calls (outputs compared as numbers only; `judges` says how "
                           "your package reads an output)")
    assert "at 95%" not in none.text() and "at 95%" in Evidence(40, 0, "calls", decisions=80).text()


def _bfs(mask: np.ndarray) -> tuple[np.ndarray, int]:  # type: ignore[type-arg]
    h, w = mask.shape
    lab = np.zeros((h, w), int)
    n = 0
    for i in range(h):
        for j in range(w):
            if mask[i, j] and not lab[i, j]:
                n += 1
                stack = [(i, j)]
                lab[i, j] = n
                while stack:
                    y, x = stack.pop()
                    for dy in (-1, 0, 1):
                        for dx in (-1, 0, 1):
                            yy, xx = y + dy, x + dx
                            if 0 <= yy < h and 0 <= xx < w and mask[yy, xx] and not lab[yy, xx]:
                                lab[yy, xx] = n
                                stack.append((yy, xx))
    return lab, n


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.floats(0, 1), st.integers(0, 2**32 - 1))
def test_label_matches_a_flood_fill(h: int, w: int, density: float, seed: int) -> None:
    mask = np.random.default_rng(seed).random((h, w)) < density
    got, n = label(mask)
    want, m = _bfs(mask)
    assert n == m
    assert np.array_equal(got > 0, mask)
    assert len(set(zip(got[mask].tolist(), want[mask].tolist(), strict=True))) == n  # the same partition


def _page(boxes: list[tuple[int, int, int, int]], size: int = 64) -> np.ndarray:  # type: ignore[type-arg]
    m = np.full((1, 1, size, size), 0.05, np.float32)
    for y0, y1, x0, x1 in boxes:
        m[0, 0, y0:y1, x0:x1] = 0.9
    return m


def test_a_map_whose_regions_merge_is_a_changed_page() -> None:
    ref = _page([(10, 20, 5, 25), (10, 20, 27, 50)])  # two words
    merged = _page([(10, 20, 5, 50)])  # the gap between them filled: one box
    nudged = _page([(10, 20, 5, 25), (10, 20, 27, 51)])  # one column more: the same regions
    judge = Maps()
    assert judge.answers([ref], [merged], 0.5).changed == (True,)
    assert judge.answers([ref], [nudged], 0.5).changed == (False,)
    assert detect([ref]).name == "map"


def test_one_changed_character_is_one_changed_line() -> None:
    classes, frames = 6, 10
    path = [0, 3, 3, 0, 0, 4, 0, 5, 5, 0]  # "3 4 5" with blanks (class 0) between
    ref = np.full((1, frames, classes), 0.01, np.float32)
    ref[0, np.arange(frames), path] = 0.95
    ref /= ref.sum(axis=-1, keepdims=True)
    repeat = ref.copy()
    repeat[0, 3] = repeat[0, 2]  # one more frame of "3": collapses to the same text
    typo = ref.copy()
    typo[0, 5] = ref[0, 5][[0, 1, 2, 3, 5, 4]]  # the "4" frame now says "5"
    assert decode(ref, 0) == [(3, 4, 5)]
    judge = detect([ref])
    assert isinstance(judge, Sequences) and judge.blank == 0
    assert judge.answers([ref], [repeat], 0.5).changed == (False,)
    typo_answers = judge.answers([ref], [typo], 0.5)
    assert typo_answers.changed == (True,) and typo_answers.changed_items == 1


def test_a_time_major_ctc_output_is_read_as_lines() -> None:
    """``[T, 1, C]`` (torch's CTC layout, ddddocr's export): one line of T frames, not T lines of one
    frame; detected from log-probabilities as from probabilities, and forced on raw logits."""
    classes, frames = 6, 10
    path = [0, 3, 3, 0, 0, 4, 0, 5, 5, 0]
    probs = np.full((frames, 1, classes), 0.01, np.float32)
    probs[np.arange(frames), 0, path] = 0.95
    probs /= probs.sum(axis=-1, keepdims=True)
    typo = probs.copy()
    typo[5, 0] = probs[5, 0][[0, 1, 2, 3, 5, 4]]
    assert decode(probs, 0) == [(3, 4, 5)]
    for ref, got in ((probs, typo), (np.log(probs), np.log(typo))):
        judge = detect([ref])
        assert isinstance(judge, Sequences) and judge.blank == 0, judge.name
        answers = judge.answers([ref], [got], 0.5)
        assert answers.items == 1 and answers.changed == (True,) and answers.changed_items == 1
    logits = np.log(probs) * 3.0 + 7.0  # raw scores: no softmax to detect, the judges key names it
    assert detect([logits]).name == "values"
    forced = judge_for("sequence", [logits])
    assert isinstance(forced, Sequences) and forced.answers([logits], [logits], 0.5).items == 1


def test_segments_report_how_far_a_boundary_moved() -> None:
    """A boundary one step off is the same segment list (the judge's default tolerance, said in the
    detail); two steps off is a changed one, and a tolerance of 2 (``segments:2``) takes it back."""
    ref = np.array([0.1] * 10 + [0.9] * 10 + [0.1] * 10, np.float32).reshape(30, 1, 1)
    late = ref.copy()
    late[10] = 0.3  # speech starts one step later
    answers = Segments().answers([ref], [late], 0.5)
    assert answers.changed == (False,)
    assert answers.detail.startswith("boundaries within 1 step (1 not exact)")
    later = late.copy()
    later[11] = 0.3
    moved = Segments().answers([ref], [later], 0.5)
    assert moved.changed == (True,) and "moved by up to 2 steps" in moved.detail
    loose = judge_for("segments:2", [ref])
    assert loose is not None and loose.answers([ref], [later], 0.5).changed == (False,)
    assert loose.same() == "boundaries within 2 steps"
    assert Segments().answers([ref], [ref], 0.5).changed == (False,)
    blip = ref.copy()
    blip[3] = 0.7  # a one-step segment appears in the silence
    assert Segments().answers([ref], [blip], 0.5).changed == (False,)
    assert Segments(tolerance=0).answers([ref], [blip], 0.5).changed == (True,)


@pytest.mark.parametrize(("shape", "values", "recurrent", "name"), [
    ((1, 10), "logits", False, "top-1"),
    ((1, 1), "probability", False, "decision"),
    ((1, 1), "probability", True, "segments"),
    ((2, 384), "unit", False, "values"),
    ((1, 4), "int", False, "equal"),
    ((1, 3), "scores", False, "values"),
    ((1, 3), "positive logits", False, "top-1"),
])
def test_detection_by_shape_and_values(shape: tuple[int, ...], values: str, recurrent: bool, name: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    if values == "probability":
        x = rng.random(shape).astype(np.float32)
    elif values == "unit":
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    elif values == "int":
        x = rng.integers(0, 9, shape)
    elif values == "scores":  # speechmos's DNSMOS: three separate opinion scores, 1 to 5
        x = (1 + 4 * rng.random(shape)).astype(np.float32)
    elif values == "positive logits":  # all positive on one call, negative on another: a classifier's
        x = np.abs(x) + 1
    calls = [x, -x] if values == "positive logits" else [x]
    assert detect(calls, recurrent=recurrent).name == name
    assert judge_for("off", [x]) is None
    assert judge_for("values", [x]).name == "values"  # type: ignore[union-attr]


def test_folds_never_split_a_unit() -> None:
    seq = Sequencing(("test:a", "test:a", "test:b", "test:c", "test:b", "test:d"))
    folds = seq.folds(2)
    assert sorted(i for f in folds for i in f) == list(range(6))
    for unit in set(seq.units):
        sides = {k for k, f in enumerate(folds) for i in f if seq.units[i] == unit}
        assert len(sides) == 1


def test_streams_run_in_closed_loop_on_their_own_state() -> None:
    """A toy recurrent 'model': state' = state + x, output = state'. The second step's stored feed has
    no state: it comes from the first step's output, whatever model runs."""
    seq = Sequencing(("stream:0", "stream:0", "stream:0"), (("state", "state_out"),), ((0, 1, 2),))
    feeds = [{"x": np.array([1.0]), "state": np.array([0.0])}, {"x": np.array([2.0])}, {"x": np.array([3.0])}]

    def model(scale: float):  # type: ignore[no-untyped-def]
        return lambda feed: [feed["state"] + scale * feed["x"]]

    original = run_in_order(model(1.0), feeds, seq, ["state_out"])
    drifting = run_in_order(model(1.1), feeds, seq, ["state_out"])
    assert [o[0][0] for o in original] == [1.0, 3.0, 6.0]
    assert [round(float(o[0][0]), 6) for o in drifting] == [1.1, 3.3, 6.6]  # its own state: the error adds up
    full = completed(feeds, seq, original, ["state_out"])
    assert full[2]["state"][0] == 3.0  # open loop: the original's state
    stacked = grouped(original, seq, 0)
    assert len(stacked) == 1 and stacked[0].shape == (3, 1)


def test_a_map_rounded_a_hair_past_one_is_still_a_map() -> None:
    """A sigmoid along another kernel path (the probe session of output-aware rounding) gave
    PP-OCRv4's detector 1.0000001: the map must still be judged by its regions, not as values
    (which let the guard keep a rounding on relative L2 alone)."""
    rng = np.random.default_rng(0)
    page = rng.uniform(0.0, 1.0, (1, 1, 64, 96)).astype(np.float32)
    page[0, 0, 3, 5] = np.float32(1.0000001)
    assert isinstance(detect([page, page * 0.5]), Maps)
    page[0, 0, 3, 5] = 1.01  # a real excursion is no probability
    assert not isinstance(detect([page]), Maps)


def _noise_map(scale: float) -> onnx.ModelProto:
    """x[1, 1, 32, 32] -> Conv(3x3) -> Sigmoid -> * 1e-6: a detector's map on noise, every value far
    below any region's threshold."""
    w = np.random.default_rng(1).standard_normal((1, 1, 3, 3)).astype(np.float32) * scale
    return model([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["s", "k"], ["map"])],
                 [vi("x", [1, 1, 32, 32])], [vi("map", [1, 1, 32, 32])],
                 [init("W", w), init("k", np.array(1e-6, np.float32))])


def test_a_tolerance_cannot_veto_a_model_whose_answers_all_held() -> None:
    """A map of noise (values of 1e-6) with another weight is far off in relative L2, yet no region
    appears or vanishes on either side: its answers hold, so the build verifies; the figures stay
    in the record. The same output judged as plain values is gated by the tolerance as before."""
    original, other = _noise_map(1.0), _noise_map(-3.0)
    held = verify(original, other)
    (out,) = held.outputs
    assert held.passed and out.judge == "map" and out.answers == 8 and not out.changed_answers
    assert out.rel_l2 > 0.1 and out.waived and out.waived[0].startswith("rel L2")
    assert "every answer held" in held.table()
    assert encode(held.record())["outputs"][0]["rel_l2"] == out.rel_l2
    gated = verify(original, other, VerifyOptions(judges=(("map", "values"),)))
    assert not gated.passed and gated.outputs[0].failures[0].startswith("rel L2") and not gated.outputs[0].waived
    off = verify(original, other, VerifyOptions(judges=(("map", "off"),))).outputs[0]
    assert off.judge == "off" and math.isnan(off.rel_l2)  # not compared: no figure


def test_a_map_below_every_threshold_on_both_sides_is_the_same() -> None:
    """No region on either side is the same page, without dividing by the near-zero values."""
    rng = np.random.default_rng(0)
    ref = (rng.random((2, 1, 64, 64)) * 1e-7).astype(np.float32)
    got = (rng.random((2, 1, 64, 64)) * 1e-9).astype(np.float32)
    with np.errstate(all="raise"):
        answers = Maps().answers(list(ref[:, None]), list(got[:, None]), 0.5)
    assert answers.changed == (False, False) and answers.items == 2 and "0 of 0 matched" in answers.detail


def _candidates(found: list[tuple[float, float, float, float, int, float]], classes: int = 3,
                n: int = 128) -> np.ndarray:  # type: ignore[type-arg]
    """A YOLOv8 head ``[1, 4 + C, N]``: background candidates scoring 0.01, and per box (centre x,
    centre y, width, height, class, score) the box itself and a weaker duplicate that NMS removes."""
    rng = np.random.default_rng(0)
    p = np.empty((n, 4 + classes), np.float32)
    p[:, :2] = rng.uniform(0, 320, (n, 2))
    p[:, 2:4] = rng.uniform(4, 40, (n, 2))
    p[:, 4:] = 0.01
    for k, (cx, cy, w, h, c, s) in enumerate(found):
        p[2 * k] = [cx, cy, w, h, *([0.01] * classes)]
        p[2 * k, 4 + c] = s
        p[2 * k + 1] = [cx + 2, cy, w, h, *([0.01] * classes)]
        p[2 * k + 1, 4 + c] = s * 0.8
    return p.T[None].copy()


FACES = [(100.0, 80.0, 40.0, 50.0, 0, 0.9), (220.0, 150.0, 30.0, 30.0, 2, 0.6)]


def test_a_box_list_is_one_answer_per_image() -> None:
    """Every candidate's coordinates count for nothing: an image's answer is its boxes after the
    score threshold and NMS. One pixel off is the same answer, a box lost or relabelled is not."""
    ref = _candidates(FACES)
    judge = detect([ref])
    assert isinstance(judge, Boxes) and judge.layout.channels_first and not judge.layout.final
    shifted = _candidates([(x + 1, y - 1, w, h, c, s) for x, y, w, h, c, s in FACES])
    lost = _candidates([*FACES[:1], (220.0, 150.0, 30.0, 30.0, 2, 0.2)])  # below the score threshold
    relabelled = _candidates([*FACES[:1], (220.0, 150.0, 30.0, 30.0, 1, 0.6)])
    same = judge.answers([ref], [shifted], 0.5)
    assert same.changed == (False,) and same.items == 1 and "2 of 2 boxes drawn the same" in same.detail
    assert judge.answers([ref, ref], [lost, ref], 0.5).changed == (True, False)
    assert judge.answers([ref], [relabelled], 0.5).changed_items == 1
    rows = ref.transpose(0, 2, 1).copy()  # [1, N, 4 + C]: the same candidates, the other way round
    turned = detect([rows])
    assert isinstance(turned, Boxes) and not turned.layout.channels_first
    assert turned.answers([rows], [shifted.transpose(0, 2, 1)], 0.5).changed == (False,)
    assert turned.answers([rows], [lost.transpose(0, 2, 1)], 0.5).changed == (True,)


def test_boxes_after_nms_are_judged_whatever_their_count() -> None:
    """``[N, 6]`` rows (x1, y1, x2, y2, score, class) from a graph with NMS: a shrunk model that finds
    one box fewer has another shape, and is judged by its answers, not refused as a shape change."""
    ref = np.array([[80, 55, 120, 105, 0.9, 0], [205, 135, 235, 165, 0.6, 2]], np.float32)
    judge = detect([ref])
    assert isinstance(judge, Boxes) and judge.layout.final
    options = VerifyOptions()
    nudged = compare("dets", expect([ref], judge=judge), [ref + np.array([1, 0, 1, 0, 0.01, 0], np.float32)],
                     options)
    assert nudged.ok and nudged.answers == 1 and not nudged.changed_answers
    fewer = compare("dets", expect([ref], judge=judge), [ref[:1]], options)
    assert not fewer.ok and fewer.judge == "boxes" and fewer.changed_answers == 1
    scores_first = ref[:, [0, 1, 2, 3, 5, 4]]  # (…, class, score): told apart by which column is integral
    assert isinstance(j := detect([scores_first]), Boxes) and j.layout.label == 4


def test_a_padded_box_list_is_judged_by_the_rows_that_score() -> None:
    """YOLO26 pads its ``[1, 300, 6]`` list with near-zero rows, some not even boxes (x2 < x1): the
    list is still told for one, the padding is not an answer, and a box whose score crosses ``SCORE``
    is a changed answer."""
    boxes = np.array([[80, 55, 120, 105, 0.9, 0], [205, 135, 235, 165, 0.6, 2]], np.float64)
    padding = np.array([[50, 50, 40, 60, 3e-7, 1]] * 298, np.float64)
    ref = np.concatenate([boxes, padding])[None].astype(np.float32)
    judge = detect([ref])
    assert isinstance(judge, Boxes) and judge.layout.final
    noisy = ref.copy()
    noisy[0, 2:, :4] += 7.0  # the padding moves: nobody draws it
    assert judge.answers([ref], [noisy], 0.5).changed == (False,)
    faded = ref.copy()
    faded[0, 1, 4] = 0.2  # a box drops below the score every package draws from
    assert judge.answers([ref], [faded], 0.5).changed == (True,)


def test_what_is_not_a_box_list_is_not_judged_as_one() -> None:
    rng = np.random.default_rng(0)
    assert detect([rng.standard_normal((1, 22, 2100)).astype(np.float32)]).name == "values"
    small = _candidates(FACES, n=20)  # 20 candidates: too few to tell from any other tensor
    assert detect([small]).name == "values"
    forced = judge_for("boxes", [small])
    assert isinstance(forced, Boxes) and forced.answers([small], [small], 0.5).items == 1
    assert judge_for("boxes", [rng.random((1, 10)).astype(np.float32)]).name == "values"  # type: ignore[union-attr]


def _tag_scores(texts: list[list[int]], classes: int = 4) -> np.ndarray:  # type: ignore[type-arg]
    """Softmax scores ``[texts, T, C]`` whose argmax per character is the given tag."""
    tags = np.array(texts)
    x = np.full((*tags.shape, classes), 0.05, np.float32)
    np.put_along_axis(x, tags[..., None], 0.9, axis=2)
    return x / x.sum(axis=2, keepdims=True)


SEGMENTED = [[1, 0, 0, 2, 0, 0, 0, 3, 0, 0], [1, 0, 2, 0, 0, 0, 0, 0, 3, 0], [1, 0, 0, 0, 0, 2, 0, 0, 0, 0]]
"""Three texts of ten characters tagged per character; tag 0 ("no break here") dominates, as CTC's blank."""


def test_one_changed_tag_is_one_changed_text() -> None:
    """A segmenter fed token ids ``[3, 10]`` answers ``[3, 10, 4]``: one tag per character. Taken for
    CTC (its tag 0 dominates), a word break moved by one character collapses to the same "line";
    counted per character it is 2 of 30. It is one of three texts."""
    ref = _tag_scores(SEGMENTED)
    moved = [row.copy() for row in SEGMENTED]
    moved[1][2:4] = [0, 2]  # the second text's first word one character longer
    got = _tag_scores(moved)
    ids = {"ids": np.arange(30, dtype=np.float32).reshape(3, 10)}  # ids as floats, as nakdimon takes them
    assert isinstance(detect([ref]), Sequences)  # without the feeds: CTC-looking
    assert decode(ref, 0)[1] == decode(got, 0)[1]  # ... and greedy CTC hides the change
    judge = judge_for("auto", [ref], characters=per_character([ref], [ids]))
    assert isinstance(judge, Tags)
    answers = judge.answers([ref], [got], 0.5)
    assert (answers.items, answers.changed_items, answers.changed) == (3, 1, (True,))
    assert "2 of 30 tags changed" in answers.detail
    assert judge.answers([ref], [ref], 0.5).changed_items == 0
    assert isinstance(judge_for("tags", [ref]), Tags)
    assert judge_for("tags", [np.ones(4, np.float32)]).name == "values"  # type: ignore[union-attr]


def test_a_ctc_recogniser_is_no_tagger() -> None:
    """Scores ``[1, T, C]`` from a float image, or from audio of many more samples than frames, stay
    CTC lines; token ids of another length, or not integral, make no tagger either."""
    ref = _tag_scores(SEGMENTED[:1])
    image = {"x": np.random.default_rng(0).random((1, 3, 32, 100)).astype(np.float32)}
    audio = {"x": np.random.default_rng(0).standard_normal((1, 1600)).astype(np.float32)}
    other_length = {"ids": np.arange(12).reshape(1, 12)}
    fractional = {"ids": np.full((1, 10), 0.5, np.float32)}
    for feed in (image, audio, other_length, fractional):
        assert not per_character([ref], [feed])
        assert isinstance(judge_for("auto", [ref], characters=per_character([ref], [feed])), Sequences)
    assert per_character([ref], [{"ids": np.arange(10).reshape(1, 10)}])
    hidden = np.random.default_rng(0).standard_normal((1, 10, 384)).astype(np.float32)  # a text encoder's tokens
    assert not per_character([hidden], [{"ids": np.arange(10).reshape(1, 10)}])



def test_verification_counts_a_taggers_texts() -> None:
    """Through verification: the table names the judge and counts texts."""
    m = tagger()
    result = verify(m, m)
    (out,) = result.outputs
    assert result.passed and out.judge == "tags" and out.describes == "texts" and out.answers == 8
    assert "tags 8/8 texts same" in result.table()








def test_check_shadow_counts_answers_not_only_decisions() -> None:
    """``check --shadow`` compares each call as verification does: a box list has no fine-grained
    decisions, yet an image that lost a box is a changed call, and a tagger's text is one answer;
    an output switched off is not compared at all."""
    stats = ModelStats()
    ref, lost = _candidates(FACES), _candidates([*FACES[:1], (220.0, 150.0, 30.0, 30.0, 2, 0.2)])
    stats.observe(["boxes", "noise"], [ref, np.ones(3)], [ref, np.zeros(3)], 0.5, judges={"noise": "off"})
    stats.observe(["boxes", "noise"], [ref, np.ones(3)], [lost, np.zeros(3)], 0.5, judges={"noise": "off"})
    assert set(stats.outputs) == {"boxes"} and stats.outputs["boxes"].judge == "boxes"
    assert (stats.units, stats.changed_units, stats.answers) == (2, 1, 2)
    assert stats.evidence().text().startswith("1 of 2 images changed over 2 calls")
    tagger = ModelStats()
    scores, moved = _tag_scores(SEGMENTED), _tag_scores([SEGMENTED[0], [1, 0, 0, 2, 0, 0, 0, 0, 3, 0], SEGMENTED[2]])
    tagger.observe(["tags"], [scores], [moved], 0.5, feed={"ids": np.ones((3, 10), np.int64)})
    assert tagger.outputs["tags"].judge == "tags" and tagger.outputs["tags"].changed_answers == 1




def test_a_taggers_heads_answer_about_the_same_texts() -> None:
    """Two heads of a diacritizer (vowels, dots) over three one-text calls: a text counts once,
    changed when either head's tags changed."""
    texts = [_tag_scores(SEGMENTED[k:k + 1]) for k in range(3)]
    moved = _tag_scores([[1, 0, 0, 0, 2, 0, 0, 0, 3, 0]])  # the second text's break moved
    judge = Tags()
    vowels = compare("N", expect(texts, judge=judge), [texts[0], moved, texts[2]], VerifyOptions())
    dots = compare("D", expect(texts, judge=judge), texts, VerifyOptions())
    assert vowels.changed == (False, True, False) and dots.changed == (False, False, False)
    assert answer_counts([vowels, dots]) == (3, 1)
    assert answer_counts([vowels, dots, vowels]) == (3, 1)
    evidence = evidence_of([vowels, dots], Sequencing.plain(3), real=True)
    assert (evidence.answers, evidence.changed_answers, evidence.describes) == (3, 1, "texts")


def test_labels_count_each_row_whose_argmax_moved() -> None:
    ref = [np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([[0.3, 0.7]])]
    got = [np.array([[0.6, 0.4], [0.7, 0.3]]), np.array([[0.2, 0.8]])]
    assert Labels().answers(ref, got, 0.5) == Answers((True, False), 3, 1)
    assert Labels().answers([np.float32(1.0)], [np.float32(2.0)], 0.5) == Answers((False,), 1, 0)  # a scalar


def test_equal_counts_each_sample_whose_values_differ() -> None:
    ref = [np.array([1, 2, 3]), np.array([4])]
    assert Equal().answers(ref, [np.array([1, 2, 3]), np.array([5])], 0.5) == Answers((False, True), 2, 1)


def test_values_have_no_answers_to_change() -> None:
    assert Values().answers([np.zeros(3)], [np.ones(3)], 0.5) == Answers((False,), 0, 0)


def _frames(pattern: list[tuple[int, bool]], classes: int = 6, seed: int = 0) -> np.ndarray:
    """``[1, T, classes]`` softmax frames: silence (class 0) or speech (the other classes, the argmax
    wandering among them as a VAD's phone states do) for each run of ``pattern``."""
    rng = np.random.default_rng(seed)
    rows = []
    for length, speech in pattern:
        for _ in range(length):
            logits = rng.standard_normal(classes) * 0.3
            logits[0 if not speech else int(rng.integers(1, classes))] += 4.0
            rows.append(np.exp(logits) / np.exp(logits).sum())
    return np.asarray(rows, np.float32)[None]


def test_a_streaming_detectors_frames_are_judged_as_segment_lists() -> None:
    """FSMN-VAD's ``[1, T, 248]``: class 0 is silence, speech is 1 - p[silence]. Its many speech
    classes change argmax from frame to frame, so read as CTC text nearly every call "changed"; as
    segments, a boundary one frame off is the same list. Only for a model that carries state (a
    streaming detector): the same values from a stateless model stay CTC, and so does a streaming
    recogniser, whose characters are spikes between blanks, not lasting speech."""
    frames = _frames([(40, False), (60, True), (30, False), (45, True), (25, False)])
    judge = detect([frames], calls=Calls(streaming=True))
    assert isinstance(judge, Segments) and judge.silence == 0 and judge.describes == "segment lists"
    assert isinstance(detect([frames]), Sequences)
    spikes = _frames([(3, False), (1, True)] * 50)
    assert isinstance(detect([spikes], calls=Calls(streaming=True)), Sequences)
    shifted = _frames([(41, False), (59, True), (30, False), (45, True), (25, False)], seed=1)
    answers = judge.answers([frames], [shifted], 0.5)
    assert answers.changed == (False,) and "boundaries within 1 frame" in answers.detail
    moved = _frames([(44, False), (56, True), (30, False), (45, True), (25, False)], seed=1)
    assert judge.answers([frames], [moved], 0.5).changed == (True,)
    assert isinstance(judge_for("segments", [frames]), Segments)  # named: the silence class read off the frames
    assert judge_for("segments", [frames]).silence == 0  # type: ignore[union-attr]


def test_the_decisions_of_a_streaming_detector_are_its_frames() -> None:
    """``compare`` counts one speech decision per frame (not one per class probability), so a flip is
    a frame whose speech probability crossed 0.5."""
    frames = _frames([(40, False), (60, True), (30, False)])
    judge = detect([frames], calls=Calls(streaming=True))
    shifted = _frames([(41, False), (59, True), (30, False)], seed=1)
    c = compare("logits", expect([frames], judge=judge), [shifted], VerifyOptions())
    assert c.judge == "segments" and c.agreement_kind == "decision"
    assert c.positions == 130 and c.flips == 1
    assert c.answers == 1 and c.changed_answers == 0 and c.describes == "segment lists"


def test_calls_tell_state_and_media_from_inputs_and_outputs() -> None:
    """A call returning an output shaped like one of its inputs carries state (FSMN-VAD's caches,
    zeros in, filled out, even where each clip is one call); an output handed back unchanged does
    not. Images or audio, and no token ids, are media."""
    cache = np.zeros((1, 8, 19, 1), np.float32)
    image = np.zeros((1, 3, 32, 32), np.float32)
    assert calls_of([[image[:, 0], cache + 1]], [{"x": image, "cache": cache}]).streaming
    assert not calls_of([[image[:, 0], cache]], [{"x": image, "cache": cache}]).streaming
    assert calls_of([[image[:, 0]]], [{"x": image}]).media
    ids = np.zeros((1, 32), np.int64)
    assert not calls_of([[image[:, 0]]], [{"x": image, "ids": ids}]).media
    assert calls_of([[image]], [{"x": image, "length": np.array([32], np.int64)}]).media  # a length is no token id
    assert not calls_of([[image]], [{"x": np.zeros((1, 16), np.float32)}]).media  # a few features: neither
    assert calls_of([[image]], [], recurrent=True) == Calls(streaming=True)


def test_raw_ctc_logits_are_text_where_the_inputs_are_images() -> None:
    """captcha-whisperer's ``[T, N, 37]`` logits (no softmax in the graph, blank 36): a text recogniser
    fed an image, judged as its lines. Without media inputs (or for hidden states whose one feature
    dominates every frame, or unit-length embeddings) the values stay numbers only."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((20, 1, 37)).astype(np.float32)
    logits[:, 0, 36] += 3.0
    for t, c in ((3, 5), (7, 11), (12, 2), (16, 30)):
        logits[t, 0, c] += 6.0
    media = Calls(media=True)
    judge = detect([logits], calls=media)
    assert isinstance(judge, Sequences) and judge.blank == 36
    assert detect([logits]).name == "values"
    hidden = rng.standard_normal((1, 20, 64)).astype(np.float32)
    hidden[..., 0] += 10.0  # one outlier feature, the argmax of every frame
    assert detect([hidden], calls=media).name == "values"
    unit = hidden / np.linalg.norm(hidden, axis=-1, keepdims=True)
    assert detect([unit], calls=media).name == "values"
    other = logits.copy()
    other[7, 0, 11] -= 12.0  # one character lost
    assert judge.answers([logits], [other], 0.5).changed == (True,)
    assert judge_for("sequence:1", [logits]).answers([logits], [other], 0.5).changed == (False,)  # type: ignore[union-attr]


@pytest.mark.parametrize(("value", "problem"), [
    ("segments:2", ""),
    ("map:0.8", ""),
    ("segments", ""),
    ("segments:1.5", "tolerance of 'segments' must be a whole number of steps; got 'segments:1.5'"),
    ("map:2", "tolerance of 'map' must be a number from 0 to 1; got 'map:2'"),
    ("values:3", "names 'values', which takes no tolerance; got 'values:3'"),
    ("auto:1", "names 'auto', which takes no tolerance; got 'auto:1'"),
    ("segments:x", "has a tolerance that is no number: 'segments:x'"),
    ("segment", "must be one of"),
])
def test_a_judges_tolerance_is_written_with_its_name(value: str, problem: str) -> None:
    from hatch_shrinkray.options import judge_problem
    got = judge_problem(value)
    assert got.startswith(problem) if problem else got == "", got


def test_each_judge_states_its_tolerance_and_takes_one_per_output() -> None:
    """Every judge says what makes two answers the same; a value after a colon sets it."""
    probs = np.full((1, 4, 5), 0.05, np.float32)
    probs[0, :, 0] = 0.8
    for name, said in (("segments:3", "boundaries within 3 frames"), ("sequence:2", "texts within 2 edits"),
                       ("map:0.8", "the same regions (IoU >= 0.8)"), ("top-1:0.05", "within 5% of the scores"),
                       ("decision:0.1", "a flip within 0.1 of it aside"), ("tags:1", "at most 1 tag changed")):
        judge = judge_for(name, [probs])
        assert judge is not None and said in judge.same(), (name, judge.same() if judge else None)
    assert judge_for("values:0", [probs]).same().startswith("no answer")  # type: ignore[union-attr]


def test_a_flip_at_a_near_tie_is_no_changed_label_or_decision() -> None:
    """A score in its last digits at a tie flips under any rounding: as ``compare`` leaves such a flip
    out of the decisions, the judges leave it out of the answers; a clear flip still counts."""
    ref = np.array([[0.500001, 0.499999, 0.0], [0.9, 0.05, 0.05]], np.float32)
    tie = np.array([[0.499999, 0.500001, 0.0], [0.9, 0.05, 0.05]], np.float32)
    assert Labels().answers([ref], [tie], 0.5).changed == (False,)
    assert Labels(tolerance=0).answers([ref], [tie], 0.5).changed == (True,)
    clear = np.array([[0.500001, 0.499999, 0.0], [0.05, 0.9, 0.05]], np.float32)
    assert Labels().answers([ref], [clear], 0.5).changed == (True,)
    p = np.array([[0.5001], [0.9]], np.float32)
    assert Decisions().answers([p], [np.array([[0.4999], [0.9]], np.float32)], 0.5).changed == (False,)
    assert Decisions().answers([p], [np.array([[0.5001], [0.1]], np.float32)], 0.5).changed == (True,)






def test_two_halves_of_a_recording_join_in_its_order() -> None:
    """``auto``'s fitting and held-out halves, joined for the int8 that ships where its plan does not:
    the recording's feeds, units and streams in the recording's order, as method int8 fits on them."""
    from hatch_shrinkray.samples import Calibration, joined

    seq = Sequencing(("stream:0", "stream:0", "call:1", "stream:2", "stream:2", "call:3"), (("h", "h_out"),),
                     ((0, 1), (3, 4)))
    feeds = [{"x": np.array([float(i)])} for i in range(6)]
    fit, held = seq.folds(2)
    halves = [Calibration([feeds[i] for i in part], seq.subset(part), tuple(part)) for part in (fit, held)]
    whole = joined(*halves)
    assert [float(f["x"][0]) for f in whole.feeds] == [0, 1, 2, 3, 4, 5]
    assert whole.seq == seq and whole.index == (0, 1, 2, 3, 4, 5)
    unordered = joined(Calibration(halves[0].feeds, halves[0].seq), halves[1])
    assert len(unordered) == 6 and sorted(unordered.seq.units) == sorted(seq.units) and len(unordered.seq.streams) == 2




def test_batched_time_major_logits_are_read_line_by_line() -> None:
    """captcha-whisperer's ``recognize_batch`` returns ``[20, N, 37]``: with N images in, the batch is
    the second axis, and each of the N lines is decoded from its 20 frames."""
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((20, 3, 37)).astype(np.float32)
    logits[:, :, 36] += 6.0
    for t, n, c in ((2, 0, 4), (6, 0, 9), (3, 1, 17), (9, 1, 2), (12, 2, 30), (15, 2, 8)):
        logits[t, n, c] += 12.0
    images = {"image": np.zeros((3, 3, 60, 160), np.float32)}
    calls = calls_of([[logits]], [images])
    assert calls.batches == (3,)
    judge = detect([logits], calls=calls)
    assert isinstance(judge, Sequences) and judge.time_major and judge.blank == 36
    assert decode(logits, 36, time_major=True) == [(4, 9), (17, 2), (30, 8)]
    other = logits.copy()
    other[12, 2, 30] -= 24.0
    assert judge.answers([logits], [other], 0.5).changed_items == 1 and judge.answers([logits], [other], 0.5).items == 3
