"""Pieces of the replay (duplicate) tests: a domain with only a harness split, episodes as the store keeps them."""
from __future__ import annotations

from domains import get_domain
from whale.types import Rollout


def harness_split_domain(name: str, tmp_path_factory, n: int = 6):
    """Domain ``name`` prepared with ``n`` harness-split examples and nothing else."""
    d = get_domain(name, str(tmp_path_factory.mktemp(name)))
    d.prepare({"weight": 0, "harness": n, "test": 0}, seed=0)
    return d


def as_recorded(rollouts: list[Rollout]) -> list[dict]:
    """The fields of each episode that ``Store.recorded_episodes`` returns, what a candidate replays."""
    return [{"example_id": r.example_id, "token_ids": r.token_ids, "mask": r.mask, "reward": r.reward,
             "stop_reason": r.stop_reason} for r in rollouts]
