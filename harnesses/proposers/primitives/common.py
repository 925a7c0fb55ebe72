"""Primitives every domain shares, and the types of the library.

A primitive is one mechanism: a function that edits a harness's source, plus what the proposer
needs to choose it (the failures it addresses, a prior, the axis it changes, whether it touches
prompt text only). Domain modules supply a ``DomainInfo`` (the answer format and the sentences to
use) and their own primitives; ``harnesses.proposers.primitives.library`` puts them together.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harnesses.contract import HARD_MAX_TURNS, HARD_TOKEN_BUDGET
from harnesses.proposers.primitives.edit import (
    NotApplicable,
    add_layer,
    append_sentence,
    class_constant,
    quote,
    raw,
    set_class_constant,
)
from harnesses.proposers.primitives.layers import common as layers
from harnesses.proposers.primitives.render import render

# The failure kinds a failure profile measures (rates over the incumbent's rollouts).
FAILURES = ("not_formatted", "truncated", "turn_cap", "wrong", "error", "tool_error", "no_tool")


@dataclass(frozen=True)
class DomainInfo:
    """What the common primitives need to know about a domain's answer format."""

    name: str
    marker: str  # text that names the answer format in a prompt ("\\boxed{", "<answer>")
    answer_pattern: str  # regex: a turn holds an answer the verifier can parse
    answer_prefix: str  # assistant prefill that opens the answer
    answer_stop: str  # stop string that closes it
    answer_tokens: int  # room for the answer after the prefix
    nudge: str  # user message asking for the answer in the format
    checklist: str  # a checklist sentence for the instructions
    reminder: str  # the format restated with an example
    tool_hint: str  # a sentence on when and how to use the domain's tool
    answer_style: str  # a sentence on what the answer itself should look like
    # an episode in which the environment executed no action has not used the domain's tool
    # (search, python); in chess the move is the answer, so there this is no failure
    tool_expected: bool = True


@dataclass(frozen=True)
class Edit:
    source: str
    tag: str


@dataclass(frozen=True)
class Primitive:
    """One mechanism. ``edit(source, info, self)`` returns an Edit or raises NotApplicable."""

    name: str
    axis: str
    hypothesis: str
    addresses: tuple[str, ...]
    prior: float
    edit: Callable[[str, DomainInfo, Primitive], Edit]
    prompt_only: bool = False
    # The tags it writes besides its name, as a regular expression (budgets carry their value).
    writes: str = ""

    def apply(self, source: str, info: DomainInfo) -> Edit:
        return self.edit(source, info, self)


def layer(source: str, p: Primitive, cls: type, tag: str | None = None,
          renames: dict[str, str] | None = None, **values) -> Edit:
    """A subclass layer rendered from layer class ``cls`` (``layers``): its slots filled with
    ``values`` (Python text or ints), its identifiers renamed by ``renames``."""
    tag = tag or p.name
    return Edit(add_layer(source, tag, p.hypothesis, render(cls, values, renames)), tag)


def more_turns(source: str, extra: int) -> int:
    turns = class_constant(source, "max_turns") + extra
    if turns > HARD_MAX_TURNS:
        raise NotApplicable(f"max_turns would exceed the hard cap of {HARD_MAX_TURNS}")
    return turns


# --- edits -----------------------------------------------------------------------------------

def format_nudge(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.FormatNudge, TURNS=more_turns(source, 1), ANSWER_PATTERN=raw(info.answer_pattern),
                 NUDGE=quote(info.nudge), ANSWER_PREFIX=quote(info.answer_prefix),
                 ANSWER_STOP=quote(info.answer_stop), ANSWER_TOKENS=info.answer_tokens)


def answer_prefix(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.AnswerPrefix, ANSWER_PREFIX=quote(info.answer_prefix),
                 ANSWER_STOP=quote(info.answer_stop), ANSWER_TOKENS=info.answer_tokens)


def turns_up(extra: int):
    def edit(source: str, info: DomainInfo, p: Primitive) -> Edit:
        turns = more_turns(source, extra)
        tag = f"max_turns_{turns}"
        return Edit(set_class_constant(source, "max_turns", turns, tag, p.hypothesis), tag)
    return edit


def more_tokens(source: str, info: DomainInfo, p: Primitive) -> Edit:
    budget = min(2 * class_constant(source, "token_budget"), HARD_TOKEN_BUDGET)
    if budget <= class_constant(source, "token_budget"):
        raise NotApplicable("the token budget is at the hard cap")
    return layer(source, p, layers.MoreTokens, tag=f"tokens_x2_{budget}", BUDGET=budget)


def sentence(pick: Callable[[DomainInfo], str]):
    """A prompt-only edit: one sentence appended to the instruction that names the format."""
    def edit(source: str, info: DomainInfo, p: Primitive) -> Edit:
        return Edit(append_sentence(source, info.marker, "\n" + pick(info), p.name), p.name)
    return edit


BREVITY = "Keep the reply short: a few sentences at most before the answer."

COMMON = (
    Primitive("format_nudge", "retries", "episodes that end without a parsable answer get one "
              "more turn asking for the answer in the required format",
              ("not_formatted",), 1.0, format_nudge),
    Primitive("answer_prefix", "parsing", "prefilling the answer tag on the last allowed turn "
              "makes every episode end with a parsable answer", ("not_formatted", "truncated"),
              1.0, answer_prefix),
    Primitive("turns_plus_1", "budgets", "episodes hit the turn cap: one more turn lets them finish",
              ("turn_cap",), 0.8, turns_up(1), writes=r"max_turns_\d+"),
    Primitive("turns_plus_2", "budgets", "episodes hit the turn cap: two more turns let multi-step "
              "episodes finish", ("turn_cap",), 0.5, turns_up(2), writes=r"max_turns_\d+"),
    Primitive("more_tokens", "budgets", "turns are cut off by their token limit: twice the room "
              "per turn and per episode lets the answer be written", ("truncated",), 0.8, more_tokens,
              writes=r"tokens_x2_\d+"),
    Primitive("checklist", "prompt", "a one-line checklist in the instructions makes the model "
              "check its answer and the format before it ends", ("wrong", "not_formatted"), 0.5,
              sentence(lambda info: info.checklist), prompt_only=True),
    Primitive("format_reminder", "prompt", "restating the answer format with an example makes "
              "the model write it", ("not_formatted",), 0.6, sentence(lambda info: info.reminder),
              prompt_only=True),
    Primitive("tool_hint", "prompt", "saying when and how to use the tool makes the model use it "
              "before answering", ("no_tool", "wrong"), 0.5, sentence(lambda info: info.tool_hint),
              prompt_only=True),
    Primitive("answer_style", "prompt", "saying what the answer itself looks like keeps it short "
              "and parsable", ("wrong", "not_formatted"), 0.4, sentence(lambda info: info.answer_style),
              prompt_only=True),
    Primitive("brevity", "prompt", "asking for a short reply keeps turns inside their token limit",
              ("truncated",), 0.5, sentence(lambda info: BREVITY), prompt_only=True),
)
