"""The conditions a run can compare: what each one trains, searches and how its phases end."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Condition:
    name: str
    trains: bool  # has weight phases (online RSFT)
    searches: bool  # has harness phases (proposer iterations)
    adaptive: bool = False  # phases end by the patience rules instead of fixed lengths
    prompt_only: bool = False  # a candidate may differ from the incumbent only in prompt text
    stages: bool = False  # the whole weight budget first, then the whole harness budget
    summary: str = ""


CONDITIONS: dict[str, Condition] = {c.name: c for c in (
    Condition("weight_only", trains=True, searches=False,
              summary="RSFT under the fixed seed harness h0, in phase-sized chunks"),
    Condition("harness_only", trains=False, searches=True, summary="harness search over the frozen base model"),
    Condition("whale", trains=True, searches=True,
              summary="fixed (E, I) alternation, weight phase first; no harness phase after the last"),
    Condition("adaptive_whale", trains=True, searches=True, adaptive=True,
              summary="alternation whose phases end by the patience rules"),
    Condition("stagewise", trains=True, searches=True, stages=True,
              summary="the whole weight budget, then the whole harness budget, each at its best point"),
    Condition("prompt_only", trains=True, searches=True, prompt_only=True,
              summary="as whale, but candidates may change only prompt text (Fast-Slow-style)"),
)}


def get_condition(name: str) -> Condition:
    if name not in CONDITIONS:
        raise ValueError(f"unknown condition {name!r}; choose one of {', '.join(CONDITIONS)}")
    return CONDITIONS[name]
