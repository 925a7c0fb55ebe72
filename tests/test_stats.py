"""Bootstrap intervals: they cover the truth at about their level, pairing narrows differences."""
from __future__ import annotations

import numpy as np
import pytest

from whale.stats import difference, estimate


def test_intervals_cover_the_true_mean_at_about_95_percent():
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(200):
        p = rng.uniform(0.1, 0.9, size=40)  # a fresh test split: each example's own solve rate, mean 0.5
        scores = rng.binomial(4, p) / 4  # mean@4 per example
        e = estimate(scores, n=1000, seed=trial)
        covered += e.lo <= 0.5 <= e.hi
    # the interval is for the population the examples are drawn from; 200 trials: within a few points
    assert 0.88 <= covered / 200 <= 0.99, covered


def test_pairing_finds_a_small_consistent_gain_that_separate_intervals_miss():
    rng = np.random.default_rng(1)
    base = rng.binomial(4, rng.uniform(0, 1, size=32)) / 4
    better = np.clip(base + 0.0625 * (rng.uniform(size=32) < 0.8), 0, 1)  # a little better almost everywhere
    a, b = estimate(better), estimate(base)
    assert a.lo < b.hi  # the two intervals overlap...
    d = difference(better, base)
    assert d.significant and d.lo > 0  # ...but the paired difference excludes 0


def test_identical_scores_are_not_significant_and_seeds_are_resampled():
    rng = np.random.default_rng(2)
    x = rng.binomial(4, 0.5, size=(3, 24)) / 4
    same = difference(x, x)
    assert same.mean == 0 and not same.significant
    shuffled = difference(x, x[::-1])  # other seeds, same examples: a difference of seed noise only
    assert shuffled.n_seeds == 3 and shuffled.lo < 0 < shuffled.hi
    assert estimate(x).n_seeds == 3 and estimate(x[0]).n_seeds == 1


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same test examples"):
        difference(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="without gaps"):
        estimate([0.5, float("nan")])
