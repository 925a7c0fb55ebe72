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
from domains.encodings import base64_patterns, digit_words, roman, spelled, word_text
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


# A number as a text writes it: digits with any commas, leading zeros, a sign, a decimal part or an
# exponent ("1,517", "001517", "+1517", "1517.0", "1.517e3"). Letters may touch it: observations
# are searched as JSON, where a line break before a number reads "\n42".
NUMBER = re.compile(r"(?<![0-9.,])[+-]?[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![0-9]|[.,][0-9])")
# separators of a spaced-out number; arithmetic signs are not among them ("4 = 7" is not 47)
DIGIT_SEPARATOR = r"[\s,._|'\"/\\:;-]{1,3}"


def number_values(token: str) -> set[float]:
    """Absolute values a written number may stand for: "1,517" is 1517, "42,43" is a list (42, 43
    and, run together, 4243)."""
    body = token.lstrip("+-")
    parts = [body] if "," not in body or INTEGER.fullmatch(body.split(".")[0]) else [body, *body.split(",")]
    out = set()
    for part in parts:
        try:
            out.add(abs(float(part.replace(",", ""))))
        except (ValueError, OverflowError):
            pass
    return out


def mentions(gold: int):
    """Whether a text names the gold integer in any form the verifier would read as it or the model
    could turn back into it (``domains/encodings.py``): any written number of the same
    value, its digits spaced out, reversed or as words, the number spelled out, Roman, hexadecimal,
    binary or octal, base64. Signs are ignored: "-42" names 42."""
    n = abs(gold)
    digits = str(n)
    patterns = []
    if len(digits) >= 2:  # two digits with a point or comma between are a decimal or a list, not 42
        between = DIGIT_SEPARATOR if len(digits) >= 3 else r"[\s_|]{1,3}"
        patterns.append(re.compile(r"(?<![0-9])" + between.join(digits) + r"(?![0-9])"))
    if len(digits) >= 3 and digits[::-1] != digits:
        patterns.append(re.compile(r"(?<![0-9])" + digits[::-1] + r"(?![0-9])"))
    patterns += [re.compile(rf"(?<![\w]){p}{v}(?![\w])", re.I) for p, v in (("0x", f"{n:x}"), ("0b", f"{n:b}"),
                                                                           ("0o", f"{n:o}"))]
    numeral = roman(n)
    if numeral and len(numeral) >= 3:
        patterns.append(re.compile(rf"(?<![A-Za-z]){numeral}(?![A-Za-z])"))
    patterns += base64_patterns(digits)
    # small numbers in words ("one", "two") are ordinary English; from ten on they are not
    words = {f" {spelled(n)} ", f" {digit_words(n)} "} if n >= 10 else set()

    def says(text: str) -> bool:
        if any(n in number_values(t) for t in NUMBER.findall(text)):
            return True
        if any(p.search(text) for p in patterns):
            return True
        plain = word_text(text) if words else ""
        return any(w in plain for w in words)
    return says


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
