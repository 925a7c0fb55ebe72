"""h0 for math_reasoning: the question, the answer format, the Python tool in one sentence."""
import re

from harnesses.contract import BaseHarness, Call, Finish, Prompt

FENCE = re.compile(r"```python[ \t]*\n(.*?)(?:```|$)", re.S)


class Harness(BaseHarness):
    max_turns = 2
    token_budget = 512
    turn_tokens = 256

    def __init__(self):
        self.turns = 0

    def start(self, observation):
        text = (
            f"{observation['question']}\n\n"
            "You may write a ```python block; it will be run and its output shown to you.\n"
            "Put the final answer in \\boxed{}."
        )
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=self.turn_tokens)

    def act(self, completion):
        self.turns += 1
        match = FENCE.search(completion)
        if match and self.turns < self.max_turns:
            return Call("python", {"code": match.group(1)})
        return Finish()

    def observe(self, observation):
        if "error" in observation:
            text = f"Error: {observation['error']}"
        else:
            text = f"Output:\n{observation['output']}"
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=self.turn_tokens)
