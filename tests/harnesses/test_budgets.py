"""h0's budgets are rewritten in its source (the paper profile's 8192 tokens), never behind its back."""
import pytest

from harnesses.budgets import read_budgets, set_budgets
from harnesses.sandbox import static_violations
from whale.run.context import h0_source
from whale.run.settings import load_settings
from whale.testing import ROOT


@pytest.mark.parametrize("domain, turns", [("search_qa", 2), ("math_reasoning", 2), ("chess_puzzles", 9)])
def test_every_seed_states_its_budgets_as_literals_that_a_profile_can_raise(domain, turns):
    source = (ROOT / "harnesses" / "seeds" / f"{domain}.py").read_text()
    assert read_budgets(source)["max_turns"] == turns and set(read_budgets(source)) == {
        "max_turns", "token_budget", "turn_tokens"}
    raised = set_budgets(source, {"token_budget": 8192, "turn_tokens": 4096})
    assert read_budgets(raised) == {"max_turns": turns, "token_budget": 8192, "turn_tokens": 4096}
    assert static_violations(raised) == []
    # only the two literals changed
    changed = [(a, b) for a, b in zip(source.splitlines(), raised.splitlines(), strict=True) if a != b]
    assert [b.strip() for _, b in changed] == ["token_budget = 8192", "turn_tokens = 4096"]


def test_a_budget_the_harness_does_not_set_is_refused_with_its_name():
    source = "from harnesses.contract import BaseHarness\n\nclass Harness(BaseHarness):\n    max_turns = 3\n"
    assert set_budgets(source, {"max_turns": 5}).endswith("max_turns = 5\n")
    with pytest.raises(ValueError, match="my.py: class Harness sets no int literal token_budget"):
        set_budgets(source, {"token_budget": 8192}, where="my.py")
    with pytest.raises(ValueError, match="unknown harness budget"):
        set_budgets(source, {"budget": 1})


def test_the_paper_profile_archives_h0_with_the_paper_budgets():
    settings = load_settings(ROOT / "params.yaml", profile="paper", domain="math_reasoning")
    assert read_budgets(h0_source(settings, "math_reasoning"))["token_budget"] == 8192
    assert "the Python tool in one sentence" in h0_source(settings, "math_reasoning")  # the seed's docstring
    # the CPU default's math h0 is the seed, archived as written
    default = load_settings(ROOT / "params.yaml", domain="math_reasoning")
    assert h0_source(default, "math_reasoning") == (ROOT / "harnesses/seeds/math_reasoning.py").read_text()
