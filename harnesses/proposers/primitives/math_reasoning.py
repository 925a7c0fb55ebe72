"""math_reasoning primitives: ask for a program and relay its output, the program as one
expression, repair failed programs, lenient code extraction, answer by choosing among the integers
the program printed, and ending on a turn that already holds the boxed answer.

Facts used (domains/math_reasoning/notes.md): the verifier reads the last assistant message
only and wants ``\\boxed{<integer>}``; ``Call("python", {"code": ...})`` extracts the first
fenced block itself (an unclosed fence included); observations are
``{"output", "ok", "timed_out"}`` or ``{"error"}``.
"""
from __future__ import annotations

from harnesses.contract import MAX_CHOICE_CHARS
from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer, more_turns
from harnesses.proposers.primitives.edit import NotApplicable, class_constant, quote, raw
from harnesses.proposers.primitives.layers import math_reasoning as layers

BOXED = r"\\boxed\{\s*[+-]?[0-9][0-9,]*\s*\}"
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
    return layer(source, p, layers.ProgramThenAnswer, TURNS=max(class_constant(source, "max_turns"), 2),
                 ANSWER_PREFIX=quote(info.answer_prefix), ANSWER_STOP=quote(info.answer_stop),
                 ANSWER_TOKENS=info.answer_tokens)


def one_expression(source: str, info: DomainInfo, p: Primitive) -> Edit:
    if r'"```python\n"' not in source:
        raise NotApplicable("no turn opens a ```python fence for a program")
    return layer(source, p, layers.OneExpression)


def fix_on_error(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.FixOnError, TURNS=more_turns(source, 1))


def lenient_code(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.LenientCode, ANSWER_PATTERN=raw(info.answer_pattern))


def answer_first(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.AnswerFirst, ANSWER_PATTERN=raw(info.answer_pattern))


def printed_choices(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.PrintedChoices, ANSWER_PREFIX=quote(info.answer_prefix),
                 ANSWER_STOP=quote(info.answer_stop), LONGEST=MAX_CHOICE_CHARS - len(info.answer_stop))


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
