"""h0 for search_qa: one search (one passage, about 200 tokens of it), then the answer in tags."""
import re

from harnesses.contract import BaseHarness, Call, Finish, Prompt

SEARCH = re.compile(r"<search>(.*?)</search>", re.S)
SYSTEM = "Answer factual questions using search when needed."
INSTRUCTIONS = (
    "You may search an encyclopaedia by writing <search>query</search>. "
    "Give only the final answer inside <answer> and </answer> tags."
)


class Harness(BaseHarness):
    max_turns = 2
    token_budget = 512
    turn_tokens = 192

    def __init__(self):
        self.turns = 0

    def start(self, observation):
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {observation['question']}\n{INSTRUCTIONS}"},
        ]
        return Prompt(messages=messages, max_new_tokens=self.turn_tokens, stop=["</search>", "</answer>"])

    def act(self, completion):
        self.turns += 1
        match = SEARCH.search(completion)
        if match and match.group(1).strip() and self.turns < self.max_turns:
            # one passage of about 200 tokens, as in the reference h0
            return Call("search", {"query": match.group(1).strip(), "top_k": 1, "max_chars": 800})
        return Finish()

    def observe(self, observation):
        if observation.get("error"):
            text = f"Search error: {observation['error']}"
        elif not observation["passages"]:
            text = "No search results found."
        else:
            text = "\n".join(f"Doc {i} (Title: {p['title']}) {p['text']}"
                             for i, p in enumerate(observation["passages"], 1))
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=self.turn_tokens,
                      stop=["</search>", "</answer>"])
