"""The key of a batch of rollouts: where it belongs in a run and what produced it.

The store builds the "read back, else roll out" query from it, so a resumed run finds exactly
the rollouts an uninterrupted run drew, and never draws or stores one twice.
"""
from __future__ import annotations

from dataclasses import dataclass

from whale.types import PHASES, RolloutContext


@dataclass(frozen=True)
class RolloutKey:
    run_id: str
    cycle: int
    phase: str
    step: int  # RSFT step, harness iteration (0 = re-check), or test evaluation number
    harness_id: str
    weights_id: str
    example_ids: tuple[str, ...]
    k: int  # samples per example
    seed: int  # the batch seed every rollout's own seed derives from
    # A test evaluation of the same (harness, weights) at an earlier phase boundary is the same
    # measurement: read it back whatever its (cycle, step).
    any_boundary: bool = False

    def __post_init__(self):
        if self.phase not in PHASES:
            raise ValueError(f"unknown phase {self.phase!r}; choose one of {', '.join(PHASES)}")

    @property
    def size(self) -> int:
        return len(self.example_ids) * self.k

    @property
    def context(self) -> RolloutContext:
        """Where new rollouts of this key are recorded."""
        return RolloutContext(self.run_id, self.cycle, self.phase, self.step)
