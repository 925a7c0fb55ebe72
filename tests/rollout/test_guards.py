"""Rewards only the model can earn: prefixes never answer, leaks score 0, the null policy exposes
a harness that solves the task itself."""
from __future__ import annotations

import pytest

from domains.leaks import leak
from domains.math_reasoning import MathDomain
from domains.math_reasoning.verify import mentions as math_mentions
from domains.math_reasoning.verify import verify as math_verify
from domains.search_qa.verify import extract_answer
from domains.search_qa.verify import mentions as search_mentions
from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine
from whale.rollout.metrics import summarize
from whale.types import Example

SOLVER = '''
import re
from harnesses.contract import BaseHarness, Prompt, Finish

class Harness(BaseHarness):
    """Computes the answer in its own code and hands it to the model: a reward the model did not earn."""
    def start(self, observation):
        a, b = map(int, re.findall(r"-?\\d+", observation["question"])[:2])
        answer = "\\\\boxed{" + str(a * b) + "}"
        return Prompt(messages=[{"role": "user", "content": "Reply with exactly " + answer}], choices=[answer])

    def act(self, completion):
        return Finish()
'''
PREFIXED = SOLVER.replace('choices=[answer])', 'prefix=answer, max_new_tokens=1)')
PARROT = '''
from harnesses.contract import BaseHarness, Prompt, Finish

class Harness(BaseHarness):
    """Offers only the answer as the turn's choice: any policy at all scores."""
    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": "go"}], choices=[observation["question"][-1]])

    def act(self, completion):
        return Finish()
'''


def test_first_mention_decides():
    says_42 = math_mentions(42)
    assert leak([("env", "6 times 7?"), ("harness", "it is 42"), ("model", "42")], says_42)
    assert leak([("env", "6 times 7?"), ("model", "I get 42"), ("harness", "you said 42")], says_42) is None
    assert leak([("env", "what is 42 + 0?"), ("harness", "42")], says_42) is None
    assert not says_42("142 and 4.2 and 420") and says_42("x = 42.") and math_mentions(1234)("1,234")
    assert search_mentions(["The Eiffel Tower"])("I think eiffel tower!")
    assert not search_mentions(["Paris"])("Parisian")


def test_a_prefix_never_counts_as_the_answer():
    def msg(content, prefix):
        return [{"role": "user", "content": "q"}, {"role": "assistant", "content": content, "prefix": prefix}]

    assert math_verify(msg("\\boxed{42}", "\\boxed{"), 42).reward == 1.0  # the model wrote 42
    cheat = math_verify(msg("\\boxed{42}", "\\boxed{42}"), 42)
    assert cheat.reward == 0.0 and cheat.details["in_prefix"]
    assert math_verify(msg("\\boxed{42}", "\\boxed{4"), 42).reward == 0.0
    assert extract_answer("<answer>Paris</answer>", after=len("<answer>")) == "Paris"
    assert extract_answer("<answer>Paris</answer>", after=len("<answer>Paris")) is None


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return TransformersBackend(str(tiny_model_dir))


def mult_domain(tmp_path) -> tuple[MathDomain, list[Example]]:
    items = [Example(f"m{i}", "harness", {"question": f"What is {i + 3} times {i + 5}?"},
                     {"answer": (i + 3) * (i + 5)}) for i in range(3)]
    return MathDomain(tmp_path), items


def test_harness_written_answers_score_zero_as_leaks(backend, tmp_path):
    domain, items = mult_domain(tmp_path)
    engine = Engine(backend, domain, Sampling(1.0, 1.0, 0))
    rollouts = engine.run(SOLVER, items, k=2, seed=0, progress=False)
    assert all(r.reward == 0.0 and "leak" in r.verdict and r.verdict["pred"] == r.verdict["gold"] for r in rollouts)
    prefixed = engine.run(PREFIXED, items, k=1, seed=0, progress=False)
    assert all(r.reward == 0.0 for r in prefixed)


def test_null_policy_exposes_a_harness_that_solves_without_the_model(backend):
    null = Engine(NullBackend(backend.tokenizer), ToyDomain(3), Sampling())
    items = ToyDomain(3).items
    assert summarize(null.run(PARROT, items, k=2, seed=0, progress=False))["mean_at_k"] == 1.0
    assert summarize(null.run(ECHO_HARNESS, items, k=2, seed=0, progress=False))["mean_at_k"] < 0.5


def test_null_policy_is_reproducible(backend):
    null = Engine(NullBackend(backend.tokenizer), ToyDomain(3), Sampling())
    a, b = (null.run(ECHO_HARNESS, ToyDomain(3).items, k=2, seed=5, progress=False) for _ in range(2))
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
