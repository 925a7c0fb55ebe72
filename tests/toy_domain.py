"""A toy domain built for engine tests: an `echo` tool and a verifier that wants "<answer>" text."""
from __future__ import annotations

from domains.base import Domain, Environment, Observation, last_assistant
from whale.types import Example, Verdict


class EchoEnvironment(Environment):
    def __init__(self, example):
        self.example, self.calls = example, 0

    def reset(self):
        return {"question": self.example.public["question"]}

    def step(self, call):
        self.calls += 1
        if call.tool == "end":
            return Observation({"event": "over"}, done=True)
        if call.tool != "echo":
            return Observation({"error": f"unknown tool {call.tool!r}"})
        return Observation({"tool": "echo", "output": str(call.args.get("text", ""))[::-1]})

    def final_state(self):
        return {"calls": self.calls}


class ToyDomain(Domain):
    name = "toy"

    def __init__(self, n=3):
        self.items = [Example(f"toy-{i}", "test", {"question": f"say {i}"}, {"answer": str(i)}) for i in range(n)]

    def examples(self, split):
        return self.items

    def environment(self, example):
        return EchoEnvironment(example)

    def verify(self, example, messages, state):
        text = last_assistant(messages)
        return Verdict(float(example.gold["answer"] in text), "<" in text, {"calls": state.get("calls")})


ECHO_HARNESS = '''
from harnesses.contract import BaseHarness, Prompt, Call, Finish

class Harness(BaseHarness):
    max_turns = 3
    token_budget = 40

    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": observation["question"]}], max_new_tokens=8)

    def act(self, completion):
        completion = completion.removeprefix("<")  # the prefix is the harness's text, not the model's
        return Call("echo", {"text": completion})

    def observe(self, observation):
        return Prompt(messages=[{"role": "user", "content": "Echo: " + observation["output"]}],
                      max_new_tokens=8, prefix="<")
'''
