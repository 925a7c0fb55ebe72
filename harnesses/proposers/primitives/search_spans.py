"""search_qa primitives that constrain a turn to the retrieved passages' names (the choice
constraint): the answer as one of them, and the second search of a two-hop question as one of them.

The layers' code and how spans are found: ``layers/search_spans.py``.

Engine facts used: the completion handed to ``act`` is the whole assistant message, the turn's
prefix included (the contract), and the verifier reads the message's ``<answer>`` tags after it.
"""
from __future__ import annotations

from harnesses.contract import MAX_CHOICE_CHARS
from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer
from harnesses.proposers.primitives.edit import NotApplicable, class_constant, set_class_constant
from harnesses.proposers.primitives.layers import search_spans as layers

# A span is followed by its closing tag in a choice.
LONGEST_SPAN = MAX_CHOICE_CHARS - max(len("</answer>"), len("</search>"))


def answer_spans(source: str, info: DomainInfo, p: Primitive) -> Edit:
    if class_constant(source, "max_turns") < 2:
        raise NotApplicable("the answer needs a turn after a search")
    return layer(source, p, layers.AnswerSpans, renames={"span_turns": "answer_turns"}, LONGEST=LONGEST_SPAN)


def bridge_choice(source: str, info: DomainInfo, p: Primitive) -> Edit:
    if class_constant(source, "max_turns") < 3:  # search, bridge search, answer
        source = set_class_constant(source, "max_turns", 3, "bridge_max_turns", p.hypothesis)
    return layer(source, p, layers.BridgeChoice, renames={"span_turns": "bridge_turns"}, LONGEST=LONGEST_SPAN)
