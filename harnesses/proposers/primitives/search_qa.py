"""search_qa primitives: retrieval arguments, query rewriting, a forced first search, the list of
passages already read, and lenient parsing of search requests.

Facts used (domains/search_qa/environment.py): ``Call("search", {"query", "top_k", "max_chars"})``
with top_k in [1, 10] (default 3) and max_chars in [1, 4000] (default 800); the observation is
``{"tool", "passages": [{"title", "text"}], "error"}``. The verifier reads the innermost
``<answer>…</answer>`` of the last assistant message.
"""
from __future__ import annotations

import ast

from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer
from harnesses.proposers.primitives.edit import NotApplicable, class_constant, quote
from harnesses.proposers.primitives.layers import search_qa as layers
from harnesses.proposers.primitives.search_spans import answer_spans, bridge_choice

INFO = DomainInfo(
    name="search_qa",
    marker="<answer>",
    answer_pattern=r"(?s)<answer>.*?</answer>",
    answer_prefix="<answer>",
    answer_stop="</answer>",
    answer_tokens=32,
    nudge="Now give only the final answer inside <answer> and </answer> tags.",
    checklist=("After each search, check whether the passage states the answer; "
               "if it does not, search again with other words."),
    reminder="End with the answer in tags, for example <answer>Marlow</answer>.",
    tool_hint="Search before answering, with the names from the question in the query.",
    answer_style="The answer is a short name, place or year copied from a passage, not a sentence.",
)


def literal_args(source: str, key: str) -> set:
    """Every literal value the module gives ``key`` in a dict display or a ``x[key] = v``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=False):
                if isinstance(k, ast.Constant) and k.value == key and isinstance(v, ast.Constant):
                    found.add(v.value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == key:
                    found.add(node.value.value)
    return found


def set_search_arg(key: str, value: int, why: str):
    def edit(source: str, info: DomainInfo, p: Primitive) -> Edit:
        if literal_args(source, key) == {value}:
            raise NotApplicable(f"every search already uses {key}={value}")
        return layer(source, p, layers.SearchArg, SEARCH_ARG=quote(key), SEARCH_VALUE=value, WHY=why)
    return edit


def search_first(source: str, info: DomainInfo, p: Primitive) -> Edit:
    if class_constant(source, "max_turns") < 2:
        raise NotApplicable("a forced search needs a second turn for the answer")
    return layer(source, p, layers.SearchFirst)


def query_add_entity(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.QueryAddEntity)


def query_from_question(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.QueryFromQuestion)


def query_short(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.QueryShort)


def retrieved_titles(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.RetrievedTitles)


def lenient_search(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.LenientSearch)


PRIMITIVES = (
    Primitive("search_first", "parsing", "the first turn is prefilled with <search> and stops at "
              "</search>, so every episode retrieves before answering", ("no_tool", "wrong"), 0.9,
              search_first),
    Primitive("top_k_3", "tool_args", "three passages per search instead of one make it likelier "
              "that the answer is retrieved", ("wrong",), 0.9,
              set_search_arg("top_k", 3, "three passages: the best BM25 hit is often not the answer's")),
    Primitive("top_k_5", "tool_args", "five passages per search cover two-hop questions",
              ("wrong", "turn_cap"), 0.5,
              set_search_arg("top_k", 5, "five passages: both hops of a question can come back at once")),
    Primitive("passages_1600", "tool_args", "longer passages (1600 characters) keep the sentence "
              "that states the answer", ("wrong",), 0.5,
              set_search_arg("max_chars", 1600, "longer passages keep the sentence with the answer")),
    Primitive("passages_400", "tool_args", "shorter passages (400 characters) leave the small model "
              "less text to get lost in", ("wrong", "truncated"), 0.4,
              set_search_arg("max_chars", 400, "short passages: less text to get lost in")),
    Primitive("query_add_entity", "tool_args", "adding the question's names to the model's query "
              "keeps retrieval on the right entity", ("wrong",), 0.5, query_add_entity),
    Primitive("query_from_question", "tool_args", "the first search adds the question's own words "
              "to the model's query, so it finds the subject's passage", ("wrong",), 0.7,
              query_from_question),
    Primitive("query_short", "tool_args", "cutting the query to its first line and eight words "
              "stops rambling queries from diluting BM25", ("wrong",), 0.4, query_short),
    Primitive("retrieved_titles", "observation", "listing the passages already read steers the "
              "next search to new ones", ("wrong", "turn_cap"), 0.5, retrieved_titles),
    Primitive("answer_spans", "parsing", "a choice constraint over the names, dates and places of the "
              "retrieved passages makes the last turn copy an answer instead of writing a sentence",
              ("not_formatted", "wrong", "truncated"), 1.1, answer_spans),
    Primitive("bridge_choice", "tool_args", "a second search chosen among the first passages' names "
              "follows a two-hop question to the bridge entity's page", ("wrong",), 0.6, bridge_choice),
    Primitive("lenient_search", "parsing", "unclosed <search> tags and 'Search: ...' lines are "
              "run as searches instead of ending the episode", ("no_tool",), 0.6, lenient_search),
)
