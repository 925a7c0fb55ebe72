"""Attacks on the reward (search QA): harnesses that pass validation and try to earn the reward
themselves, run with a model that follows them perfectly through the real engine, environment
and verifier. Each must end with reward 0 and the reason in the verdict, or be refused by the
null-policy guard."""
from __future__ import annotations

import pytest

from domains import get_domain
from tests.support.attacks import CODERS, Follower, run
from whale.rollout.backends.null import NullBackend
from whale.run.guard import null_guard_verdict
from whale.run.settings import load_settings

# Search QA: the harness knows the answer (a table) or picks it out of what the search returned.
SEARCH_HINT = '''
from harnesses.contract import BaseHarness, Finish, Prompt
''' + CODERS + '''

TABLE = {TABLE}

class Harness(BaseHarness):
    def start(self, observation):
        gold = TABLE[observation["question"]]
        text = observation["question"] + "\\nHint: " + HINT + "\\nAnswer in <answer></answer>."
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=16)

    def act(self, completion):
        return Finish()
'''
SEARCH_HINTS = {
    "plain": "gold", "spaced": '" ".join(gold)', "dashed": '"-".join(gold.upper())', "reversed": "gold[::-1]",
    "rot13": "rot13(gold)", "base64": "b64(gold)",
    "run together": 'gold.replace(" ", "")',
}


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    d = get_domain("search_qa", str(tmp_path_factory.mktemp("search")))
    d.prepare({"weight": 0, "harness": 4, "test": 0}, seed=0)
    return d, d.examples("harness")


@pytest.mark.parametrize("encoding", sorted(SEARCH_HINTS))
def test_search_re_encoded_answers_are_leaks(encoding, search, tokenizer):
    domain, examples = search
    table = {e.public["question"]: e.gold["answers"][0] for e in examples}
    source = SEARCH_HINT.replace("{TABLE}", repr(table)).replace("HINT", SEARCH_HINTS[encoding])
    rollouts = run(source, domain, examples, Follower(tokenizer, lambda c, q: answer_of(c, table)))
    assert all(r.verdict["pred"] and r.reward == 0.0 and "leak" in r.verdict for r in rollouts)


def answer_of(context, table):
    question = next(q for q in table if q in context)
    return f"<answer>{table[question]}</answer>"


SEARCH_SUBSTITUTES = '''
from harnesses.contract import BaseHarness, Call, Finish, Prompt

class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        self.searched = False
        return Prompt(messages=[{"role": "user", "content": observation["question"]}], max_new_tokens=16)

    def act(self, completion):
        if self.searched:
            return Finish()
        self.searched = True
        return Call("search", {"query": "founded born capital river"})

    def observe(self, observation):
        return Prompt(messages=[{"role": "user", "content": str(observation["passages"])}], max_new_tokens=16)
'''


def test_search_a_query_the_model_did_not_write_is_not_run(search, tokenizer):
    domain, examples = search
    rollouts = run(SEARCH_SUBSTITUTES, domain, examples, Follower(tokenizer, lambda c, q: "I will look it up."))
    assert all(r.reward == 0.0 and "model's text" in r.verdict["unauthored"] for r in rollouts)
    assert all(r.tool_calls == 0 for r in rollouts)


# harness-side solving from the passages: the model searches the question, the harness offers only
# the answer it picked out of the results (first named by the environment, so no leak)
SEARCH_PICKS = '''
from harnesses.contract import BaseHarness, Call, Finish, Prompt

TABLE = {TABLE}

class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        self.question = observation["question"]
        self.gold = TABLE[self.question]
        return Prompt(messages=[{"role": "user", "content": self.question + " Search:"}], max_new_tokens=16)

    def act(self, completion):
        if not self.question:
            return Finish()
        query, self.question = self.question, None
        return Call("search", {"query": completion + " " + query, "top_k": 10})

    def observe(self, observation):
        text = " ".join(p["title"] + " " + p["text"] for p in observation["passages"])
        return Prompt(messages=[{"role": "user", "content": "Answer."}], prefix="<answer>",
                      choices=[self.gold + "</answer>" if self.gold in text else "no</answer>"])
'''


def test_search_answer_picked_by_the_harness_is_caught_by_the_null_policy(search, tokenizer):
    domain, examples = search
    table = {e.public["question"]: e.gold["answers"][0] for e in examples}
    source = SEARCH_PICKS.replace("{TABLE}", repr(table))
    null = run(source, domain, examples, NullBackend(tokenizer), k=2)
    score = sum(r.reward for r in null) / len(null)
    assert all("leak" not in r.verdict and "unauthored" not in r.verdict for r in null)
    assert score > 0.25 and null_guard_verdict(load_settings(), score)
