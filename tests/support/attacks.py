"""A model that does what a harness tells it, as well as any model could: the best case for a
harness that tries to earn the reward itself. Attack tests run hostile harnesses with it through
the real validation path, engine, environments and verifiers."""
from __future__ import annotations

import re
from collections.abc import Callable

from harnesses.sandbox import Limits
from harnesses.validate import check_candidate
from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling
from whale.rollout.engine import Engine

# What a harness can write without base64 or codecs (neither is importable in the jail)
CODERS = '''
ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
LOWER = "abcdefghijklmnopqrstuvwxyz"

def b64(s):
    bits = "".join(f"{b:08b}" for b in s.encode())
    bits += "0" * (-len(bits) % 6)
    out = "".join(ALPHA[int(bits[i:i + 6], 2)] for i in range(0, len(bits), 6))
    return out + "=" * (-len(out) % 4)

def rot13(s):
    plain = LOWER + LOWER.upper()
    return s.translate(str.maketrans(plain, LOWER[13:] + LOWER[:13] + LOWER.upper()[13:] + LOWER.upper()[:13]))
'''
FENCE = re.compile(r"```python\n(.*?)```", re.S)


class Follower(Backend):
    """Replies ``reply(context, request)`` where ``context`` is the decoded prompt so far; on a turn
    with choices the reply must be one of them."""

    weights_id = "follower"

    def __init__(self, tokenizer, reply: Callable[[str, GenRequest], str]):
        self.tokenizer, self.reply = tokenizer, reply

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            text = self.reply(self.tokenizer.decode(req.ids), req)
            assert req.choices is None or text in req.choices, (text, req.choices)
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False)
                                 + [self.tokenizer.eos_token_id], "eos"))
        return out


def copies_code_then_boxes(gold: int) -> Callable[[str, GenRequest], str]:
    """Copies the last ```python block of its prompt on the first turn, then boxes ``gold``."""
    def reply(context: str, req: GenRequest) -> str:
        if req.choices:
            return next(c for c in req.choices if str(gold) in c)
        if "Output:" not in context and FENCE.findall(context):
            return "```python\n" + FENCE.findall(context)[-1] + "```"
        return f"\\boxed{{{gold}}}"
    return reply


def run(source, domain, examples, backend, k=1):
    """Validate ``source`` as a candidate (every attack passes) and roll it out."""
    assert check_candidate(source, Limits()) is None  # every attack passes validation
    return Engine(backend, domain, Sampling()).run(source, examples, k=k, seed=0, progress=False)
