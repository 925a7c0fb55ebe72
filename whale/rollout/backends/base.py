"""The backend interface: batched generation of one assistant turn per request, token-exact."""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

FINISH = ("eos", "stop", "length")


@dataclass
class Sampling:
    """Sampling of every rollout; set in params.yaml, never by a harness."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


@dataclass
class GenRequest:
    """Continue ``ids`` (the full context) for one assistant turn."""

    ids: list[int]
    max_new_tokens: int
    seed: int
    stop: list[str] = field(default_factory=list)
    choices: list[str] | None = None
    # The episode this turn belongs to: a backend may keep its keys and values for the next turn.
    session: str | None = None
    # The example the episode solves (the blind null policy answers from another example's context).
    group: str | None = None


@dataclass
class GenResult:
    """The generated token ids (eos included when the model produced it) and why it stopped."""

    ids: list[int]
    finish: str


class Backend:
    """Serves one set of weights. ``weights_id`` is the content hash of what is being served."""

    tokenizer = None
    weights_id: str = ""
    # Tokens the served model takes, prompt and completion together (None: not known); the engine
    # refuses a longer prompt before it is sent.
    context_len: int | None = None
    # True where ``submit`` answers each request on its own (a server): the engine then lets every
    # episode go on as soon as its own turn is back instead of waiting for the turn's slowest.
    concurrent: bool = False

    def generate(self, requests: list[GenRequest], sampling: Sampling) -> list[GenResult]:
        """One turn for every request; a concurrent backend waits for what ``submit`` started."""
        return [f.result() for f in self.submit(requests, sampling)]

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[Future]:
        """Start every request and return at once: one future of a ``GenResult`` per request."""
        raise NotImplementedError(f"{type(self).__name__} generates whole batches only (concurrent is False)")

    def release(self, sessions: list[str]) -> None:
        """The episodes are over: forget anything kept for them."""

    def load(self, model_dir: str) -> str:
        """Serve the checkpoint in ``model_dir``; return the served weights id."""
        raise NotImplementedError

    def check_serving(self, expected: str) -> None:
        """Refuse to go on when the served weights are not the checkpoint we think they are."""
        if self.weights_id != expected:
            raise RuntimeError(f"backend serves weights {self.weights_id}, expected {expected}: stale weights")


def stop_hit(text: str, stops: list[str]) -> bool:
    return any(s in text for s in stops)
