"""The checks ``whale serve`` runs on a request before it costs anything.

The server has no authentication, so what one request may cost is bounded up front: the body
size from its Content-Length header (before reading it), the number of completions and their
length and the prompt size (before tokenising or generating), and ``/v1/load`` reads only
checkpoints under the project's own directories. Each refusal is an ``HTTPError`` whose message
says what to change.
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from whale.rollout.backends.base import Sampling

MAX_N = 16  # completions per request (prompts × n)
MAX_BODY_BYTES = 1 << 20
MAX_SEED = (1 << 63) - 1 - MAX_N  # seeds are per completion (seed + i) and must fit a signed 64-bit int
CHARS_PER_TOKEN = 4  # a text prompt longer than this many characters per context token is refused untokenised
LOAD_ROOTS = ("data", "runs")  # relative to the working directory: where /v1/load may read checkpoints


class HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass(frozen=True)
class ServeLimits:
    """What one request may ask for; ``None`` means the served model's context length."""

    max_n: int = MAX_N
    max_tokens: int | None = None
    max_prompt_tokens: int | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    chars_per_token: int = CHARS_PER_TOKEN

    def __post_init__(self):
        caps = (self.max_n, self.max_tokens or 1, self.max_prompt_tokens or 1, self.max_body_bytes,
                self.chars_per_token)
        if min(caps) < 1:
            raise ValueError(f"serve limits must be positive: {self}")


def default_load_roots() -> tuple[Path, ...]:
    return tuple(Path.cwd() / name for name in LOAD_ROOTS)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def body_length(headers, limit: int) -> int:
    """The body's size from its Content-Length header, refused before a byte of it is read."""
    if headers.get("Transfer-Encoding"):
        raise HTTPError(411, "send the body with a Content-Length header (chunked bodies are not accepted)",
                        "LengthRequiredError")
    raw = headers.get("Content-Length")
    if raw is None:
        raise HTTPError(411, "a POST needs a Content-Length header", "LengthRequiredError")
    if not re.fullmatch(r"[0-9]{1,19}", raw.strip()):
        raise HTTPError(400, f"bad Content-Length header {raw!r}")
    size = int(raw)
    if size > limit:
        raise HTTPError(413, f"the body is {size} bytes; this server accepts at most {limit} (--max-body-mb)",
                        "PayloadTooLargeError")
    return size


def load_dir(model_dir, roots: tuple[Path, ...]) -> str:
    """The real path of a checkpoint directory that lies under one of ``roots``.

    Resolved first (realpath), so neither ``..`` nor a symlink placed under a root reaches out.
    """
    if not isinstance(model_dir, str) or not model_dir:
        raise HTTPError(400, f"model_dir must be a directory path, got {model_dir!r}")
    real = Path(os.path.realpath(model_dir))
    allowed = [Path(os.path.realpath(r)) for r in roots]
    if not any(real.is_relative_to(root) for root in allowed):
        raise HTTPError(403, f"model_dir {model_dir!r} resolves to {real}, outside the directories this server "
                             f"loads from: {', '.join(map(str, allowed))}", "PermissionDeniedError")
    if not any(real.glob("*.safetensors")):
        raise HTTPError(400, f"model_dir must name a checkpoint directory with *.safetensors, got {model_dir!r}")
    return str(real)


def positive_int(body: dict, key: str, default: int, cap: int, why: str) -> int:
    """``body[key]`` as a positive int no larger than ``cap`` (absent or 0: ``default``)."""
    value = body.get(key) or default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HTTPError(400, f"{key} must be a positive integer, got {value!r}")
    if value > cap:
        raise HTTPError(400, f"{key} is {value}; this server allows at most {cap} ({why})")
    return value


def completions_asked(body: dict, prompts: int, limits: ServeLimits) -> int:
    """``n``, checked together with the number of prompts: each prompt gets ``n`` completions."""
    if body.get("stream"):
        raise HTTPError(400, "stream is not supported by whale serve")
    if body.get("logprobs") or body.get("echo"):
        raise HTTPError(400, "logprobs and echo are not supported by whale serve")
    n = positive_int(body, "n", 1, limits.max_n, "--max-n")
    if prompts * n > limits.max_n:
        raise HTTPError(400, f"{prompts} prompts × n={n} is {prompts * n} completions; this server allows "
                             f"at most {limits.max_n} per request (--max-n)")
    return n


def prompt_size(prompt, limits: ServeLimits, context_len: int) -> None:
    """Refuse a prompt that cannot fit the context by its length alone: token ids counted, text in characters."""
    tokens = limits.max_prompt_tokens or context_len
    if is_token_ids(prompt):
        if len(prompt) > tokens:
            raise HTTPError(400, f"the prompt has {len(prompt)} token ids; this server accepts at most {tokens}")
        return
    chars, cap = text_chars(prompt), tokens * limits.chars_per_token
    if chars > cap:
        raise HTTPError(400, f"the prompt has {chars} characters; this server accepts at most {cap} "
                             f"({limits.chars_per_token} per token of a {tokens}-token prompt) before tokenising")


def is_token_ids(prompt) -> bool:
    return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], int)


def text_chars(value) -> int:
    """All characters in the strings of a prompt or a message list (JSON values)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(text_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(text_chars(v) for v in value)
    return 0


def stop_list(value) -> list[str]:
    value = [value] if isinstance(value, str) else value or []
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise HTTPError(400, "stop must be a string or a list of non-empty strings")
    return value


def seed(body: dict, draw) -> int:
    """``body["seed"]``, an int in [0, ``MAX_SEED``]; absent: ``draw()``."""
    value = body.get("seed")
    if value is None:
        return draw()
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise HTTPError(400, f"seed must be an integer in [0, {MAX_SEED}], got {value!r}")
    return value


def choices(body: dict) -> list[str] | None:
    structured = body.get("structured_outputs") or {}
    if not isinstance(structured, dict):
        raise HTTPError(400, f"structured_outputs must be an object such as {{\"choice\": [...]}}, got {structured!r}")
    unsupported = sorted(k for k, v in structured.items() if k != "choice" and v is not None)
    if unsupported:
        raise HTTPError(400, f"structured_outputs: only 'choice' is supported, got {unsupported}")
    options = structured.get("choice", body.get("guided_choice"))
    if options is not None and (not isinstance(options, list) or not options
                                or not all(isinstance(c, str) and c for c in options)):
        raise HTTPError(400, "choice must be a non-empty list of non-empty strings")
    return options


def sampling(body: dict) -> Sampling:
    """vLLM's defaults for absent fields; top_k <= 0 (vLLM's -1 or 0) means no top-k."""
    t, p, k = (body.get(key) for key in ("temperature", "top_p", "top_k"))
    bad = HTTPError(400, f"temperature (>= 0), top_p (in (0, 1]) and top_k (an integer) must be finite "
                         f"numbers, got {t!r}, {p!r}, {k!r}")
    if any(isinstance(v, (bool, str)) for v in (t, p, k)) or not (k is None or isinstance(k, int)):
        raise bad
    try:
        t, p = 1.0 if t is None else float(t), 1.0 if p is None else float(p)
    except (TypeError, ValueError):
        raise bad from None
    if not (math.isfinite(t) and t >= 0 and math.isfinite(p) and 0 < p <= 1):
        raise bad
    return Sampling(t, p, max(k or 0, 0))
