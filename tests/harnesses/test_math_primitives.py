"""Offline-proposer primitives for math: a program turn, its output relayed, the answer boxed,
through the engine and the real math domain."""
from __future__ import annotations

import pytest

from domains import get_domain
from harnesses.sandbox import static_violations
from tests.offline_support import MATH, PROGRAM, edited, hooks
from whale.rollout.backends.base import Backend, GenResult, Sampling
from whale.rollout.engine import Engine


class ScriptedMath(Backend):
    """A stand-in model for the program flow: ``program`` on a code turn, ``pick`` on the answer
    turn (after "\\boxed{"), whose choices it records."""

    weights_id = "scripted"

    def __init__(self, tokenizer, program: str = "print(2 * 3)", pick: str = "6}"):
        self.tokenizer, self.program, self.pick = tokenizer, program, pick
        self.offered: list[list[str] | None] = []

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            answering = self.tokenizer.decode(req.ids).endswith("\\boxed{")
            if answering:
                self.offered.append(req.choices)
            text = self.pick if answering else self.program + "\n```"
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False), "stop"))
        return out


def answer_is_6(tmp_path):
    """The math domain and one harness-split problem whose gold answer is set to 6."""
    domain = get_domain("math_reasoning", str(tmp_path))
    example = domain.generate({"weight": 0, "harness": 1, "test": 0}, seed=0)["harness"][0]
    return domain, type(example)(example.id, example.split, example.public, {"answer": 6})


def test_program_then_answer_runs_the_program_and_boxes_its_output(tmp_path, tokenizer):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "program_then_answer", MATH)
    [r] = Engine(ScriptedMath(tokenizer), domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    assert r.error is None and r.stop_reason == "answered" and r.turns == 2
    assert r.messages[-1]["content"] == "\\boxed{6}" and "The program printed:\n6" in r.messages[-2]["content"]
    assert (r.reward, r.formatted) == (1.0, True)


@pytest.mark.parametrize(("program", "offered"), [
    ("print(2 * 3)\nprint('done after', 100, 'steps')", [["100}", "6}"]]),
    ("print(6 / 0)", [None]),  # a program that failed offers nothing to choose: the answer is free
    # 2**2000 has 603 digits, past the contract's cap on a choice: left out, not a broken harness
    ("print(2 ** 2000)\nprint(2 * 3)", [["6}"]]),
])
def test_printed_choices_offer_the_integers_a_program_printed_last_first(tmp_path, tokenizer, program, offered):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "printed_choices", PROGRAM)
    backend = ScriptedMath(tokenizer, program)
    [r] = Engine(backend, domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    assert backend.offered == offered
    assert r.error is None and r.messages[-1]["content"] == "\\boxed{6}" and r.reward == 1.0
    assert static_violations(source) == []


def test_one_expression_makes_the_first_code_turn_one_line_that_the_harness_prints(tmp_path, tokenizer):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "one_expression", PROGRAM)
    assert static_violations(source) == []
    first = hooks(source, [("start", {"question": "What is 2 * 3?"})])[0]
    assert first.prefix == "```python\nanswer = " and first.stop == ["\n", "```"]
    assert first.messages[-1]["content"].startswith("What is 2 * 3?") and "answer = " in first.messages[-1]["content"]
    [r] = Engine(ScriptedMath(tokenizer, program="2 * 3"), domain, Sampling()).run(source, [example], k=1, seed=0,
                                                                                   progress=False)
    assert r.error is None and r.messages[1]["content"] == "```python\nanswer = 2 * 3\n```"
    assert "The program printed:\n6" in r.messages[2]["content"]
    assert r.messages[-1]["content"] == "\\boxed{6}" and r.reward == 1.0


def test_one_expression_needs_a_code_turn_and_earns_nothing_under_the_null_policy(tmp_path, tokenizer):
    from harnesses.proposers.primitives import library
    from harnesses.proposers.primitives.edit import NotApplicable
    from whale.rollout.backends.null import NullBackend

    info, primitives = library("math_reasoning")
    with pytest.raises(NotApplicable):
        next(p for p in primitives if p.name == "one_expression").apply(MATH, info)
    domain = get_domain("math_reasoning", str(tmp_path))
    examples = domain.generate({"weight": 0, "harness": 8, "test": 0}, seed=0)["harness"]
    source = edited("math_reasoning", "printed_choices", edited("math_reasoning", "one_expression", PROGRAM))
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=2, seed=1, progress=False)
    assert all(r.error is None for r in null) and sum(r.reward for r in null) == 0


def test_printed_choices_earn_nothing_under_the_null_policy(tmp_path, tokenizer):
    """Without the model there is no program that runs, so nothing to choose from: the choice
    cannot turn into a reward the model did not earn."""
    from whale.rollout.backends.null import NullBackend

    domain = get_domain("math_reasoning", str(tmp_path))
    examples = domain.generate({"weight": 0, "harness": 8, "test": 0}, seed=0)["harness"]
    source = edited("math_reasoning", "printed_choices", PROGRAM)
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=2, seed=1, progress=False)
    assert all(r.error is None for r in null) and sum(r.reward for r in null) == 0


def test_program_then_answer_shows_a_long_output_from_its_end_within_the_context(tmp_path, tokenizer):
    # a chatty program's 3k characters relayed whole took an episode past a 2048-token context:
    # the contract refused the harness, and the search lost math's program primitive
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "program_then_answer", MATH)
    backend = ScriptedMath(tokenizer, "for i in range(200):\n    print('step number', i)\nprint(2 * 3)")
    backend.context_len = 700
    [r] = Engine(backend, domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    shown = r.messages[-2]["content"]
    assert r.error is None and r.reward == 1.0
    assert shown.startswith("The program printed:\n[first ") and "step number 199\n6" in shown and len(shown) < 800
