"""Content ids shared by the engine and the harness archive: a harness is its source's hash, and a
rollout's sampling seed is derived from (run seed, example, sample), so a rerun draws the same."""
from __future__ import annotations

import hashlib


def harness_id(source: str) -> str:
    """The first 12 hex digits of the sha256 of a harness's source."""
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def rollout_seed(seed: int, example_id: str, sample_idx: int) -> int:
    digest = hashlib.sha256(f"{seed}:{example_id}:{sample_idx}".encode()).digest()
    return int.from_bytes(digest[:6], "big")
