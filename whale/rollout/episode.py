"""One episode's state in the rollout engine: its context, what each author wrote, why it ended."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from harnesses.contract import Prompt
from whale.types import Example


@dataclass
class Episode:
    example: Example
    sample_idx: int
    seed: int
    env: object
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    prompt: Prompt | None = None
    turns: int = 0
    tool_calls: int = 0
    generated: int = 0
    max_turns: int = 1
    token_budget: int = 1
    last_finish: str = ""
    clamped: dict = field(default_factory=dict)  # harness values over an engine cap: name -> [asked, used]
    events: list[tuple[str, str]] = field(default_factory=list)  # (author, text) for the leak check
    completion: str = ""  # what the model wrote in its last turn, without the harness's prefix
    unauthored: str | None = None  # why a tool call of the harness was not the model's action
    stop_reason: str | None = None
    error: str | None = None
    session: str | None = None  # the backend's key for this episode's kept keys and values
    started: float = field(default_factory=time.perf_counter)
    ended: float = 0.0

    @property
    def live(self) -> bool:
        return self.stop_reason is None

    def end(self, reason: str, error: str | None = None) -> None:
        if self.live:
            self.stop_reason, self.error, self.ended = reason, error, time.perf_counter()

    def extend(self, ids: list[int], generated: bool) -> None:
        self.ids += ids
        self.mask += [int(generated)] * len(ids)


def as_text(data) -> str:
    """An observation or tool arguments as the text the leak checks search: every value, one per
    line, as written (not JSON, whose escapes would hide a copied line break or quote)."""
    if isinstance(data, dict):
        return "\n".join(as_text(v) for v in data.values())
    if isinstance(data, list | tuple):
        return "\n".join(as_text(v) for v in data)
    return "" if data is None else str(data)
