"""The search-QA choice constraints: the answer and the bridge search as spans of the passages.

Each stack runs through the real engine and verifier: under a model that picks the gold span it
earns the reward (the leak check passes: the span came from an observation first), under the null
policy it stays below the containment limit.
"""
from __future__ import annotations

import pytest

from domains import get_domain
from harnesses.contract import MAX_CHOICE_CHARS, Call, Prompt
from harnesses.sandbox import static_violations
from tests.offline_support import ROOT, SEARCH, edited, hooks
from whale.rollout.backends.base import Backend, GenResult, Sampling
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine

BASE = ("search_first", "query_from_question", "top_k_3")
EXAMPLE = (ROOT / "harnesses" / "examples" / "search_spans.py").read_text()
PASSAGES = {"tool": "search", "error": None, "passages": [
    {"title": "Veipe Dethilae", "text": "Dethilae was born in Thodafus in 1874. The Salou River flows there."}]}


def stack(*names: str) -> str:
    source = SEARCH
    for name in (*BASE, *names):
        source = edited("search_qa", name, source)
    assert static_violations(source) == []
    return source


def test_the_last_turn_chooses_among_the_passages_names_and_numbers_but_not_the_questions():
    start = ("start", {"question": "Where was Veipe Dethilae born?"})
    _, call, answer = hooks(stack("answer_spans"), [start, ("act", "Veipe Dethilae</search>"),
                                                    ("observe", PASSAGES)])
    assert isinstance(call, Call) and isinstance(answer, Prompt)
    assert answer.prefix == "<answer>" and answer.stop == []
    # "Veipe Dethilae" and "Dethilae" are the question's own names; "The" starts a sentence
    assert answer.choices == ["Thodafus</answer>", "1874</answer>", "Salou River</answer>"]


@pytest.mark.parametrize("name", ["example", "answer_spans"])
def test_a_span_too_long_for_a_choice_is_left_out(name):
    """A run of capitalised words longer than the contract allows a choice (a list of titles in a
    real passage) is dropped, and the other spans are still offered."""
    titles = " ".join(f"Volume{i} Chronicle" for i in range(40))  # one 600-character name
    passages = {"tool": "search", "error": None, "passages": [
        {"title": "Veipe Dethilae", "text": f"Dethilae wrote {titles}. Dethilae was born in Thodafus in 1874."}]}
    source = EXAMPLE.replace("max_turns = 3", "max_turns = 2") if name == "example" else stack("answer_spans")
    *_, answer = hooks(source, [("start", {"question": "Where was Veipe Dethilae born?"}),
                                ("act", "Veipe Dethilae</search>"), ("observe", passages)])
    assert len(titles) > MAX_CHOICE_CHARS
    assert answer.choices == ["Thodafus</answer>", "1874</answer>"]


def test_the_bridge_turn_searches_the_chosen_name_and_the_answer_turn_follows():
    bridge = stack("bridge_choice", "answer_spans")
    start = ("start", {"question": "In what year was the founder of Nefav born?"})
    # act receives the whole assistant message, the turn's prefix "<search>" included
    actions = hooks(bridge, [start, ("act", "<search>Nefav</search>"), ("observe", PASSAGES),
                             ("act", "<search>Thodafus</search>"), ("observe", PASSAGES)])
    _, first, pick, second, answer = actions
    assert first == Call("search", first.args) and pick.prefix == "<search>"
    assert "Thodafus</search>" in pick.choices
    assert isinstance(second, Call) and second.args["query"] == "Thodafus"
    assert answer.prefix == "<answer>" and "1874</answer>" in answer.choices


TOWN = {"tool": "search", "error": None, "passages": [
    {"title": "Thodafus", "text": "Thodafus is a town in the Have Highlands. The Salou River flows through it."}]}


def test_the_example_searches_the_query_without_its_tag_then_the_chosen_name():
    """act receives the whole message, prefix included: the tag's "search" must not become a query
    word (wiki-18 has pages that match it). The answer turn offers the newest passages' names first."""
    question = "Which river flows through the birthplace of Veipe Dethilae?"
    _, first, middle, second, answer = hooks(EXAMPLE, [
        ("start", {"question": question}), ("act", "<search>Veipe Dethilae</search>"), ("observe", PASSAGES),
        ("act", "<search>Thodafus</search>"), ("observe", TOWN)])
    assert first == Call("search", {"query": f"Veipe Dethilae {question}", "top_k": 3, "max_chars": 600})
    assert middle.prefix == "<search>" and middle.choices == ["Thodafus</search>", "1874</search>",
                                                              "Salou River</search>"]
    assert second == Call("search", {"query": "Thodafus", "top_k": 3, "max_chars": 600})
    assert answer.prefix == "<answer>" and answer.choices == [
        "Thodafus</answer>", "Have Highlands</answer>", "Salou River</answer>", "1874</answer>"]


