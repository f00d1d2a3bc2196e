"""The package's own tests. They call the model the way users do, so they are also where
hatch-shrinkray records real inputs for verifying the shrunk model:

    hatch-shrinkray record --output data/shrinkray-inputs -- python -m pytest tests
"""

from __future__ import annotations

from pathlib import Path

import digits_classifier
import numpy as np
import pytest

TEST_SET = Path(__file__).resolve().parents[1] / "data" / "digits_test.npz"


@pytest.fixture(scope="module")
def test_set() -> tuple[np.ndarray, np.ndarray]:
    with np.load(TEST_SET) as data:
        return data["pixels"], data["labels"]


def test_accuracy_on_the_held_out_test_set(test_set: tuple[np.ndarray, np.ndarray]) -> None:
    pixels, labels = test_set
    predicted = np.concatenate([digits_classifier.predict(pixels[i:i + 50]) for i in range(0, len(pixels), 50)])
    assert (predicted == labels).mean() >= 0.97


def test_every_digit_is_recognised(test_set: tuple[np.ndarray, np.ndarray]) -> None:
    pixels, labels = test_set
    for digit in range(10):
        mine = pixels[labels == digit]
        assert (digits_classifier.predict(mine) == digit).mean() >= 0.9, digit


def test_single_images_in_every_accepted_shape(test_set: tuple[np.ndarray, np.ndarray]) -> None:
    pixels, labels = test_set
    image = pixels[7]
    assert digits_classifier.predict(image)[0] == labels[7]
    assert digits_classifier.predict(image.reshape(8, 8))[0] == labels[7]


def test_probabilities_are_a_distribution(test_set: tuple[np.ndarray, np.ndarray]) -> None:
    proba = digits_classifier.predict_proba(test_set[0][:20])
    assert proba.shape == (20, 10) and proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)


def test_raw_intensities_are_scaled() -> None:
    raw = np.arange(64).reshape(1, 64) % 17
    assert digits_classifier.scale_pixels(raw).max() <= 1.0
