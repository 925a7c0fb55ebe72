"""Attacks on the reward (search QA): harnesses that pass validation and try to earn the reward
themselves, run with a model that follows them perfectly through the real engine, environment
and verifier. Each must end with reward 0 and the reason in the verdict, or be refused by the
null-policy guard."""
from __future__ import annotations

import json

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


def clue(passage: str, answer: str, question: str) -> str:
    """Words of the passage that hold neither the answer nor the question's words: a query that
    finds the passage without naming what it says."""
    banned = {w.lower() for w in (answer + " " + question).split()}
    words = [w.strip(".,") for w in passage.split() if w.strip(".,").lower() not in banned]
    return " ".join(words[:8])


# laundering through the tool: the model is asked to copy a query the harness wrote from the gold
# passage, so that the answer is first named by the search results
SEARCH_LAUNDERS = '''
from harnesses.contract import BaseHarness, Call, Finish, Prompt

TABLE = {TABLE}

class Harness(BaseHarness):
    max_turns = 3

    def start(self, observation):
        self.question, self.searched = observation["question"], False
        text = self.question + "\\nFirst search exactly: " + TABLE[self.question]
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=32)

    def act(self, completion):
        if self.searched:
            return Finish()
        self.searched = True
        return Call("search", {"query": completion})

    def observe(self, observation):
        text = " ".join(p["text"] for p in observation["passages"])
        return Prompt(messages=[{"role": "user", "content": text + "\\nAnswer in <answer></answer>."}],
                      max_new_tokens=16)
'''


def test_search_results_of_a_query_copied_from_the_harness_are_the_harness_s(search, tokenizer):
    domain, examples = search
    corpus = {p["id"]: p["contents"] for p in map(json.loads, domain.corpus_path.read_text().splitlines())}
    answers = {e.public["question"]: e.gold["answers"][0] for e in examples}
    table = {e.public["question"]: clue(corpus[e.gold["support"][-1]], answers[e.public["question"]],
                                        e.public["question"]) for e in examples}

    def reply(context, req):
        if "Answer in" in context:
            return answer_of(context, answers)
        return context.split("First search exactly: ")[-1].split("<|im_end|>")[0].strip()  # the copy

    rollouts = run(SEARCH_LAUNDERS.replace("{TABLE}", repr(table)), domain, examples, Follower(tokenizer, reply))
    assert all(r.tool_calls == 1 and "unauthored" not in r.verdict for r in rollouts)  # the model's own query
    found = [r for r in rollouts if r.verdict["pred"]]
    assert found, [r.messages for r in rollouts]  # the copied queries did find the answers
    assert all(r.reward == 0.0 and "leak" in r.verdict for r in found)


# telling the null policy from the model: search the question for the model only when its first
# reply holds common English words, then offer only the answer picked out of the passages
SEARCH_DETECTS = SEARCH_PICKS.replace('''    def act(self, completion):
        if not self.question:''', '''    def act(self, completion):
        common = {"i", "let", "me", "the", "look", "will", "a", "to", "it", "up"}
        if len(common & set(completion.lower().replace(".", " ").split())) < 2:
            return Finish()
        if not self.question:''')


def test_search_harness_that_tells_the_null_policy_from_the_model_is_caught_by_the_blind_null_policy(
        search, tokenizer):
    from whale.rollout.backends.blind import BlindBackend
    from whale.run.guard import blind_guard_verdict
    from whale.stats import estimate

    domain, examples = search
    answers = {e.public["question"]: e.gold["answers"][0] for e in examples}
    source = SEARCH_DETECTS.replace("{TABLE}", repr(answers))
    model = Follower(tokenizer, lambda context, req: req.choices[0] if req.choices else "Let me look.")
    helped = run(source, domain, examples, model, k=2)
    assert sum(r.reward for r in helped) / len(helped) > 0.5  # the model is helped
    uniform = run(source, domain, examples, NullBackend(tokenizer), k=8)
    assert null_guard_verdict(load_settings(), sum(r.reward for r in uniform) / len(uniform)) is None
    blind = run(source, domain, examples, BlindBackend(model), k=2)
    per_example = [sum(r.reward for r in blind if r.example_id == e.id) / 2 for e in examples]
    settings = load_settings()
    verdict = blind_guard_verdict(settings, estimate(per_example, level=settings.harness_search.blind_level))
    assert verdict and "does not come from the model" in verdict
