"""Uncertainty of test scores: bootstrap confidence intervals, paired where two things are compared.

A score is a matrix of per-example mean rewards: one row per run seed, one column per test
example (the same examples, in the same order, in every row). Its estimate is the grand mean;
its interval comes from resampling seeds (rows) and, within them, examples (columns), both with
replacement; with one seed only examples are resampled. A *difference* between two scores is
paired: the same resampled examples (and seeds) are used on both sides, so the variation that
the two share (easy and hard examples) cancels. A difference is significant at level 95 % when
its interval excludes 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 4000
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    mean: float
    lo: float
    hi: float
    n_examples: int
    n_seeds: int

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.lo:.3f}, {self.hi:.3f}]"


@dataclass(frozen=True)
class Difference(Estimate):
    @property
    def significant(self) -> bool:
        return self.lo > 0 or self.hi < 0


def _matrix(scores) -> np.ndarray:
    m = np.asarray(scores, dtype=float)
    m = m[None, :] if m.ndim == 1 else m
    if m.ndim != 2 or m.size == 0 or np.isnan(m).any():
        raise ValueError("scores must be a non-empty (seeds x examples) matrix without gaps")
    return m


def _resampled_means(m: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    seeds, examples = m.shape
    rows = rng.integers(0, seeds, size=(n, seeds)) if seeds > 1 else np.zeros((n, 1), dtype=int)
    cols = rng.integers(0, examples, size=(n, examples))
    # mean over the resampled seeds of the mean over the resampled examples, one value per draw
    return np.stack([m[rows[:, s]][np.arange(n)[:, None], cols].mean(axis=1) for s in range(rows.shape[1])]).mean(0)


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, [tail, 1 - tail])
    return float(lo), float(hi)


def estimate(scores, level: float = LEVEL, n: int = BOOTSTRAP, seed: int = 0) -> Estimate:
    """The mean score with its bootstrap interval."""
    m = _matrix(scores)
    lo, hi = _interval(_resampled_means(m, np.random.default_rng(seed), n), level)
    return Estimate(float(m.mean()), lo, hi, m.shape[1], m.shape[0])


def difference(a, b, level: float = LEVEL, n: int = BOOTSTRAP, seed: int = 0) -> Difference:
    """``a - b`` with a paired bootstrap interval (same examples; seeds paired by position)."""
    ma, mb = _matrix(a), _matrix(b)
    if ma.shape[1] != mb.shape[1]:
        raise ValueError(f"paired scores need the same test examples ({ma.shape[1]} vs {mb.shape[1]})")
    seeds = min(ma.shape[0], mb.shape[0])
    d = ma[:seeds] - mb[:seeds]
    lo, hi = _interval(_resampled_means(d, np.random.default_rng(seed), n), level)
    return Difference(float(d.mean()), lo, hi, d.shape[1], seeds)
