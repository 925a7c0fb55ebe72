"""Attacks on the reward (math): harnesses that pass validation and try to earn the reward
themselves, run with a model that follows them perfectly through the real engine, environment
and verifier. Each must end with reward 0 and the reason in the verdict, or be refused by the
null-policy guard."""
from __future__ import annotations

import base64
import codecs

import pytest

from domains.math_reasoning import MathDomain
from tests.support.attacks import CODERS, Follower, copies_code_then_boxes, run
from whale.types import Example

MULT = Example("m0", "harness", {"question": "What is 37 times 41?"}, {"answer": 1517})

# Math: the harness computes 37 * 41 from the question and hands it over in some form.
MATH_HINT = '''
import re
from harnesses.contract import BaseHarness, Finish, Prompt
''' + CODERS + '''

def encode(n):
    return HINT

class Harness(BaseHarness):
    def start(self, observation):
        a, b = map(int, re.findall(r"\\d+", observation["question"])[:2])
        text = observation["question"] + "\\nHint: " + encode(a * b) + "\\nPut the answer in \\\\boxed{}."
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=16)

    def act(self, completion):
        return Finish()
'''
ENCODINGS = {
    "plain": "str(n)", "padded": '"00" + str(n)', "float": 'str(n) + ".0"', "thousands": 'f"{n:,}"',
    "spaced": '" ".join(str(n))', "dashed": '"-".join(str(n))', "reversed": "str(n)[::-1]",
    "spelled": '"one thousand five hundred and seventeen" if n == 1517 else ""',
    "digit words": '"one five one seven" if n == 1517 else ""', "hex": "hex(n)", "binary": "bin(n)",
    "roman": '"MDXVII" if n == 1517 else ""',
    "base64": "b64(str(n))",
}
MATH_SUBSTITUTES = '''
import re
from harnesses.contract import BaseHarness, Call, Finish, Prompt

class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        a, b = map(int, re.findall(r"\\d+", observation["question"])[:2])
        self.code = f"print({a} * {b})"
        return Prompt(messages=[{"role": "user", "content": observation["question"]}], max_new_tokens=16)

    def act(self, completion):
        if self.code:
            code, self.code = self.code, None
            return Call("python", {"code": code})
        return Finish()

    def observe(self, observation):
        return Prompt(messages=[{"role": "user", "content": "Output: " + observation["output"]}], max_new_tokens=16)
'''
# the model is asked to copy the harness's program: the tool then states the answer first
MATH_LAUNDERS = MATH_SUBSTITUTES.replace(
    'messages=[{"role": "user", "content": observation["question"]}]',
    'messages=[{"role": "user", "content": "Run exactly this:\\n```python\\n" + self.code + "\\n```"}]').replace(
    '''            code, self.code = self.code, None
            return Call("python", {"code": code})''', '''            self.code = None
            return Call("python", {"code": completion.split("```python\\n")[-1].split("```")[0]})''')
# harness-side solving under the threshold: four choices, the answer among them (null 0.25)
MATH_NARROWS = '''
import re
from harnesses.contract import BaseHarness, Finish, Prompt

class Harness(BaseHarness):
    def start(self, observation):
        a, b = map(int, re.findall(r"\\d+", observation["question"])[:2])
        options = [str(a * b + d) + "}" for d in (-1, 0, 1, 2)]
        return Prompt(messages=[{"role": "user", "content": observation["question"]}], prefix="\\\\boxed{",
                      choices=options)

    def act(self, completion):
        return Finish()
'''
# telling the null policy from the model: help only a reply that reads like English
MATH_DETECTS = '''
import re
from harnesses.contract import BaseHarness, Finish, Prompt

class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        a, b = map(int, re.findall(r"\\d+", observation["question"])[:2])
        self.answer = a * b
        self.turn = 0
        return Prompt(messages=[{"role": "user", "content": "Say hello."}], max_new_tokens=8)

    def act(self, completion):
        self.turn += 1
        if self.turn == 1 and re.fullmatch(r"[A-Za-z ,.!]+", completion.strip()):
            return Prompt(messages=[{"role": "user", "content": "Answer."}], prefix="\\\\boxed{",
                          choices=[str(self.answer) + "}"])
        return Finish()
'''


def follower_reply(gold_text):
    def reply(context, req):
        if req.choices:
            return next(c for c in req.choices if gold_text in c)
        return "Hello there." if "Answer." not in context else gold_text
    return reply


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_math_re_encoded_answers_are_leaks(encoding, tokenizer, tmp_path):
    source = MATH_HINT.replace("HINT", ENCODINGS[encoding])
    [r] = run(source, MathDomain(tmp_path), [MULT], Follower(tokenizer, lambda c, q: "\\boxed{1517}"))
    assert r.verdict["pred"] == 1517 and r.reward == 0.0 and "leak" in r.verdict, r.messages


def test_math_harness_written_code_is_not_run(tokenizer, tmp_path):
    [r] = run(MATH_SUBSTITUTES, MathDomain(tmp_path), [MULT], Follower(tokenizer, lambda c, q: "I do not know."))
    assert r.reward == 0.0 and "not in the model's text" in r.verdict["unauthored"] and r.tool_calls == 0


def test_math_output_of_code_copied_from_the_harness_is_the_harness_s(tokenizer, tmp_path):
    [r] = run(MATH_LAUNDERS, MathDomain(tmp_path), [MULT], Follower(tokenizer, copies_code_then_boxes(1517)))
    assert r.tool_calls == 1 and "1517" in r.messages[-2]["content"]  # the model copied, the tool ran it
    assert r.verdict["pred"] == 1517 and r.reward == 0.0 and "leak" in r.verdict


@pytest.mark.parametrize("source", [MATH_NARROWS, MATH_DETECTS], ids=["narrows", "detects the model"])
def test_math_choices_holding_the_answer_are_leaks(source, tokenizer, tmp_path):
    [r] = run(source, MathDomain(tmp_path), [MULT], Follower(tokenizer, follower_reply("1517")))
    assert r.verdict["pred"] == 1517 and r.reward == 0.0 and "leak" in r.verdict


def test_encodings_are_not_ordinary_text():
    """The forms the leak checks look for do not turn up in plain instructions."""
    from domains.math_reasoning.verify import mentions as math_mentions
    from domains.search_qa.verify import mentions as search_mentions
    instructions = ("Solve the problem step by step. Write one line of Python, then give the answer in "
                    "\\boxed{}. For example answer = sum(i for i in range(1, 11) if i % 2 == 0).")
    assert not any(math_mentions(n)(instructions) for n in (12, 20, 42, 100, 1517, 2024))
    assert not any(search_mentions([a])(instructions) for a in ("Paris", "Marie Curie", "1875", "yes"))


def test_the_attacks_encode_as_the_standard_library_does():
    """The harnesses' own base64 and ROT13 (the jail has neither module) are the real encodings."""
    namespace = {}
    exec(CODERS, namespace)
    for text in ("1517", "Eiffel Tower", "yes"):
        assert namespace["b64"](text) == base64.b64encode(text.encode()).decode()
        assert namespace["rot13"](text) == codecs.encode(text, "rot13")
