"""The math harnesses driven by the real rollout engine (tiny random model, real tool and verifier)."""
from __future__ import annotations

from pathlib import Path

import pytest

from domains.math_reasoning import MathDomain
from harnesses.budgets import read_budgets, set_budgets
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine

ROOT = Path(__file__).resolve().parents[2]


def shortened(relative: str) -> str:
    """The harness source with smaller per-turn token limits: same logic, seconds instead of minutes."""
    source = (ROOT / relative).read_text()
    if "turn_tokens" in read_budgets(source):
        return set_budgets(source, {"turn_tokens": 24})
    short = source.replace("max_new_tokens=256", "max_new_tokens=24")
    short = short.replace("max_new_tokens=200", "max_new_tokens=24")
    short = short.replace("max_new_tokens=100", "max_new_tokens=24")
    assert short != source
    return short


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    domain = MathDomain(tmp_path_factory.mktemp("data"))
    engine = Engine(TransformersBackend(str(tiny_model_dir)), domain, Sampling(1.0, 1.0, 0))
    examples = domain.generate({"harness": 1}, seed=0)["harness"]
    return lambda relative: engine.run(shortened(relative), examples, k=2, seed=0, progress=False)


def test_seed_harness_episodes_finish_cleanly(run):
    for r in run("harnesses/seeds/math_reasoning.py"):
        assert r.error is None and r.stop_reason in ("answered", "truncated")
        assert 1 <= r.turns <= 2 and r.tokens_out <= 48
        assert "\\boxed{}" in r.messages[0]["content"] or "\\boxed{}" in r.messages[1]["content"]


def test_program_harness_runs_the_tool_and_ends_on_a_boxed_turn(run):
    for r in run("harnesses/examples/math_program.py"):
        assert r.error is None, r.error
        assistant = [m["content"] for m in r.messages if m["role"] == "assistant"]
        assert assistant[0].startswith("```python\n")
        assert assistant[-1].startswith("\\boxed{") and len(assistant) in (2, 3)
        # The tool's output (or its error) was shown to the model before the answer turn.
        assert any(m["role"] == "user" and m["content"].startswith(("The program", "No program"))
                   for m in r.messages)
        assert r.verdict["gold"] is not None and r.reward in (0.0, 1.0)


def test_expression_harness_runs_one_line_and_ends_on_a_boxed_turn(run):
    for r in run("harnesses/examples/math_expression.py"):
        assert r.error is None, r.error
        assistant = [m["content"] for m in r.messages if m["role"] == "assistant"]
        assert assistant[0].startswith("```python\nanswer = ") and "\n" not in assistant[0][19:].rstrip("\n")
        assert len(assistant) in (1, 2) and (len(assistant) == 1 or assistant[-1].startswith("\\boxed{"))
        assert r.verdict["gold"] is not None and r.reward in (0.0, 1.0)


def test_expression_harness_earns_nothing_under_the_null_policy(tokenizer, tmp_path):
    """A policy that ignores its input writes no expression that computes the answer, so choosing
    among what it printed cannot earn a reward the model did not (the containment limit is 0.25)."""
    domain = MathDomain(tmp_path)
    examples = domain.generate({"harness": 8}, seed=0)["harness"]
    source = (ROOT / "harnesses/examples/math_expression.py").read_text()
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=2, seed=1, progress=False)
    assert all(r.error is None for r in null) and sum(r.reward for r in null) == 0
