"""The blind null policy: the real model, answering each turn from another example's context.

The uniform null policy (``null.py``) writes random tokens, which a harness can tell from a
language model's text and then help only the model. This one cannot be told apart: every turn is
written by the served model, under the turn's own choices, stops and limits, but conditioned on
the context of an episode of another example in the same batch. It knows nothing of this
example, so a harness that scores under it earns the reward itself. A turn with no other example
in its batch is answered by the uniform null policy.
"""
from __future__ import annotations

import dataclasses

from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling
from whale.rollout.backends.null import NullBackend


class BlindBackend(Backend):
    def __init__(self, backend: Backend):
        self.inner = backend
        self.tokenizer = backend.tokenizer
        self.weights_id = f"blind:{backend.weights_id}"
        self.context_len = backend.context_len
        self.uniform = NullBackend(backend.tokenizer)

    def generate(self, requests: list[GenRequest], sampling: Sampling) -> list[GenResult]:
        swapped, alone = {}, {}
        for i, req in enumerate(requests):
            other = donor(requests, i)
            if other is None:
                alone[i] = req
            else:  # a session of its own: the other episode's is extended by that episode's turns
                swapped[i] = dataclasses.replace(req, ids=other.ids, session=blind_session(req.session))
        out: dict[int, GenResult] = {}
        if swapped:
            out.update(zip(swapped, self.inner.generate(list(swapped.values()), sampling), strict=True))
        if alone:
            out.update(zip(alone, self.uniform.generate(list(alone.values()), sampling), strict=True))
        return [out[i] for i in range(len(requests))]

    def release(self, sessions: list[str]) -> None:
        self.inner.release([*sessions, *(blind_session(s) for s in sessions)])


def blind_session(session: str | None) -> str | None:
    """The session of an episode's blind turns. Its donor's context grows turn by turn, but after
    the stored prompt it holds the donor's own answer, not this episode's: the cache reuses the
    shared part (``PrefixCache.lookup``), so a blind turn prefills about what a model turn does."""
    return None if session is None else f"blind:{session}"


def donor(requests: list[GenRequest], i: int) -> GenRequest | None:
    """The next request after ``i`` (cyclically) from another example, or None."""
    n = len(requests)
    for step in range(1, n):
        other = requests[(i + step) % n]
        if other.group != requests[i].group:
            return other
    return None
