"""Proof that a server serves the weights the trainer holds: a log-probability fingerprint.

A path, a model name or a server's own weights id says what a server was *told* to load, not what
it computes with. After every weight update the run sends fixed probe prompts to the server and
asks for the log-probability of each of their tokens (teacher-forced ``prompt_logprobs``, as
vLLM and ``whale serve`` return them), computes the same numbers with the trainer's model in
its own process, and refuses to go on when they differ by more than a tolerance
(``backend.fingerprint_tol``: the largest absolute difference of one token's log-probability, in
nats). Equal weights differ only by kernel numerics (fp32 here: about 1e-6); a server left on
older weights differs by the whole update.

The trainer's side is computed with its weights rounded to the dtype the server holds them in
(``backend.vllm.dtype`` for a vLLM server, else ``model.dtype``). Against the fp32 master weights
a bf16 server differs by bf16 rounding alone, 0.17-0.21 nats on SmolLM2's probes on CPU and on an
H200, while one RSFT step at lr 1e-5 moved them 0.035 and at 1e-6 0.0035
(``bench/fingerprint_noise.py``): no tolerance could tell a fresh bf16 server from a stale one
that way. Rounded alike, equal weights agree up to kernel numerics: exactly for the transformers
backend in bf16, but a bf16 vLLM on CPU computes otherwise and differs by about as much as a stale
server does, so updates served that way cannot be verified (measured in docs/benchmarks.md).
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


# Said when the very first check fails: there the server was just started on the trainer's weights,
# so a gap is as likely the kernels' numerics as a wrong model.
FIRST_CHECK = (". This was the first check, on the weights the server started with: if it serves the right "
               "model, its kernels' numerics alone exceed the tolerance (a bf16 vLLM on CPU does: "
               "docs/benchmarks.md); serve in float32 or raise backend.fingerprint_tol, which then also "
               "passes updates smaller than it")


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


class Rounded:
    """The trainer's model with its weights in the dtype a server holds them in, as that server
    computes: the model itself when it already is, else one copy on its device, refreshed from the
    trainer's weights at every check (a bf16 copy of an fp32 trainer: half its weight memory)."""

    def __init__(self, dtype: str):
        self.dtype, self.copy = getattr(torch, dtype), None

    def __call__(self, model):
        if next(model.parameters()).dtype == self.dtype:
            return model
        if self.copy is None:
            from transformers import AutoModelForCausalLM

            # Built and loaded, not ``copy.deepcopy(model).to(dtype)``: the trainer's model copied
            # that way gave the fp32 numbers exactly (measured on CPU; cause not established).
            with torch.device(model.device):
                self.copy = AutoModelForCausalLM.from_config(model.config, dtype=self.dtype)
        self.copy.load_state_dict(model.state_dict())  # cast on copy
        return self.copy


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
    """Compare the fingerprint of the backend (of each of its replicas) with ``model``'s (the
    trainer's in the served dtype: ``Rounded``); raise past ``tolerance``. ``previous``: the last
    check, to say whether this one could see the update (one below the served dtype's resolution
    cannot be seen)."""
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
                "path) before going on" + ("" if previous else FIRST_CHECK))
        worst = max(worst, d)
    return Verdict(worst, distance(local, previous.local) if previous else None, local)