WIKI = {"tool": "search", "error": None, "passages": [
    {"title": "Inception", "text": "Christopher Nolan's film was released on July 16, 2010 in the United States."},
    {"title": "Élodie Durand", "text": "Born 5 May 1998 in São Paulo, she studied at the University of Lyon. "
                                       "born again"}]}
WIKI_SPANS = ["Christopher Nolan", "July 16, 2010", "2010", "United States", "Élodie Durand", "5 May 1998",
              "1998", "São Paulo", "University of Lyon"]


@pytest.mark.parametrize("name", ["example", "answer_spans"])
def test_real_format_passages_give_unicode_names_dates_with_their_year_and_yes_no(name):
    """Wiki-style text: possessives, dates written out, accented capitals, a yes/no question."""
    source = EXAMPLE.replace("max_turns = 3", "max_turns = 2") if name == "example" else stack("answer_spans")
    choices = {}
    for question in ("Where did the star of Inception study?", "Is Inception longer than Memento?"):
        *_, answer = hooks(source, [("start", {"question": question}), ("act", "Inception</search>"),
                                    ("observe", WIKI)])
        assert answer.prefix == "<answer>"
        choices[question[:2]] = [c.removesuffix("</answer>") for c in answer.choices]
    # "Inception" is the question's own name; "Born" opens a sentence and is written lower case too
    assert choices["Wh"] == WIKI_SPANS
    assert choices["Is"] == ["yes", "no", *WIKI_SPANS]


class Oracle(Backend):
    """A stand-in model that picks the gold answer among a turn's choices, else the question's
    bridge entity (the middle of its gold chain), else the first choice."""

    weights_id = "oracle"

    def __init__(self, tokenizer, examples):
        self.tokenizer, self.examples = tokenizer, examples

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            context = self.tokenizer.decode(req.ids)
            ex = next(e for e in self.examples if e.public["question"] in context)
            wanted = [*ex.gold["answers"], *ex.gold["chain"][1:-1]]
            choices = req.choices or ["nothing</search>"]
            pick = min(choices, key=lambda c: wanted.index(c.split("</")[0]) if c.split("</")[0] in wanted
                       else len(wanted))
            out.append(GenResult(self.tokenizer.encode(pick, add_special_tokens=False)
                                 + [self.tokenizer.eos_token_id], "eos"))
        return out


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    d = get_domain("search_qa", str(tmp_path_factory.mktemp("data")))
    d.prepare({"weight": 8, "harness": 24, "test": 8}, seed=0)
    return d


def mean(rollouts) -> float:
    return sum(r.reward for r in rollouts) / len(rollouts)


def test_the_right_choices_earn_the_reward_the_bridge_reaches_two_hop_answers_and_the_null_policy_does_not(
        domain, tokenizer):
    examples = domain.examples("harness")
    assert {e.gold["hops"] for e in examples} == {1, 2}
    ceiling = {}
    sources = {"answer_spans": stack("answer_spans"), "bridge_choice": stack("bridge_choice", "answer_spans"),
               "example": EXAMPLE, "example_one_search": EXAMPLE.replace("max_turns = 3", "max_turns = 2")}
    for name, source in sources.items():
        oracle = Engine(Oracle(tokenizer, examples), domain, Sampling()).run(source, examples, k=1, seed=0,
                                                                            progress=False)
        # the answer span came from a passage before the harness offered it: no leak verdict
        assert all(r.error is None and r.formatted and "leak" not in r.verdict for r in oracle)
        ceiling[name] = mean(oracle)
        null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=8, seed=1, progress=False)
        assert all(r.error is None and r.stop_reason == "answered" for r in null), name
        assert mean(null) < 0.25, name
    # one search reaches the answers of most single-hop questions; the bridge search adds two-hop ones
    assert 0.3 < ceiling["answer_spans"] < ceiling["bridge_choice"]
    assert 0.3 < ceiling["example_one_search"] < ceiling["example"]
