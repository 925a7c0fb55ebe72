"""Summary metrics of a set of rollouts: mean@k and the rates the paper reports."""
from __future__ import annotations

from collections import defaultdict

from whale.types import Rollout


def per_example_means(rollouts: list[Rollout]) -> list[float]:
    """Each example's mean reward over its samples, in first-seen order."""
    per_example = defaultdict(list)
    for r in rollouts:
        per_example[r.example_id].append(r.reward)
    return [sum(v) / len(v) for v in per_example.values()]


def summarize(rollouts: list[Rollout]) -> dict:
    """mean@k = mean over examples of the mean reward over that example's samples."""
    if not rollouts:
        return {"n": 0, "n_examples": 0, "mean_at_k": 0.0, "format_rate": 0.0,
                "truncation_rate": 0.0, "turn_cap_rate": 0.0, "error_rate": 0.0, "mean_turns": 0.0}
    per_example = defaultdict(list)
    for r in rollouts:
        per_example[r.example_id].append(r.reward)
    n = len(rollouts)

    def rate(pred) -> float:
        return round(sum(1 for r in rollouts if pred(r)) / n, 4)

    return {
        "n": n,
        "n_examples": len(per_example),
        "mean_at_k": round(sum(sum(v) / len(v) for v in per_example.values()) / len(per_example), 4),
        "format_rate": rate(lambda r: r.formatted),
        "truncation_rate": rate(lambda r: r.stop_reason == "truncated"),
        "turn_cap_rate": rate(lambda r: r.stop_reason == "turn_cap"),
        "error_rate": rate(lambda r: r.stop_reason == "error"),
        "mean_turns": round(sum(r.turns for r in rollouts) / n, 3),
    }
