"""Harness proposers: they read the archive and write candidate harnesses.

Four proposers: ``claude`` (the Anthropic Messages API with tools, ``claude.py``), ``openai``
(the same tools over any OpenAI-compatible chat endpoint, ``openai_chat.py``), ``offline``
(failure-directed edits over domain primitives, no network) and ``replay`` (what another run
recorded, ``replay.py``). The harness phase picks one with
``resolve_proposer`` and calls it through ``propose_with_fallback``: when Claude is unavailable
(no key, API errors after its retries, or no valid candidate) the iteration is not lost, the
offline proposer writes the candidates and the proposal records why (``fallback_reason``) and
what the failed Claude call already cost.
"""
from __future__ import annotations

import os

from harnesses.proposers.base import (
    AXES,
    Candidate,
    Proposal,
    Proposer,
    ProposerContext,
    ProposerUnavailable,
    proposer_view,
)

__all__ = [
    "AXES", "Candidate", "Proposal", "Proposer", "ProposerContext", "ProposerUnavailable",
    "proposer_view", "resolve_proposer", "propose_with_fallback",
]


def resolve_proposer(setting: str) -> str:
    """``auto`` means claude when ANTHROPIC_API_KEY is set, else offline (params.yaml)."""
    if setting == "auto":
        return "claude" if os.environ.get("ANTHROPIC_API_KEY") else "offline"
    if setting not in ("claude", "openai", "offline", "replay"):
        raise ValueError(f"harness_search.proposer must be auto, claude, openai, offline or replay, not {setting!r}")
    return setting


def propose_with_fallback(primary: Proposer, fallback: Proposer, ctx: ProposerContext) -> Proposal:
    """``primary.propose(ctx)``; on ProposerUnavailable, ``fallback``'s proposal.

    The fallback proposal keeps the fallback's own name and model, carries the reason, and adds
    the tokens and cost the failed primary call spent, so the proposer_calls table stays honest.
    """
    try:
        return primary.propose(ctx)
    except ProposerUnavailable as e:
        proposal = fallback.propose(ctx)
        proposal.fallback_reason = f"{primary.name}: {e.reason}"
        proposal.input_tokens += e.input_tokens
        proposal.output_tokens += e.output_tokens
        proposal.cost_usd += e.cost_usd
        proposal.failed_transcript = e.transcript
        return proposal
