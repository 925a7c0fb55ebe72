"""Several OpenAI-compatible servers (rollout replicas) behind one backend.

Each turn's requests are spread over the replicas by episode (``GenRequest.session``), so an
episode's turns stay on one server and its prefix cache (vLLM's automatic prefix caching) keeps
working; requests without a session go round-robin. Every replica must serve the same weights:
``load`` moves all of them and refuses a replica that reports other weights, and the run's
fingerprint check (``whale/rollout/fingerprint.py``) proves each one separately.
"""
from __future__ import annotations

import zlib
from concurrent.futures import Future

from whale.rollout.backends.base import Backend, GenRequest, Sampling
from whale.rollout.backends.openai import OpenAIBackend


class ReplicatedBackend(Backend):
    concurrent = True

    def __init__(self, replicas: list[OpenAIBackend]):
        if len(replicas) < 2:
            raise ValueError("a replicated backend needs at least two servers")
        self.replicas = replicas
        self.tokenizer = replicas[0].tokenizer
        lengths = [r.context_len for r in replicas if r.context_len]
        self.context_len = min(lengths) if lengths else None
        self.sent = [0] * len(replicas)  # requests sent to each replica
        self._same_weights()

    @property
    def base_url(self) -> str:
        return ", ".join(r.base_url for r in self.replicas)

    @property
    def weights_id(self) -> str:
        return self.replicas[0].weights_id

    def _same_weights(self) -> None:
        ids = {r.base_url: r.weights_id for r in self.replicas}
        if len(set(ids.values())) > 1:
            raise RuntimeError(f"the rollout replicas serve different weights: {ids}")

    def _replica(self, index: int, req: GenRequest) -> int:
        key = req.session if req.session else str(index)
        return zlib.crc32(key.encode()) % len(self.replicas)

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[Future]:
        parts: list[list[int]] = [[] for _ in self.replicas]
        for i, req in enumerate(requests):
            parts[self._replica(i, req)].append(i)
        out: list[Future | None] = [None] * len(requests)
        for k, idx in enumerate(parts):
            for i, future in zip(idx, self.replicas[k].submit([requests[i] for i in idx], sampling), strict=True):
                out[i] = future
            self.sent[k] += len(idx)
        return out

    def load(self, model_dir: str) -> str:
        for r in self.replicas:
            r.load(model_dir)
        self._same_weights()
        return self.weights_id

    def check_serving(self, expected: str) -> None:
        for r in self.replicas:
            r.check_serving(expected)

    def close(self) -> None:
        for r in self.replicas:
            r.close()
