"""The engine owns the context limit: a prompt longer than the served model takes is refused in
tokens before any backend sees it (a contract error in the rollout), and a reply is cut where the
context ends (recorded in ``verdict.clamped``)."""
from __future__ import annotations

from tests.toy_domain import ToyDomain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine

LONG_PROMPT = '''
from harnesses.contract import BaseHarness, Finish, Prompt

class Harness(BaseHarness):
    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": "word " * WORDS}], max_new_tokens=MAX_NEW)

    def act(self, completion):
        return Finish()
'''


class Recording(NullBackend):
    """The null policy with a context length, keeping the length of every context it is sent."""

    def __init__(self, tokenizer, context_len: int):
        super().__init__(tokenizer)
        self.context_len, self.sent = context_len, []

    def generate(self, requests, sampling):
        self.sent += [(len(r.ids), r.max_new_tokens) for r in requests]
        return super().generate(requests, sampling)


def rollout(tokenizer, words: int, max_new: int, context_len: int = 256):
    backend = Recording(tokenizer, context_len)
    source = LONG_PROMPT.replace("WORDS", str(words)).replace("MAX_NEW", str(max_new))
    [r] = Engine(backend, ToyDomain(1), Sampling()).run(source, ToyDomain(1).items, k=1, seed=0, progress=False)
    return r, backend.sent


def test_a_prompt_past_the_context_is_refused_before_the_backend(tokenizer):
    r, sent = rollout(tokenizer, words=400, max_new=8)
    assert sent == [] and r.stop_reason == "error"
    assert "the model takes 256" in r.error and "harness broke the contract" in r.error


def test_a_reply_is_cut_where_the_context_ends(tokenizer):
    r, sent = rollout(tokenizer, words=200, max_new=200)
    [(prompt, limit)] = sent
    assert prompt < 256 and prompt + limit == 256  # room left, not what the harness asked for
    assert r.verdict["clamped"]["context"] == [200, 256 - prompt]


def test_a_prompt_that_fits_is_sent_as_asked(tokenizer):
    r, sent = rollout(tokenizer, words=20, max_new=8)
    assert sent[0][1] == 8 and "context" not in r.verdict.get("clamped", {})
