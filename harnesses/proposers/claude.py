"""The Claude proposer: an agentic tool-use session over the Messages API that writes candidates.

Claude reads the archive, the notes, the contract and the harness-split rollouts through the
tools in ``claude_tools`` and submits up to ``M`` candidate modules. Requests are plain
(non-streaming) ``messages.create`` calls with the SDK's own retries switched off: this module
retries 429, 5xx (529 overloaded included), 408/409, time-outs and connection errors with
exponential backoff, honouring ``retry-after`` up to a cap. When the API stays unavailable, or
the session ends without a valid candidate, ``propose`` raises ``ProposerUnavailable``; the
harness phase then falls back to the offline proposer (``propose_with_fallback``).

The key comes from ``ANTHROPIC_API_KEY`` and the endpoint from ``ANTHROPIC_BASE_URL`` (the SDK
reads both); tests pass ``client=anthropic.Anthropic(base_url=..., api_key=...)``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anthropic

from harnesses.proposers.base import Proposal, ProposerContext, ProposerUnavailable, proposer_view
from harnesses.proposers.claude_tools import Workbench
from whale.clients.anthropic import ApiUnavailable, Usage, create_message, estimate_cost, make_client

INSTRUCTIONS = Path(__file__).with_name("instructions.md")

class ClaudeProposer:
    """Writes candidates with Claude; see the module docstring for the failure contract."""

    name = "claude"

    def __init__(self, model: str = "claude-opus-4-7", max_tokens: int = 16000,
                 timeout_s: float = 600, max_turns: int = 40, retries: int = 4,
                 client: anthropic.Anthropic | None = None, backoff_base_s: float = 2.0,
                 max_sleep_s: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                 effort: str | None = None):
        if max_turns < 1 or retries < 1 or max_tokens < 1:
            raise ValueError("max_turns, retries and max_tokens must be positive")
        self.model, self.max_tokens, self.timeout_s = model, max_tokens, timeout_s
        self.max_turns, self.retries = max_turns, retries
        self.backoff_base_s, self.max_sleep_s, self.sleep = backoff_base_s, max_sleep_s, sleep
        self.effort = effort  # output_config.effort (low … max); None leaves the API default
        self._client = client

    def propose(self, ctx: ProposerContext) -> Proposal:
        try:
            client = make_client(self._client, self.timeout_s)
        except ApiUnavailable as e:
            raise ProposerUnavailable(str(e), self.model) from e
        view = proposer_view(ctx)
        try:
            bench = Workbench(ctx, view)
            usage, transcript = Usage(), []
            try:
                self._session(client, ctx, bench, usage, transcript)
            except ApiUnavailable as e:
                raise self._unavailable(str(e), usage, transcript) from e
        finally:
            view.close()
        if not bench.candidates:
            raise self._unavailable(f"no valid candidate after {self.max_turns} turns", usage, transcript)
        return Proposal(candidates=bench.candidates, proposer=self.name, model=self.model,
                        input_tokens=usage.input_tokens, output_tokens=usage.output,
                        cost_usd=estimate_cost(self.model, usage), transcript=transcript)

    def _unavailable(self, reason: str, usage: Usage, transcript: list | None = None) -> ProposerUnavailable:
        return ProposerUnavailable(reason, self.model, usage.input_tokens, usage.output,
                                   estimate_cost(self.model, usage), transcript)

    def _session(self, client, ctx: ProposerContext, bench: Workbench, usage: Usage,
                 messages: list) -> None:
        messages.append({"role": "user", "content": opening(ctx)})
        request = {"model": self.model, "max_tokens": self.max_tokens, "system": system_prompt(ctx),
                   "tools": bench.specs(), "messages": messages, "timeout": self.timeout_s,
                   "cache_control": {"type": "ephemeral"}}
        if self.effort:
            request["output_config"] = {"effort": self.effort}
        for _ in range(self.max_turns):
            reply = create_message(client, request, self.retries, self.backoff_base_s,
                                   self.max_sleep_s, self.sleep)
            usage.add(reply.usage)
            # the API refuses an empty assistant turn in the history
            content = [_block(b) for b in reply.content] or [{"type": "text", "text": "(no output)"}]
            messages.append({"role": "assistant", "content": content})
            calls = [b for b in reply.content if b.type == "tool_use"]
            if not calls:
                if len(bench.candidates) >= ctx.M or (bench.candidates and reply.stop_reason == "end_turn"):
                    return  # done without calling finish
                messages.append({"role": "user", "content": _nudge(reply.stop_reason)})
                continue
            results = []
            for call in calls:
                text, is_error = bench.run(call.name, call.input)
                results.append({"type": "tool_result", "tool_use_id": call.id,
                                "content": text, "is_error": is_error})
            messages.append({"role": "user", "content": results})
            if bench.finished:
                return


def system_prompt(ctx: ProposerContext) -> str:
    notes = ctx.notes_path.read_text() if ctx.notes_path.is_file() else "(none)"
    return f"{INSTRUCTIONS.read_text()}\n\n# Domain notes: {ctx.domain}\n\n{notes}"


def opening(ctx: ProposerContext) -> str:
    incumbent = ctx.archive_dir / f"{ctx.incumbent_id}.py"
    source = incumbent.read_text() if incumbent.is_file() else "(missing from the archive)"
    mode = ("PROMPT-ONLY MODE: change only prompt text; code, numbers and patterns stay as in the "
            "incumbent.\n" if ctx.prompt_only else "")
    return (f"Run {ctx.run_id}, domain {ctx.domain}, cycle {ctx.cycle}, iteration {ctx.iteration}.\n"
            f"{mode}Write {ctx.M} candidate harness(es) with write_candidate, then call finish.\n"
            f"The incumbent is {ctx.incumbent_id}:\n```python\n{source}\n```")


def _nudge(stop_reason: str | None) -> str:
    if stop_reason == "max_tokens":
        return ("Your reply was cut at the output limit. Submit one candidate per write_candidate "
                "call and keep the reasoning short.")
    return "Continue with the tools: write_candidate for each candidate, then finish."


def _block(block) -> dict:
    """A response content block as a request block (the SDK models carry extra None fields)."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)
