"""A backend that answers only the contexts it has on record: the parent's own episodes replayed.

Built from stored rollouts (their token ids and the mask of what the model generated): each run
of generated tokens is the reply to the context before it. A request whose context is not on
record gets an empty reply and counts as a divergence, so a harness that renders anything its
parent did not render shows up as different without any model compute. What each request asked
for besides its context (token limit, stops, choices) is kept in ``asked``: a harness that renders
the same context but lets the model write longer differs too.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling, stop_hit

RECORDED_WEIGHTS = "recorded"


def replies(token_ids: Sequence[int], mask: Sequence[int]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(context, reply) for each run of generated tokens of one episode."""
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((tuple(token_ids[:start]), tuple(token_ids[start:i])))
            start = None
    return out


class RecordedBackend(Backend):
    weights_id = RECORDED_WEIGHTS

    def __init__(self, tokenizer, episodes: Iterable[tuple[Sequence[int], Sequence[int]]]):
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.book: dict[tuple[int, ...], tuple[int, ...] | None] = {}
        for token_ids, mask in episodes:
            for context, reply in replies(token_ids, mask):
                # two records that answer one context differently cannot be replayed: no answer
                known = self.book.get(context, reply)
                self.book[context] = reply if known == reply else None
        self.divergences = 0
        self.asked: dict[tuple[int, ...], tuple] = {}

    def generate(self, requests: list[GenRequest], sampling: Sampling) -> list[GenResult]:
        return [self._one(r) for r in requests]

    def _one(self, req: GenRequest) -> GenResult:
        self.asked[tuple(req.ids)] = (req.max_new_tokens, tuple(req.stop), tuple(req.choices or ()))
        reply = self.book.get(tuple(req.ids))
        if reply is None:
            self.divergences += 1
            return GenResult([self.eos_id], "eos")
        ids = list(reply)
        if ids and ids[-1] == self.eos_id:
            return GenResult(ids, "eos")
        finish = "stop" if stop_hit(self.tokenizer.decode(ids), req.stop) else "length"
        return GenResult(ids, finish)

    def load(self, model_dir: str) -> str:
        return self.weights_id
