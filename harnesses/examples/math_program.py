"""A hand-written math harness: ask for a program, run it, then ask for the boxed answer.

Turn 1 continues an assistant prefix "```python\\n" and stops at the closing fence, so the turn
is code. If the program fails and a turn is left before the answer turn, the model gets one
chance to fix it. The answer turn continues the prefix "\\boxed{" and stops at "}": the prefix
is part of the assistant message the verifier reads, so "\\boxed{" + "42}" is "\\boxed{42}".
The harness only relays the program's output (its last 600 characters); it never computes
anything from the question.
"""
import re

from harnesses.contract import BaseHarness, Call, Finish, Prompt

CODE_PREFIX = "```python\n"
ANSWER_PREFIX = "\\boxed{"
# A program's output is shown from its end, at most this many characters: the answer is printed
# last, and the tool's 4096 characters of a chatty program cost thousands of context tokens.
OUTPUT_CHARS = 600


def tail(output):
    if len(output) <= OUTPUT_CHARS:
        return output
    return f"[first {len(output) - OUTPUT_CHARS} characters not shown]\n" + output[-OUTPUT_CHARS:]


def code_of(completion):
    """The program in a code turn, whether or not the engine included the prefix."""
    text = completion
    opened = re.search(r"```(?:python)?[ \t]*\n", text)
    if opened:
        text = text[opened.end():]
    return text.split("```")[0].strip("\n")


class Harness(BaseHarness):
    max_turns = 3
    token_budget = 640

    def __init__(self):
        self.turns = 0
        self.answering = False

    def start(self, observation):
        text = (
            f"{observation['question']}\n\n"
            "Write a short Python program that computes the answer and prints it. "
            "Reply with the program only."
        )
        return self.code_turn(text)

    def code_turn(self, text):
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=200,
                      stop=["```"], prefix=CODE_PREFIX)

    def answer_turn(self, text):
        self.answering = True
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=16,
                      stop=["}"], prefix=ANSWER_PREFIX)

    def act(self, completion):
        self.turns += 1
        if self.answering or self.turns >= self.max_turns:
            return Finish()
        code = code_of(completion)
        if not code.strip():
            return self.answer_turn("No program was written. Give your best answer as an integer in \\boxed{}.")
        return Call("python", {"code": code, "timeout_s": 5})

    def observe(self, observation):
        if "error" in observation:
            output, ok = f"Error: {observation['error']}", False
        else:
            output, ok = tail(observation["output"]), observation["ok"]
        # The last turn must stay free for the answer.
        if not ok and self.turns + 1 < self.max_turns:
            return self.code_turn(f"The program failed:\n{output}\n\nWrite a corrected program that prints the answer.")
        return self.answer_turn(f"The program printed:\n{output}\n\nWhat is the final answer? Write it as an integer in \\boxed{{}}.")
