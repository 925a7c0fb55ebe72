"""The search-QA verifier: normalised exact match of the last assistant turn's answer.

Only the last assistant message counts: an answer written in an earlier turn and not repeated
scores 0. Inside it, the answer is the innermost pair around the last ``</answer>``: the last
closing tag paired with the nearest ``<answer>`` before it (a non-greedy regex would pair it
with the first opening tag instead and swallow everything in between).
"""
from __future__ import annotations

import re
import string

from domains.base import harness_prefix_len, last_assistant
from domains.encodings import SEPARATOR, base64_patterns, rot13
from whale.types import Verdict

OPEN, CLOSE = "<answer>", "</answer>"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse whitespace."""
    s = s.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def extract_answer(text: str, after: int = 0) -> str | None:
    """The text of the innermost ``<answer>…</answer>`` pair ending at the last closing tag; None
    when the answer would start before ``after`` (inside a harness prefix)."""
    end = text.rfind(CLOSE)
    if end < 0:
        return None
    start = text.rfind(OPEN, 0, end)
    if start < 0 or start + len(OPEN) < after:
        return None
    return text[start + len(OPEN):end].strip()


def mentions(answers: list[str]):
    """Whether a text names one of the gold answers in any form the verifier would accept or the
    model could turn back into it (``domains/encodings.py``): normalised on word boundaries
    (the verifier's own ``normalize_answer``), run together ("eiffeltower"), letters spaced out
    ("p a r i s"), reversed, ROT13 or base64. Reversed and ROT13 forms need four letters or more:
    shorter ones are ordinary words ("on" is "no" reversed)."""
    gold = [g for g in {normalize_answer(a) for a in answers} if g]
    words = set()
    raw = []
    for g in gold:
        joined = g.replace(" ", "")
        words |= {g, joined}
        if len(joined) >= 4:
            words |= {g[::-1], rot13(g)}
        if len(joined) >= 3:
            raw.append(re.compile(r"(?<![^\W_])" + SEPARATOR.join(map(re.escape, joined)) + r"(?![^\W_])", re.I))
    for a in answers:
        for form in {a.strip(), a.strip().lower(), normalize_answer(a)} - {""}:
            raw += base64_patterns(form)
    patterns = [re.compile(r"(?<!\w)" + re.escape(w) + r"(?!\w)") for w in words if w]

    def says(text: str) -> bool:
        plain = normalize_answer(text)
        return any(p.search(plain) for p in patterns) or any(p.search(text) for p in raw)
    return says


def judge(messages: list[dict], answers: list[str]) -> tuple[float, bool, str | None]:
    """``(reward, formatted, prediction)`` for a conversation against gold aliases."""
    pred = extract_answer(last_assistant(messages), harness_prefix_len(messages))
    if pred is None:
        return 0.0, False, None
    gold = {normalize_answer(a) for a in answers} - {""}
    return (1.0 if normalize_answer(pred) in gold else 0.0), True, pred


def verify(gold: dict, messages: list[dict], state: dict) -> Verdict:
    """The domain's binary verdict. ``state`` is the environment's final state (searches made)."""
    reward, formatted, pred = judge(messages, gold["answers"])
    details = {"pred": pred, "gold": list(gold["answers"])}
    support = gold.get("support")
    if support:
        seen = {pid for ids in state.get("retrieved", []) for pid in ids}
        # which of the question's fact passages the searches surfaced: retrieval, not reward
        details["support_found"] = sum(pid in seen for pid in support) / len(support)
    return Verdict(reward=reward, formatted=formatted, details=details)
