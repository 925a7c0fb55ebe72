"""math_reasoning layers: ask for a program and relay its output, the program as one expression,
repair a failed program, lenient code extraction, answer first, and the answer chosen among the
integers a program printed."""
import dataclasses
import re

from harnesses.contract import BaseHarness as Harness
from harnesses.contract import Call, Finish, Prompt
from harnesses.proposers.primitives.layers.slots import (
    ANSWER_PATTERN,
    ANSWER_PREFIX,
    ANSWER_STOP,
    ANSWER_TOKENS,
    LONGEST,
    TURNS,
)
from harnesses.proposers.primitives.render import inline


@inline
def ask_messages(prompt, observation, ask):
    """The prompt's messages with ``ask`` appended to the last user message, or a new user
    message with the question when there is none."""
    messages = [dict(m) for m in prompt.messages]
    users = [m for m in messages if m["role"] == "user"]
    if users:
        users[-1]["content"] += "\n\n" + ask
    else:
        messages.append({"role": "user", "content": observation["question"] + "\n\n" + ask})
    return messages


class ProgramThenAnswer(Harness):
    max_turns = TURNS
    program_stage = "code"
    # the output is shown from its end (the answer is printed last): the tool's 4096 characters
    # of a chatty program would outgrow a 2048-token context and break the contract
    program_output_chars = 600

    def start(self, observation):
        prompt = super().start(observation)
        ask = ("Write a short Python program that computes the answer and prints it. "
               "Reply with the program only.")
        messages = ask_messages(prompt, observation, ask)
        # turn 1 is code: it continues an open fence and stops at the closing one
        return dataclasses.replace(prompt, messages=messages, prefix="```python\n", stop=["```"],
                                   max_new_tokens=max(prompt.max_new_tokens, 200))

    def act(self, completion):
        if self.program_stage == "code":
            self.program_stage = "answer"
            return Call("python", {"code": completion})
        return Finish()

    def observe(self, observation):
        output = observation.get("output") or observation.get("error") or "[no output]"
        if len(output) > self.program_output_chars:
            output = (f"[first {len(output) - self.program_output_chars} characters not shown]\n"
                      + output[-self.program_output_chars:])
        text = (f"The program printed:\n{output}\n\n"
                "What is the final answer? Write it as an integer in \\boxed{}.")
        # the answer turn continues "\boxed{" and stops at "}": the box is always closed
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=ANSWER_TOKENS, stop=[ANSWER_STOP],
                      prefix=ANSWER_PREFIX)


class OneExpression(Harness):
    one_expression_stage = "start"

    def start(self, observation):
        prompt = super().start(observation)
        if not prompt.prefix.endswith("```python\n"):
            return prompt
        # the first code turn is one line, "answer = <expression>": a small model writes a short
        # expression that runs far more often than a program that does
        self.one_expression_stage = "code"
        ask = ("Complete the line of Python: answer = a single expression that computes the answer, "
               "for example answer = sum(i for i in range(1, 11) if i % 2 == 0).")
        messages = ask_messages(prompt, observation, ask)
        return dataclasses.replace(prompt, messages=messages, prefix=prompt.prefix + "answer = ",
                                   stop=["\n", "```"], max_new_tokens=100)

    def act(self, completion):
        if self.one_expression_stage == "code":
            self.one_expression_stage = "done"
            line = completion.split("answer = ", 1)[-1].split("```")[0].strip()
            # the layers below see the line as the program: the tool prints a last bare
            # expression (math imported), and the engine runs only lines the model wrote
            completion = f"```python\n{line}\n```" if line else ""
        return super().act(completion)


class FixOnError(Harness):
    max_turns = TURNS
    fix_turns = 0
    fix_used = False
    fix_pending = False

    def act(self, completion):
        self.fix_turns += 1
        if self.fix_pending:
            self.fix_pending = False
            return Call("python", {"code": completion})
        return super().act(completion)

    def observe(self, observation):
        failed = bool(observation.get("error")) or not observation.get("ok", True)
        # one repair, and only while a turn stays free for the answer after it
        if failed and not self.fix_used and self.fix_turns + 2 <= self.max_turns:
            self.fix_used = self.fix_pending = True
            shown = (observation.get("error") or observation.get("output", ""))[-600:]  # its end fits the context
            text = f"The program failed:\n{shown}\n\nWrite a corrected program that prints the answer."
            return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=200,
                          stop=["```"], prefix="```python\n")
        return super().observe(observation)


class LenientCode(Harness):
    lenient_fence = re.compile(r"```")
    lenient_answer = re.compile(ANSWER_PATTERN)
    lenient_turns = 0

    def act(self, completion):
        self.lenient_turns += 1
        action = super().act(completion)
        # code in any fence (```py, ```Python, a bare ```) is a program too: the tool extracts it
        if (isinstance(action, Finish) and self.lenient_turns < self.max_turns
                and self.lenient_fence.search(completion) and not self.lenient_answer.search(completion)):
            return Call("python", {"code": completion})
        return action


class AnswerFirst(Harness):
    answer_first_box = re.compile(ANSWER_PATTERN)

    def act(self, completion):
        action = super().act(completion)
        # a turn that already holds a boxed integer is the answer: running its code would
        # move the answer out of the last assistant message, the only one the verifier reads
        if isinstance(action, Call) and self.answer_first_box.search(completion):
            return Finish()
        return action


class PrintedChoices(Harness):
    printed_number = re.compile(r"-?[0-9]+")

    def observe(self, observation):
        action = super().observe(observation)
        printed = str(observation.get("output") or "") if observation.get("ok") else ""
        # an integer too long for a choice (a factorial, a power) is left out: the contract caps
        # a choice's length, and a harness that breaks it is discarded
        numbers = [n for n in dict.fromkeys(reversed(self.printed_number.findall(printed)))
                   if len(n) <= LONGEST][:16]
        # the answer turn chooses among the integers a program that ran printed, the last one
        # first: the model earns the reward by writing the program, and cannot miscopy its result
        if isinstance(action, Prompt) and action.prefix.endswith(ANSWER_PREFIX) and numbers:
            return dataclasses.replace(action, prefix=ANSWER_PREFIX, stop=[],
                                       choices=[n + ANSWER_STOP for n in numbers])
        return action
