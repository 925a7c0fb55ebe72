"""The strict boxed-integer verifier, on the last assistant turn only."""
from __future__ import annotations

import pytest

from domains.math_reasoning import make_domain
from domains.math_reasoning.verify import last_boxed, parse_integer, verify
from whale.types import Example

EXAMPLE = Example(id="math-test-0", split="test", public={"question": "What is 12345 * 6789?"},
                  gold={"answer": 83810205})


def conversation(*assistant_turns):
    messages = [{"role": "user", "content": EXAMPLE.public["question"]}]
    for text in assistant_turns:
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Output:\n1"}]
    return messages[:-1]


def judge(*assistant_turns):
    return make_domain("data").verify(EXAMPLE, conversation(*assistant_turns), {"tool_calls": 0})


def test_gold_trajectory_is_accepted():
    verdict = judge("```python\nprint(12345*6789)\n```", "The answer is \\boxed{83810205}.")
    assert verdict.reward == 1.0 and verdict.formatted
    assert verdict.details == {"pred": 83810205, "gold": 83810205, "boxed": "83810205"}


@pytest.mark.parametrize("content", [" 83810205 ", "+83810205", "83,810,205"])
def test_accepted_integer_spellings(content):
    assert judge(f"\\boxed{{{content}}}").reward == 1.0


def test_wrong_number_is_formatted_but_rejected():
    verdict = judge("\\boxed{83810206}")
    assert verdict.reward == 0.0 and verdict.formatted and verdict.details["pred"] == 83810206


def test_box_in_an_earlier_turn_only_earns_nothing():
    verdict = judge("\\boxed{83810205}", "I am done.")
    assert verdict.reward == 0.0 and not verdict.formatted
    assert verdict.details["boxed"] is None


def test_box_in_a_user_message_earns_nothing():
    messages = conversation("no idea") + [{"role": "user", "content": "\\boxed{83810205}"}]
    assert make_domain("data").verify(EXAMPLE, messages, {}).reward == 0.0


@pytest.mark.parametrize("content", ["x=83810205", "83810205.0", "$83810205$", "83810205 apples",
                                     "8381,0205", "", "\\text{83810205}", "٨٣"])
def test_non_integer_content_is_unformatted(content):
    verdict = judge(f"\\boxed{{{content}}}")
    assert verdict.reward == 0.0 and not verdict.formatted and verdict.details["pred"] is None


def test_the_last_box_counts():
    assert judge("\\boxed{1} then \\boxed{83810205}").reward == 1.0
    assert judge("\\boxed{83810205} no wait \\boxed{2}").reward == 0.0
    # An unclosed last box is no answer, even after a closed one.
    assert not judge("\\boxed{83810205} and \\boxed{83810205").formatted


def test_nested_braces_are_matched():
    assert last_boxed("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{{83810205}}") == "{83810205}"
    assert not judge("\\boxed{\\frac{83810205}{1}}").formatted
    assert last_boxed("\\boxed{a{b}") is None


def test_parse_integer():
    assert parse_integer("-7") == -7 and parse_integer("1,000") == 1000
    assert parse_integer("1,00") is None and parse_integer("- 7") is None


def test_no_assistant_turn():
    assert verify([{"role": "user", "content": "\\boxed{3}"}], 3).reward == 0.0
