"""math_reasoning primitives: ask for a program and relay its output, the program as one
expression, repair failed programs, lenient code extraction, answer by choosing among the integers
the program printed, and ending on a turn that already holds the boxed answer.

Facts used (domains/math_reasoning/notes.md): the verifier reads the last assistant message
only and wants ``\\boxed{<integer>}``; ``Call("python", {"code": ...})`` extracts the first
fenced block itself (an unclosed fence included); observations are
``{"output", "ok", "timed_out"}`` or ``{"error"}``.
"""
from __future__ import annotations

import textwrap

from harnesses.contract import MAX_CHOICE_CHARS
from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer, more_turns
from harnesses.proposers.primitives.edit import NotApplicable, class_constant, quote, raw

BOXED = r"\\boxed\{\s*[+-]?[0-9][0-9,]*\s*\}"
# Layer code (at a method body's indentation): ``messages``, the prompt's messages with ``ask``
# appended to the last user message, or a new user message with the question when there is none.
ASK_LINES = textwrap.indent(r'''messages = [dict(m) for m in prompt.messages]
users = [m for m in messages if m["role"] == "user"]
if users:
    users[-1]["content"] += "\n\n" + ask
else:
    messages.append({"role": "user", "content": observation["question"] + "\n\n" + ask})''', " " * 12).lstrip()

INFO = DomainInfo(
    name="math_reasoning",
    marker="\\boxed{",
    answer_pattern=BOXED,
    answer_prefix="\\boxed{",
    answer_stop="}",
    answer_tokens=16,
    nudge="Now write only the final answer as an integer in \\boxed{}.",
    checklist=("Checklist: read the question again, compute the answer exactly, "
               "and check it before you reply."),
    reminder="The final answer must be an integer inside \\boxed{}, for example \\boxed{42}.",
    tool_hint=("Do not compute in your head: write a ```python block that prints the answer, "
               "then read its output."),
    answer_style="The answer is a single integer: digits only, no units, no words, no decimals.",
)


def program_then_answer(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
        max_turns = $turns
        program_stage = "code"
        # the output is shown from its end (the answer is printed last): the tool's 4096 characters
        # of a chatty program would outgrow a 2048-token context and break the contract
        program_output_chars = 600

        def start(self, observation):
            prompt = super().start(observation)
            ask = ("Write a short Python program that computes the answer and prints it. "
                   "Reply with the program only.")
            $ask_lines
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
            return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=$tokens, stop=[$stop],
                          prefix=$prefix)
        ''', ("dataclasses", "Prompt", "Call", "Finish"), turns=max(class_constant(source, "max_turns"), 2),
        ask_lines=ASK_LINES, prefix=quote(info.answer_prefix), stop=quote(info.answer_stop), tokens=info.answer_tokens)


def one_expression(source: str, info: DomainInfo, p: Primitive) -> Edit:
    if r'"```python\n"' not in source:
        raise NotApplicable("no turn opens a ```python fence for a program")
    return layer(source, p, r'''
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
            $ask_lines
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
        ''', ("dataclasses",), ask_lines=ASK_LINES)


def fix_on_error(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
        max_turns = $turns
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
        ''', ("Prompt", "Call"), turns=more_turns(source, 1))


def lenient_code(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
        lenient_fence = re.compile(r"```")
        lenient_answer = re.compile($boxed)
        lenient_turns = 0

        def act(self, completion):
            self.lenient_turns += 1
            action = super().act(completion)
            # code in any fence (```py, ```Python, a bare ```) is a program too: the tool extracts it
            if (isinstance(action, Finish) and self.lenient_turns < self.max_turns
                    and self.lenient_fence.search(completion) and not self.lenient_answer.search(completion)):
                return Call("python", {"code": completion})
            return action
        ''', ("re", "Call", "Finish"), boxed=raw(info.answer_pattern))


def answer_first(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
        answer_first_box = re.compile($boxed)

        def act(self, completion):
            action = super().act(completion)
            # a turn that already holds a boxed integer is the answer: running its code would
            # move the answer out of the last assistant message, the only one the verifier reads
            if isinstance(action, Call) and self.answer_first_box.search(completion):
                return Finish()
            return action
        ''', ("re", "Call", "Finish"), boxed=raw(info.answer_pattern))


def printed_choices(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
        printed_number = re.compile(r"-?[0-9]+")

        def observe(self, observation):
            action = super().observe(observation)
            printed = str(observation.get("output") or "") if observation.get("ok") else ""
            # an integer too long for a choice (a factorial, a power) is left out: the contract caps
            # a choice's length, and a harness that breaks it is discarded
            numbers = [n for n in dict.fromkeys(reversed(self.printed_number.findall(printed)))
                       if len(n) <= $longest][:16]
            # the answer turn chooses among the integers a program that ran printed, the last one
            # first: the model earns the reward by writing the program, and cannot miscopy its result
            if isinstance(action, Prompt) and action.prefix.endswith($prefix) and numbers:
                return dataclasses.replace(action, prefix=$prefix, stop=[],
                                           choices=[n + $stop for n in numbers])
            return action
        ''', ("re", "dataclasses", "Prompt"), prefix=quote(info.answer_prefix), stop=quote(info.answer_stop),
                 longest=MAX_CHOICE_CHARS - len(info.answer_stop))


PRIMITIVES = (
    Primitive("program_then_answer", "prompt", "ask for a program (open ```python fence), run it, "
              "then ask for the answer with the prefix \\boxed{: the base model computes far better "
              "in code than in its head", ("wrong", "not_formatted", "no_tool"), 1.2, program_then_answer),
    Primitive("one_expression", "prompt", "the first program is one line, answer = <expression>, "
              "printed by the harness: a small model's short expressions run where its programs break "
              "or are cut off", ("tool_error", "truncated", "wrong"), 1.0, one_expression),
    Primitive("fix_on_error", "retries", "a failed program is shown with its error and gets one "
              "corrected retry before the answer turn", ("tool_error",), 0.9, fix_on_error),
    Primitive("lenient_code", "parsing", "programs written in other fences (```py, bare ```) are "
              "run instead of ending the episode", ("no_tool", "wrong"), 0.5, lenient_code),
    Primitive("printed_choices", "parsing", "the answer turn chooses among the integers the "
              "program printed: a right program's result cannot be miscopied into the box",
              ("wrong",), 1.0, printed_choices),
    Primitive("answer_first", "parsing", "a turn that already has a boxed integer ends the episode "
              "instead of running its code, so the answer stays in the last message",
              ("not_formatted",), 0.6, answer_first),
)
