"""The math verifier: a strict ``\\boxed{}`` integer in the last assistant turn.

Rules (the same for RSFT acceptance, harness scoring and the test split):
- Only the last assistant message is read, and only what the model wrote: the box may open in a
  harness prefix (``\\boxed{``), but its content must start after the prefix;
- Only the last assistant message is read, so a box in an earlier turn, a tool output or a
  nudge earns nothing.
- The last ``\\boxed{`` in that message is taken and its braces are matched (nested braces are
  part of the content). An unclosed last box means no answer, even if an earlier box is closed.
- The content must be an integer and nothing else: ASCII digits, an optional leading ``+`` or
  ``-``, spaces around it, and commas only as thousands separators in groups of three
  (``1,234``). ``x = 5``, ``5.0``, ``$5$``, ``\\frac{10}{2}`` and ``5 apples`` are not integers.
"""
from __future__ import annotations

import re

from domains.base import harness_prefix_len, last_assistant
from whale.types import Verdict

BOX = "\\boxed{"
INTEGER = re.compile(r"[+-]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, braces matched; None when absent."""
    start = text.rfind(BOX)
    if start < 0:
        return None
    depth = 1
    i = start + len(BOX)
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def parse_integer(content: str) -> int | None:
    """The integer written in a box, or None when the content is anything but an integer."""
    stripped = content.strip(" ")
    if not INTEGER.fullmatch(stripped):
        return None
    return int(stripped.replace(",", ""))


def mentions(gold: int):
    """Whether a text names the gold integer (as a whole number, with or without thousands commas)."""
    forms = {str(abs(gold)), f"{abs(gold):,}"}
    pattern = re.compile(r"(?<![\d,.])(?:" + "|".join(map(re.escape, forms)) + r")(?![\d]|,\d|\.\d)")
    return lambda text: bool(pattern.search(text))


def verify(messages: list[dict], gold: int) -> Verdict:
    """Reward 1.0 when the last assistant turn boxes exactly the gold integer."""
    text = last_assistant(messages)
    content = last_boxed(text)
    in_prefix = content is not None and text.rfind(BOX) + len(BOX) < harness_prefix_len(messages)
    pred = None if content is None or in_prefix else parse_integer(content)
    return Verdict(
        reward=1.0 if pred is not None and pred == gold else 0.0,
        formatted=pred is not None,
        details={"pred": pred, "gold": gold, "boxed": content, **({"in_prefix": True} if in_prefix else {})},
    )
