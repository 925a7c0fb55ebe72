"""Proof that a server serves the weights the trainer holds: a log-probability fingerprint.

A path, a model name or a server's own weights id says what a server was *told* to load, not what
it computes with. After every weight update the run sends fixed probe prompts to the server and
asks for the log-probability of each of their tokens (teacher-forced ``prompt_logprobs``, as
vLLM and ``whale serve`` return them), computes the same numbers with the trainer's model in
its own process, and refuses to go on when they differ by more than a tolerance
(``backend.fingerprint_tol``: the largest absolute difference of one token's log-probability, in
nats). Equal weights differ only by kernel numerics (fp32 here: about 1e-6; a bf16 GPU server
against an fp32 trainer needs a looser bound); a server left on older weights differs by the
whole update.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# Fixed texts of several kinds, so that any change of the weights moves some of their tokens.
PROBES = (
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Puzzle: white to move. 1. Qh7+ Kf8 2. Qh8#",
    "Question: what is 17 times 23? Answer: 391",
)


class WeightsMismatch(RuntimeError):
    """The served model is not the trainer's: a stale, partial or wrong weight update."""


def probe_ids(tokenizer) -> list[list[int]]:
    return [tokenizer.encode(text) for text in PROBES]


@torch.no_grad()
def local_logprobs(model, probes: list[list[int]]) -> list[list[float]]:
    """log p(token_i | tokens_<i) for every probe token after the first, in this process: one
    right-padded batch (causal attention: padding after a token never changes its log-probability)."""
    was_training = model.training
    model.eval()
    width = max(len(ids) for ids in probes)
    x = torch.zeros((len(probes), width), dtype=torch.long)
    mask = torch.zeros_like(x)
    for i, ids in enumerate(probes):
        x[i, :len(ids)], mask[i, :len(ids)] = torch.tensor(ids), 1
    x, mask = x.to(model.device), mask.to(model.device)
    logp = torch.log_softmax(model(input_ids=x, attention_mask=mask).logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, x[:, 1:].unsqueeze(-1)).squeeze(-1).cpu()
    if was_training:
        model.train()
    return [picked[i, :len(ids) - 1].tolist() for i, ids in enumerate(probes)]


def distance(served: list[list[float]], local: list[list[float]]) -> float:
    """The largest absolute difference between the two fingerprints (inf when their shapes differ)."""
    if [len(s) for s in served] != [len(s) for s in local]:
        return float("inf")
    return max((abs(a - b) for s, loc in zip(served, local, strict=True) for a, b in zip(s, loc, strict=True)),
               default=0.0)


@dataclass(frozen=True)
class Verdict:
    """One fingerprint check: the largest gap between a replica and the trainer, and how far the
    update moved the trainer's own probe log-probabilities (None for the first check)."""

    distance: float
    moved: float | None
    local: list[list[float]]

    def resolves(self, tolerance: float) -> bool:
        """Whether the check could tell the new weights from the previous ones: an update that moved
        the probes by no more than the tolerance (a tiny learning rate, a loose bf16 tolerance) would
        pass against a server that kept the old weights too."""
        return self.moved is None or self.moved > tolerance

    def describe(self, tolerance: float) -> str:
        text = f"served weights within {self.distance:.2g} nats of the trainer's"
        if self.moved is not None:
            text += f", the update moved them {self.moved:.2g}"
        if not self.resolves(tolerance):
            text += f" (at most the tolerance {tolerance:g}: this update is not verified)"
        return text


def verify(backend, model, tokenizer, tolerance: float, what: str, previous: Verdict | None = None) -> Verdict:
    """Compare the fingerprint of the backend (of each of its replicas) with ``model``'s; raise past
    ``tolerance``. ``previous``: the last check, to say whether this one could see the update."""
    probes = probe_ids(tokenizer)
    local = local_logprobs(model, probes)
    worst = 0.0
    for server in getattr(backend, "replicas", [backend]):
        d = distance(server.prompt_logprobs(probes), local)
        if d > tolerance:
            raise WeightsMismatch(
                f"{server.base_url} does not serve {what}: its log-probabilities of the probe prompts "
                f"differ from the trainer's by up to {d:.3g} nats (tolerance {tolerance:g}). The server kept "
                "older weights or loaded others; restart it on the checkpoint (or give it a weight-update "
                "path) before going on")
        worst = max(worst, d)
    return Verdict(worst, distance(local, previous.local) if previous else None, local)
