"""The search-QA verifier: innermost answer of the last assistant turn, normalised exact match."""
import pytest

from domains import get_domain
from domains.search_qa.verify import extract_answer, normalize_answer, verify
from whale.types import Example

GOLD = {"answers": ["Velmora River", "Velmora"], "hops": 1}


def convo(*assistant_turns):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Question: which river?"}]
    for text in assistant_turns:
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Doc 1 (Title: T) x"}]
    return messages[:-1] if assistant_turns else messages


@pytest.mark.parametrize("raw, norm", [
    ("The Velmora River.", "velmora river"),
    ("  an   apple, a PEAR; the end ", "apple pear end"),
    ("Theodor's", "theodors"),  # an article only counts as a whole word
    ("", ""),
])
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


@pytest.mark.parametrize("text, expected", [
    ("<answer>Paris</answer>", "Paris"),
    ("<answer>draft</answer> then <answer> final </answer>", "final"),
    ("<answer>outer <answer>inner</answer>", "inner"),  # innermost pair, not a non-greedy match
    ("<answer>first</answer> trailing <answer>unclosed", "first"),
    ("no tags", None),
    ("<answer>unclosed", None),
    ("closed only</answer>", None),
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_gold_trajectory_is_accepted():
    v = verify(GOLD, convo("<search>Velmora</search>", "It is <answer>the Velmora river</answer>"), {})
    assert (v.reward, v.formatted) == (1.0, True)
    assert v.details["pred"] == "the Velmora river" and v.details["gold"] == GOLD["answers"]
    assert verify(GOLD, convo("<answer>velmora.</answer>"), {}).reward == 1.0


@pytest.mark.parametrize("turns, formatted", [
    (("<answer>Velmora</answer>", "I already answered."), False),  # answer in an earlier turn only
    (("<answer>Dravik</answer>",), True),  # wrong answer
    (("<answer>Velmora",), False),  # unclosed tag
    (("<answer>Velmora River, or maybe Dravik</answer>",), True),  # a hedge is not an exact match
    (("<answer></answer>",), True),
    ((), False),  # the model never spoke
])
def test_perturbed_trajectories_are_rejected(turns, formatted):
    v = verify(GOLD, convo(*turns), {})
    assert v.reward == 0.0 and v.formatted is formatted


def test_support_found_reads_the_final_state():
    gold = {**GOLD, "support": ["7", "9"]}
    v = verify(gold, convo("<answer>Velmora</answer>"), {"searches": ["a", "b"], "retrieved": [["1", "7"], ["2"]]})
    assert v.details["support_found"] == 0.5
    assert "support_found" not in verify(GOLD, convo("<answer>x</answer>"), {}).details


def test_domain_verify_uses_example_gold(tmp_path):
    domain = get_domain("search_qa", str(tmp_path))
    ex = Example("e", "test", {"question": "q"}, GOLD)
    assert domain.verify(ex, convo("<answer>Velmora</answer>"), {"searches": []}).reward == 1.0
