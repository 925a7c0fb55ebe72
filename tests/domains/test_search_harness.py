"""The search-QA seed harness h0: its hooks in-process, and whole episodes through the engine."""
from pathlib import Path

import pytest

from domains import get_domain
from harnesses.contract import Call, Finish, Prompt
from harnesses.sandbox import static_violations
from harnesses.seeds.search_qa import Harness
from whale.rollout.backends.base import Backend, GenResult, Sampling
from whale.rollout.engine import Engine

SOURCE = Path(__file__).resolve().parents[2] / "harnesses" / "seeds" / "search_qa.py"


def test_seed_passes_the_sandbox_static_check():
    assert static_violations(SOURCE.read_text()) == []


def test_start_asks_for_tags_and_offers_search():
    h = Harness()
    p = h.start({"question": "Where was Tavel Orimund born?"})
    assert isinstance(p, Prompt) and [m["role"] for m in p.messages] == ["system", "user"]
    user = p.messages[1]["content"]
    assert user.startswith("Question: Where was Tavel Orimund born?")
    assert "<answer>" in user and "<search>query</search>" in user
    assert "</search>" in p.stop and h.max_turns == 2


def test_act_searches_once_then_finishes():
    h = Harness()
    h.start({"question": "q"})
    call = h.act("I will look. <search> Tavel Orimund birthplace </search>")
    assert call == Call("search", {"query": "Tavel Orimund birthplace", "top_k": 1, "max_chars": 800})
    # the second turn is the last allowed one: even a search there ends the episode
    assert isinstance(h.act("<search>again</search>"), Finish)


@pytest.mark.parametrize("text", ["<answer>Brasko</answer>", "no tags at all", "<search>  </search>"])
def test_act_without_a_usable_search_finishes(text):
    h = Harness()
    h.start({"question": "q"})
    assert isinstance(h.act(text), Finish)


def test_observe_formats_docs_errors_and_empty_results():
    h = Harness()
    h.start({"question": "q"})
    p = h.observe({"tool": "search", "error": None, "passages": [{"title": "Brasko", "text": "A town."},
                                                                 {"title": "Velum River", "text": "A river."}]})
    assert p.messages == [{"role": "user",
                           "content": "Doc 1 (Title: Brasko) A town.\nDoc 2 (Title: Velum River) A river."}]
    empty = h.observe({"tool": "search", "error": None, "passages": []})
    assert empty.messages[0]["content"] == "No search results found."
    err = h.observe({"tool": "search", "error": "search: query must be a non-empty string", "passages": []})
    assert err.messages[0]["content"].startswith("Search error: search: query must be")


class ScriptedBackend(Backend):
    """A stand-in model: searches the question, then answers with whatever gold alias it read."""

    weights_id = "scripted"

    def __init__(self, tokenizer, examples, tagged=True):
        self.tokenizer, self.examples, self.tagged = tokenizer, examples, tagged

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            context = self.tokenizer.decode(req.ids)
            ex = next(e for e in self.examples if e.public["question"] in context)
            if "Doc 1 (Title:" not in context:
                text = f"<search>{ex.public['question']}</search>"
            else:
                doc = context[context.rindex("Doc 1 (Title:"):]
                answer = next((a for a in ex.gold["answers"] if a in doc), "unknown")
                text = f"<answer>{answer}</answer>" if self.tagged else f"The answer is {answer}."
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False)
                                 + [self.tokenizer.eos_token_id], "eos"))
        return out


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    d = get_domain("search_qa", str(tmp_path_factory.mktemp("data")))
    d.prepare({"weight": 8, "harness": 8, "test": 8}, seed=0)
    return d


def test_h0_episode_through_the_engine(domain, tokenizer):
    index = domain.index.get()
    # single-hop questions whose one retrieved passage holds the fact: h0 can solve them
    solvable = [e for e in domain.examples("test") if e.gold["hops"] == 1
                and index.search(e.public["question"], 1)[0]["id"] == e.gold["support"][0]]
    assert solvable
    engine = Engine(ScriptedBackend(tokenizer, solvable), domain, Sampling())
    rollouts = engine.run(SOURCE.read_text(), solvable, k=1, seed=0, progress=False)
    for r in rollouts:
        assert r.error is None and r.stop_reason == "answered" and r.turns == 2
        assert (r.reward, r.formatted) == (1.0, True) and r.verdict["support_found"] == 1.0
        assert r.messages[3]["role"] == "user" and r.messages[3]["content"].startswith("Doc 1 (Title: ")


def test_untagged_answers_score_zero(domain, tokenizer):
    examples = [e for e in domain.examples("test") if e.gold["hops"] == 1]
    engine = Engine(ScriptedBackend(tokenizer, examples, tagged=False), domain, Sampling())
    for r in engine.run(SOURCE.read_text(), examples, k=1, seed=0, progress=False):
        assert r.stop_reason == "answered" and (r.reward, r.formatted) == (0.0, False)
