"""The archive's frontier, per example (as GEPA keeps one): the harnesses that do best somewhere.

Under one set of weights, a harness is on the frontier when, on at least one harness-split
example, no other harness has a higher mean reward there (and that mean is above zero), and the
examples where it is best are not a strict subset of another frontier harness's. Parents drawn
from it in proportion to how many examples they lead keep harnesses that solve what the
incumbent does not, instead of editing only the single best on average.
"""
from __future__ import annotations

import random

import duckdb

from whale.store.archive_queries import harness_example_means, previous_search_weights


def example_means(con: duckdb.DuckDBPyConnection, weights_id: str) -> dict[str, dict[str, float]]:
    """harness -> example -> mean reward, for `ok` harnesses scored on the harness split under
    ``weights_id`` (the proposer's view of the store)."""
    out: dict[str, dict[str, float]] = {}
    for hid, example, mean in harness_example_means(con, weights_id):
        out.setdefault(hid, {})[example] = mean
    return out


def frontier(means: dict[str, dict[str, float]]) -> dict[str, frozenset[str]]:
    """Frontier harness -> the examples it leads (ties lead together)."""
    examples = sorted({e for per in means.values() for e in per})
    leads: dict[str, set[str]] = {}
    for e in examples:
        best = max(per.get(e, 0.0) for per in means.values())
        if best <= 0:
            continue
        for hid, per in means.items():
            if per.get(e, 0.0) >= best - 1e-9:
                leads.setdefault(hid, set()).add(e)
    return {h: frozenset(s) for h, s in sorted(leads.items())
            if not any(s < other for g, other in leads.items() if g != h)}


def draw(front: dict[str, frozenset[str]], rng: random.Random, exclude: tuple[str, ...] = ()) -> str | None:
    """A frontier harness, in proportion to the examples it leads; None when none is left."""
    pool = [(h, len(s)) for h, s in sorted(front.items()) if h not in exclude]
    if not pool:
        return None
    return rng.choices([h for h, _ in pool], weights=[w for _, w in pool])[0]


def revivals(con: duckdb.DuckDBPyConnection, weights_id: str, incoming: str, top: int) -> list[str]:
    """The ``top`` frontier harnesses (besides ``incoming``) of the latest weights before
    ``weights_id`` that have harness-split scores, best mean first: what a harness phase
    re-scores under new weights beside the incoming harness (``harness_search.rescore_frontier``)."""
    if top <= 0:
        return []
    previous = previous_search_weights(con, weights_id)
    if previous is None:
        return []
    means = example_means(con, previous)
    front = [h for h in frontier(means) if h != incoming]
    return sorted(front, key=lambda h: (-sum(means[h].values()) / len(means[h]), h))[:top]
