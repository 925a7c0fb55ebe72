"""The record types shared by every phase: examples, verdicts and the one rollout record."""
from __future__ import annotations

from dataclasses import dataclass, field

SPLITS = ("weight", "harness", "test")
PHASES = ("weight", "harness", "eval")
STOP_REASONS = ("answered", "turn_cap", "truncated", "error")


def check_splits(*names: str) -> None:
    """Refuse a split name that is not one of ``SPLITS`` (a typo would otherwise read nothing)."""
    unknown = sorted(set(names) - set(SPLITS))
    if unknown:
        raise ValueError(f"unknown split(s) {', '.join(map(repr, unknown))}; splits are {', '.join(SPLITS)}")


@dataclass(frozen=True)
class Example:
    """One problem. ``public`` is what the environment may show; ``gold`` never leaves trusted code."""

    id: str
    split: str
    public: dict
    gold: dict


@dataclass
class Verdict:
    """A verifier's judgement of a finished rollout. ``formatted``: the answer could be parsed."""

    reward: float
    formatted: bool
    details: dict = field(default_factory=dict)


@dataclass
class RolloutContext:
    """Where a batch of rollouts belongs in a run (the first half of the rollout key)."""

    run_id: str = "adhoc"
    cycle: int = 0
    phase: str = "eval"
    step: int = 0


@dataclass
class Rollout:
    """One episode of one harness with one model on one example: the one record type."""

    run_id: str
    cycle: int
    phase: str
    step: int
    split: str
    example_id: str
    sample_idx: int
    harness_id: str
    weights_id: str
    seed: int
    reward: float = 0.0
    formatted: bool = False
    verdict: dict = field(default_factory=dict)
    turns: int = 0
    tool_calls: int = 0  # actions the environment executed (searches, programs, moves)
    tokens_in: int = 0
    tokens_out: int = 0
    stop_reason: str = "error"
    error: str | None = None
    messages: list[dict] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    latency_s: float = 0.0
