"""The null policy: a backend that does not look at its input.

Where a turn has a choice constraint it picks uniformly among the choices; otherwise it writes
random tokens (uniform over the vocabulary's ordinary tokens, a random length up to the turn's
limit, cut at a stop string). A harness that scores under this policy earns its reward without
the model (``solves_without_model``). It costs no model compute.
"""
from __future__ import annotations

import random

from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling

NULL_WEIGHTS = "null-policy"


class NullBackend(Backend):
    weights_id = NULL_WEIGHTS

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        special = set(tokenizer.all_special_ids)
        self.vocab = [i for i in range(len(tokenizer)) if i not in special]

    def generate(self, requests: list[GenRequest], sampling: Sampling) -> list[GenResult]:
        return [self._one(r) for r in requests]

    def _one(self, req: GenRequest) -> GenResult:
        rng = random.Random(req.seed)
        if req.choices:
            return GenResult(self.tokenizer.encode(rng.choice(req.choices), add_special_tokens=False) + [self.eos_id],
                             "eos")
        n = rng.randint(1, max(1, req.max_new_tokens))
        ids = [rng.choice(self.vocab) for _ in range(n)]
        text = self.tokenizer.decode(ids)
        for stop in req.stop:
            at = text.find(stop)
            if at >= 0:
                return GenResult(self.tokenizer.encode(text[: at + len(stop)], add_special_tokens=False), "stop")
        return GenResult(ids, "length")

    def load(self, model_dir: str) -> str:
        return self.weights_id
