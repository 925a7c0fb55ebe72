"""The Anthropic Messages API as WHALE uses it: a client with our own retry loop, token usage and cost.

Shared by the Claude harness proposer and the optional search-QA judge. The SDK's own retries are
off so that the backoff (429, 5xx, time-outs, connection errors; ``retry-after`` honoured but
capped) is ours and tested against a loopback server.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anthropic

# Approximate list prices, USD per million tokens (input, output), matched by model-name prefix
# (longest first). Cache writes cost 1.25x input, cache reads 0.1x. Unknown models cost 0.
PRICES = {
    "claude-opus-4-7": (5.0, 25.0), "claude-opus-4-6": (5.0, 25.0), "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4": (15.0, 75.0), "claude-sonnet-4": (3.0, 15.0), "claude-haiku-4": (1.0, 5.0),
    "claude-3-7-sonnet": (3.0, 15.0), "claude-3-5-haiku": (0.8, 4.0),
}
RETRY_STATUS = {408, 409, 429}


class ApiUnavailable(RuntimeError):
    """The Messages API did not answer usefully after the allowed attempts."""


@dataclass
class Usage:
    """Tokens summed over the requests of one session."""

    input: int = 0  # uncached input tokens
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0

    def add(self, usage) -> None:
        self.input += usage.input_tokens or 0
        self.cache_write += getattr(usage, "cache_creation_input_tokens", None) or 0
        self.cache_read += getattr(usage, "cache_read_input_tokens", None) or 0
        self.output += usage.output_tokens or 0

    @property
    def input_tokens(self) -> int:
        return self.input + self.cache_write + self.cache_read


def price(model: str) -> tuple[float, float] | None:
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix]
    return None


def estimate_cost(model: str, usage: Usage) -> float:
    """Approximate USD cost of ``usage`` on ``model`` (0.0 for a model not in PRICES)."""
    p = price(model)
    if p is None:
        return 0.0
    inp, out = p
    tokens = usage.input * inp + usage.cache_write * inp * 1.25 + usage.cache_read * inp * 0.1
    return round((tokens + usage.output * out) / 1e6, 6)


def make_client(client: anthropic.Anthropic | None, timeout_s: float) -> anthropic.Anthropic:
    """``client`` (or one from the environment) with the SDK's retries off and our time-out."""
    try:
        if client is None:
            client = anthropic.Anthropic(max_retries=0, timeout=timeout_s)
        else:
            client = client.with_options(max_retries=0, timeout=timeout_s)
    except anthropic.AnthropicError as e:
        raise ApiUnavailable(f"no Anthropic client: {e}") from e
    # without credentials the SDK fails each request with a TypeError: say so once, clearly
    if not (client.api_key or client.auth_token or client.credentials):
        raise ApiUnavailable("no Anthropic credentials: set ANTHROPIC_API_KEY")
    return client


def create_message(client: anthropic.Anthropic, request: dict, retries: int,
                   backoff_base_s: float = 2.0, max_sleep_s: float = 60.0,
                   sleep: Callable[[float], None] = time.sleep):
    """``client.messages.create(**request)`` with up to ``retries`` attempts on transient errors."""
    reason = "no attempt made"
    for attempt in range(max(1, retries)):
        try:
            return client.messages.create(**request)
        except anthropic.APIStatusError as e:
            if e.status_code < 500 and e.status_code not in RETRY_STATUS:
                raise ApiUnavailable(f"HTTP {e.status_code}: {e.api_message or e.message}") from e
            reason, wait = f"HTTP {e.status_code}: {e.api_message or e.message}", _retry_after(e.response)
        except anthropic.APIConnectionError as e:  # time-outs included
            reason, wait = f"{type(e).__name__}: {e.message}", None
        except anthropic.AnthropicError as e:  # not an HTTP answer, not transient
            raise ApiUnavailable(f"{type(e).__name__}: {e}") from e
        if attempt + 1 < max(1, retries):
            sleep(min(max_sleep_s, wait if wait is not None else backoff_base_s * 2 ** attempt))
    raise ApiUnavailable(f"{max(1, retries)} attempts failed; last: {reason}")


def _retry_after(response) -> float | None:
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to the exponential schedule
