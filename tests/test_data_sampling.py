"""binary_labels and stratified_subsample."""

from __future__ import annotations

import numpy as np
import pytest

from zoframe.errors import InvalidInputError
from zoframe_datasets import binary_labels, stratified_subsample


def test_binary_labels_maps_larger_label_to_plus_one() -> None:
    y = np.array([1.0, 2.0, 2.0, 1.0])
    out = binary_labels(y)
    assert out.tolist() == [-1.0, 1.0, 1.0, -1.0] and out.dtype == np.float64
    assert y.tolist() == [1.0, 2.0, 2.0, 1.0]  # not mutated
    assert binary_labels([0, 1, 1]).tolist() == [-1.0, 1.0, 1.0]
    assert binary_labels(np.array([-1.0, 1.0])).tolist() == [-1.0, 1.0]


@pytest.mark.parametrize(
    ("y", "match"),
    [
        ([1.0, 1.0, 1.0], r"exactly two distinct labels, got 1 \(1\)"),
        ([1.0, 2.0, 3.0, 4.0], r"got 4 \(1, 2, 3, 4\).*np.where"),
        ([1.0, np.nan], "NaN or infinity"),
        ([[1.0, -1.0]], "1-D"),
    ],
)
def test_binary_labels_rejects_bad_input(y: list[float], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        binary_labels(y)


def test_stratified_subsample_exact_counts_sorted_no_replacement() -> None:
    y = np.where(np.arange(1000) % 4 == 0, 1.0, -1.0)
    idx = stratified_subsample(y, n=200, pos_fraction=0.25, rng=np.random.default_rng(0))
    assert idx.shape == (200,)
    assert np.all(np.diff(idx) > 0)  # sorted and distinct
    assert int(np.sum(y[idx] == 1.0)) == 50 and int(np.sum(y[idx] == -1.0)) == 150
    again = stratified_subsample(y, n=200, pos_fraction=0.25, rng=np.random.default_rng(0))
    other = stratified_subsample(y, n=200, pos_fraction=0.25, rng=np.random.default_rng(1))
    assert np.array_equal(idx, again) and not np.array_equal(idx, other)
    # rounding: floor(n * f + 0.5)
    idx = stratified_subsample(y, n=7, pos_fraction=0.5, rng=np.random.default_rng(0))
    assert int(np.sum(y[idx] == 1.0)) == 4
    # None keeps the data's own share (25 %)
    idx = stratified_subsample(y, n=100, rng=np.random.default_rng(0))
    assert int(np.sum(y[idx] == 1.0)) == 25
    # all of one class
    idx = stratified_subsample(y, n=10, pos_fraction=1.0, rng=np.random.default_rng(0))
    assert np.all(y[idx] == 1.0)


def test_stratified_subsample_is_uniform_within_each_class() -> None:
    y = np.array([1.0] * 10 + [-1.0] * 30)
    hits = np.zeros(40)
    rng = np.random.default_rng(123)
    draws = 4000
    for _ in range(draws):
        hits[stratified_subsample(y, n=8, pos_fraction=0.5, rng=rng)] += 1
    # each positive is drawn with probability 4/10, each negative with 4/30; binomial sd <= 0.008
    assert np.max(np.abs(hits[:10] / draws - 0.4)) < 0.035
    assert np.max(np.abs(hits[10:] / draws - 4 / 30)) < 0.025


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 600, "pos_fraction": 0.5}, r"cannot draw 300 positives and 300 negatives.*250 positives and 750 negatives"),
        ({"n": 0, "pos_fraction": 0.5}, "n must be a positive integer"),
        ({"n": 10, "pos_fraction": 1.5}, r"pos_fraction must lie in \[0, 1\]"),
    ],
)
def test_stratified_subsample_rejects_bad_input(kwargs: dict[str, float], match: str) -> None:
    y = np.where(np.arange(1000) % 4 == 0, 1.0, -1.0)
    with pytest.raises(InvalidInputError, match=match):
        stratified_subsample(y, rng=np.random.default_rng(0), **kwargs)  # type: ignore[arg-type]


def test_stratified_subsample_needs_pm_labels_and_a_generator() -> None:
    with pytest.raises(InvalidInputError, match="binary_labels"):
        stratified_subsample(np.array([1.0, 2.0]), n=1, pos_fraction=0.5, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="numpy Generator"):
        stratified_subsample(np.array([1.0, -1.0]), n=1, pos_fraction=0.5, rng=0)  # type: ignore[arg-type]
