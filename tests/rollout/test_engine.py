"""The rollout engine on the tiny random model with the toy echo domain."""
import pytest

from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.engine import Engine

CONTROLS_HARNESS = '''
from harnesses.contract import BaseHarness, Prompt, Call, Finish

class Harness(BaseHarness):
    max_turns = 4
    token_budget = 200

    def start(self, observation):
        self.turn = 0
        return Prompt(messages=[{"role": "system", "content": "sys"},
                                {"role": "user", "content": observation["question"]}],
                      max_new_tokens=5, prefix="Answer:")

    def act(self, completion):
        self.turn += 1
        if self.turn == 1:
            return Prompt(messages=[{"role": "user", "content": "pick"}], choices=["alpha", "beta gamma"])
        if self.turn == 2:
            return Prompt(messages=[{"role": "user", "content": "stop at e"}], max_new_tokens=30, stop=["e"])
        return Finish()
'''


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return Engine(TransformersBackend(str(tiny_model_dir)), ToyDomain(), Sampling(1.0, 1.0, 0))


def generated_segments(r):
    segs, cur = [], []
    for t, m in zip(r.token_ids, r.mask, strict=False):
        if m:
            cur.append(t)
        elif cur:
            segs.append(cur)
            cur = []
    return segs + ([cur] if cur else [])


def test_records_are_token_exact(engine):
    tok = engine.backend.tokenizer
    rollouts = engine.run(ECHO_HARNESS, ToyDomain().items, k=2, seed=1, progress=False)
    assert len(rollouts) == 6
    for r in rollouts:
        assert r.stop_reason in ("turn_cap", "truncated") and r.error is None
        assert len(r.token_ids) == len(r.mask) and r.tokens_out == sum(r.mask)
        assistant = [m["content"] for m in r.messages if m["role"] == "assistant"]
        assert len(assistant) == r.turns == 3
        assert r.tool_calls == 3  # every turn's echo ran, the last one's result hit the turn cap
        segs = generated_segments(r)
        # the prefix "<" of later turns is harness text: in the message, never in the trained tokens
        for seg, text, prefix in zip(segs, assistant, ["", "<", "<"], strict=False):
            assert text == prefix + tok.decode(seg, skip_special_tokens=True)
        assert all(len(s) <= 8 for s in segs)
        rendered = tok.decode(r.token_ids)
        assert rendered.count("<|im_start|>assistant") == 3 and "Echo: " in rendered


def test_generation_controls(engine):
    tok = engine.backend.tokenizer
    rollouts = engine.run(CONTROLS_HARNESS, ToyDomain().items, k=3, seed=2, progress=False)
    for r in rollouts:
        assert r.stop_reason in ("answered", "truncated"), r.error
        first, choice, stopped = [m["content"] for m in r.messages if m["role"] == "assistant"]
        assert first.startswith("Answer:")
        assert choice in ("alpha", "beta gamma")
        segs = generated_segments(r)
        assert segs[1][-1] == tok.eos_token_id  # a choice ends the turn
        assert "e" in stopped or len(segs[2]) == 30
        if "e" in stopped:
            assert "e" not in tok.decode(segs[2][:-1])  # generation stopped at the first stop string


def test_same_seed_same_rollouts(engine):
    a = engine.run(ECHO_HARNESS, ToyDomain().items, k=2, seed=5, progress=False)
    b = engine.run(ECHO_HARNESS, ToyDomain().items, k=2, seed=5, progress=False)
    c = engine.run(ECHO_HARNESS, ToyDomain().items, k=2, seed=6, progress=False)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    assert [r.token_ids for r in a] != [r.token_ids for r in c]


def test_token_budget_truncates(engine):
    src = ECHO_HARNESS.replace("token_budget = 40", "token_budget = 10").replace("max_turns = 3", "max_turns = 8")
    for r in engine.run(src, ToyDomain().items, k=1, seed=0, progress=False):
        assert r.tokens_out <= 10
        assert r.stop_reason == "truncated"


def test_environment_done_ends_episode(engine):
    src = ECHO_HARNESS.replace('Call("echo", {"text": completion})', 'Call("end", {})')
    for r in engine.run(src, ToyDomain().items, k=1, seed=0, progress=False):
        assert r.turns == 1 and r.stop_reason in ("answered", "truncated")
        assert r.verdict == {"calls": 1}
        assert r.tool_calls == 1
