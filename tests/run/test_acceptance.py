"""Noise-aware acceptance on a scripted backend whose success rate each harness sets: a lucky
challenger of equal quality does not replace the incumbent; a truly better one does."""
from __future__ import annotations

import random
import re

import pytest

from tests.toy_domain import ToyDomain
from whale.rollout.backends.base import Backend, GenResult, Sampling
from whale.rollout.engine import Engine
from whale.run.acceptance import AcceptRule, accept

N = 32
HARNESS = '''
from harnesses.contract import BaseHarness, Prompt, Finish

class Harness(BaseHarness):
    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": observation["question"] + " QUALITY=%s %s"}],
                      max_new_tokens=8)

    def act(self, completion):
        return Finish()
'''


class Scripted(Backend):
    """Answers right with the probability the prompt names. Like a model, the outcome of a sample
    depends on its seed (shared by every harness under common random numbers) and on the prompt."""

    weights_id = "scripted"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            text = self.tokenizer.decode(r.ids)
            q = float(re.search(r"QUALITY=([0-9.]+)", text).group(1))
            answer = re.findall(r"say (\d+)", text)[-1]
            shared, own = random.Random(r.seed), random.Random(f"{r.seed}:{text}")
            u = shared.random() if own.random() < 0.5 else own.random()
            reply = answer if u < q else "no"
            out.append(GenResult(self.tokenizer.encode(reply, add_special_tokens=False), "stop"))
        return out


@pytest.fixture(scope="module")
def engine(tokenizer_dir):
    from transformers import AutoTokenizer

    return Engine(Scripted(AutoTokenizer.from_pretrained(tokenizer_dir)), ToyDomain(N), Sampling())


def per_example(engine, source: str, seeds: list[int]) -> dict[str, float]:
    scores: dict[str, list[float]] = {}
    for seed in seeds:
        for r in engine.run(source, ToyDomain(N).items, k=1, seed=seed, progress=False):
            scores.setdefault(r.example_id, []).append(r.reward)
    return {e: sum(v) / len(v) for e, v in scores.items()}


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores)


def test_a_lucky_equal_challenger_is_kept_out_and_a_better_one_gets_in(engine):
    rule = AcceptRule("lcb", 0.9, 0.0)
    lucky_kept_out = better_got_in = trials = 0
    for trial in range(8):
        score_seed, recheck_seed = 100 * trial, 100 * trial + 1
        incumbent = HARNESS % ("0.5", "")
        first = per_example(engine, incumbent, [score_seed])
        # an equal-quality variant that beats the incumbent on the single-sample score: the max rule's pick
        variants = (HARNESS % ("0.5", "v" * i) for i in range(1, 13))
        lucky = next((v for v in variants if mean(per_example(engine, v, [score_seed])) > mean(first)), None)
        if lucky is None:
            continue
        trials += 1
        better = HARNESS % ("0.9", "")
        scores = {h: per_example(engine, h, [score_seed, recheck_seed]) for h in (incumbent, lucky, better)}
        lucky_kept_out += accept(incumbent, {h: scores[h] for h in (incumbent, lucky)}, rule).harness_id == incumbent
        chosen = accept(incumbent, scores, rule)
        better_got_in += chosen.harness_id == better
        assert "paired advantage" in chosen.reason or "incumbent kept" in chosen.reason
    assert trials >= 5
    assert lucky_kept_out >= trials - 1, (lucky_kept_out, trials)
    assert better_got_in >= trials - 1, (better_got_in, trials)


def test_margin_rule_and_reasons():
    inc = {f"e{i}": 0.5 for i in range(10)}
    up = {f"e{i}": 0.6 for i in range(10)}
    assert accept("a", {"a": inc, "b": up}, AcceptRule("margin", 0.9, 0.05)).harness_id == "b"
    kept = accept("a", {"a": inc, "b": up}, AcceptRule("margin", 0.9, 0.2))
    assert kept.harness_id == "a" and kept.reason.startswith("incumbent kept") and "best challenger b" in kept.reason
    with pytest.raises(ValueError):
        AcceptRule("max")
