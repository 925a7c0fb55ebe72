"""The harness contract's choice constraint inside a vLLM server, as the transformers engine applies it.

Loaded by the vLLM server (``--logits-processors whale_vllm_choice:ChoiceProcessor``) from its
own environment, so this file imports only vllm and torch. A request carries its choices as
token-id sequences, each ending with the end token, in ``vllm_xargs.whale_choices`` (a JSON string:
xargs take only scalars and flat lists). At each step the row may continue only a sequence that
its tokens so far are a prefix of: the same canonical tokenisations the transformers engine
allows, where vLLM's structured outputs would accept any spelling of a choice.
"""
from __future__ import annotations

import json

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

KEY = "whale_choices"


def parse(params: SamplingParams) -> list[list[int]] | None:
    raw = (params.extra_args or {}).get(KEY)
    if raw is None:
        return None
    seqs = json.loads(raw) if isinstance(raw, str) else raw
    if (not isinstance(seqs, list) or not seqs
            or not all(isinstance(s, list) and s and all(isinstance(t, int) for t in s) for s in seqs)):
        raise ValueError(f"{KEY} must be a JSON list of non-empty token-id lists")
    return seqs


class Constraint:
    def __init__(self, seqs: list[list[int]]):
        self.seqs = seqs

    def __call__(self, output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        n = len(output_ids)
        allowed = sorted({s[n] for s in self.seqs if len(s) > n and s[:n] == output_ids})
        if not allowed:  # cannot happen while the row follows the constraint; leave the row alone
            return logits
        masked = torch.full_like(logits, float("-inf"))
        index = torch.tensor(allowed, device=logits.device)
        masked[index] = logits[index]
        return masked


class ChoiceProcessor(AdapterLogitsProcessor):
    @classmethod
    def validate_params(cls, params: SamplingParams):
        parse(params)

    def is_argmax_invariant(self) -> bool:
        return False

    def new_req_logits_processor(self, params: SamplingParams):
        seqs = parse(params)
        return Constraint(seqs) if seqs else None
