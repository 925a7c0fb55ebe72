"""A proposer over any OpenAI-compatible chat-completions endpoint with tool calling.

The same session as the Claude proposer (``claude.py``: instructions, opening, the tools of
``claude_tools.Workbench``, candidates checked as they are written), spoken in the OpenAI
function-calling format, so a code model served next to the run (``vllm serve MODEL
--enable-auto-tool-choice --tool-call-parser ...``) can search harnesses with no vendor API.
Plain HTTP (httpx). 429, 408/409, 5xx, time-outs and connection errors are retried with
exponential backoff; other errors and a session with no valid candidate raise
ProposerUnavailable (with the session's messages, which the run saves), and the harness phase
falls back to the offline proposer. The key, when the server wants one, comes from
``OPENAI_API_KEY``. ``tool_choice="required"`` asks the server to make every reply a tool call
(vLLM constrains decoding to the tools' call format; a call cut at ``max_tokens`` still comes
back as text and is nudged), for models not trained to call tools; ``auto`` leaves the choice to
the model, as the OpenAI API does.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import httpx

from harnesses.proposers.base import Proposal, ProposerContext, ProposerUnavailable, proposer_view
from harnesses.proposers.claude import _nudge, opening, system_prompt
from harnesses.proposers.claude_tools import Workbench

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
TOOL_CHOICES = ("auto", "required")


class OpenAIProposer:
    name = "openai"

    def __init__(self, base_url: str, model: str, max_tokens: int = 8000, timeout_s: float = 600,
                 max_turns: int = 40, retries: int = 4, api_key: str | None = None,
                 backoff_base_s: float = 2.0, max_sleep_s: float = 60.0, tool_choice: str = "auto",
                 sleep: Callable[[float], None] = time.sleep):
        if max_turns < 1 or retries < 1 or max_tokens < 1:
            raise ValueError("max_turns, retries and max_tokens must be positive")
        if tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {TOOL_CHOICES}, not {tool_choice!r}")
        self.tool_choice = tool_choice
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.timeout_s = model, max_tokens, timeout_s
        self.max_turns, self.retries = max_turns, retries
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.backoff_base_s, self.max_sleep_s, self.sleep = backoff_base_s, max_sleep_s, sleep
        self.usage = [0, 0]

    def propose(self, ctx: ProposerContext) -> Proposal:
        self.usage = [0, 0]
        self.messages: list[dict] = []
        view = proposer_view(ctx)
        try:
            bench = Workbench(ctx, view, origin=self.name)
            with httpx.Client(timeout=self.timeout_s) as http:
                self._session(http, ctx, bench, self.messages)
        finally:
            view.close()
        if not bench.candidates:
            raise self._unavailable(f"no valid candidate after {self.max_turns} turns")
        return Proposal(candidates=bench.candidates, proposer=self.name, model=self.model,
                        input_tokens=self.usage[0], output_tokens=self.usage[1], transcript=self.messages)

    def _unavailable(self, reason: str) -> ProposerUnavailable:
        return ProposerUnavailable(reason, self.model, self.usage[0], self.usage[1], transcript=self.messages)

    def _session(self, http: httpx.Client, ctx: ProposerContext, bench: Workbench, messages: list) -> None:
        messages += [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": opening(ctx)}]
        tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["input_schema"]}} for t in bench.specs()]
        for _ in range(self.max_turns):
            reply = self._post(http, {"model": self.model, "messages": messages, "tools": tools,
                                      "tool_choice": self.tool_choice, "max_tokens": self.max_tokens})
            choice = reply["choices"][0]
            message = choice["message"]
            calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content") or "",
                             **({"tool_calls": calls} if calls else {})})
            if not calls:
                if len(bench.candidates) >= ctx.M or (bench.candidates and choice.get("finish_reason") == "stop"):
                    return
                messages.append({"role": "user", "content": _nudge("max_tokens" if choice.get("finish_reason")
                                                                   == "length" else None)})
                continue
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": self._run(bench, call)})
            if bench.finished:
                return

    @staticmethod
    def _run(bench: Workbench, call: dict) -> str:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError as e:
            return f"ERROR: the arguments are not valid JSON ({e})"
        if not isinstance(args, dict):
            return "ERROR: the arguments must be a JSON object"
        text, is_error = bench.run(fn.get("name", ""), args)
        return f"ERROR: {text}" if is_error else text

    def _post(self, http: httpx.Client, body: dict) -> dict:
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        last = ""
        for attempt in range(self.retries):
            try:
                r = http.post(self.url, json=body, headers=headers)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if r.status_code == 200:
                    reply = r.json()
                    usage = reply.get("usage") or {}
                    self.usage[0] += usage.get("prompt_tokens", 0)
                    self.usage[1] += usage.get("completion_tokens", 0)
                    return reply
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code not in RETRY_STATUS:
                    raise self._unavailable(f"{self.url} refused the request ({last})")
            if attempt + 1 < self.retries:
                self.sleep(min(self.max_sleep_s, self.backoff_base_s * 2**attempt))
        raise self._unavailable(f"{self.url} unavailable after {self.retries} attempts ({last})")
