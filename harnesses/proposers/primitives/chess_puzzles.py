"""chess_puzzles primitives: a move tag prefilled on every turn, a choice constraint over the
legal moves, grouped and annotated move lists, the board diagram, lenient move parsing and more
retries after malformed or illegal answers.

Facts used (domains/chess_puzzles/notes.md): every observation carries ``legal_uci`` and
``legal_san`` (same moves, same order; SAN marks captures x, checks +, mates #), ``board``
(ASCII), ``event`` (start, correct, illegal, malformed) and ``move``; ``Call("move", {"move"})``
takes UCI or SAN. The harness may format and group the environment's lists and restrict output
to them; it may not generate or evaluate moves itself.
"""
from __future__ import annotations

from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer
from harnesses.proposers.primitives.edit import quote
from harnesses.proposers.primitives.layers import chess_puzzles as layers

INFO = DomainInfo(
    name="chess_puzzles",
    marker="<move>",
    answer_pattern=r"(?is)<move>\s*\S+?\s*</move>",
    answer_prefix="<move>",
    answer_stop="</move>",
    answer_tokens=12,
    nudge="Now give only your move inside <move></move> tags.",
    checklist="Before answering, check that your move is in the list of legal moves.",
    reminder="Write only the move inside the tags, for example <move>e2e4</move>.",
    tool_hint="Look at checks first, then captures, then the other moves.",
    tool_expected=False,
    answer_style="A move is its from-square and to-square, like g1f3, and must be one of the legal moves.",
)
# Common primitives the chess ones replace (every chess turn is an answer turn, not just the last).
REPLACES = ("answer_prefix",)


def move_prefix(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.MovePrefix)


def legal_choices(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.LegalChoices,
                 renames={"tracked_position": "choice_position", "wrap_prompt": "only_legal"})


def grouped_moves(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.GroupedMoves, renames={
        "tracked_position": "grouped_position", "wrap_prompt": "group_moves", "list_block": "grouped_list"})


def annotated_moves(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.AnnotatedMoves, renames={
        "tracked_position": "annotated_position", "wrap_prompt": "annotate_moves", "list_block": "annotated_list"})


def board_diagram(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.BoardDiagram,
                 renames={"tracked_position": "board_position", "wrap_prompt": "add_board"})


def lenient_move(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.LenientMove, renames={"tracked_position": "lenient_position"})


def more_retries(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, layers.MoreRetries, ASK=quote("Answer with one legal move inside <move></move> tags."))


PRIMITIVES = (
    Primitive("move_prefix", "parsing", "every turn is prefilled with <move> and stops at </move>, so "
              "each answer is exactly one move tag", ("not_formatted", "truncated"), 1.0, move_prefix),
    Primitive("legal_choices", "parsing", "a choice constraint over the legal moves (UCI) makes every "
              "answer a legal move", ("not_formatted", "tool_error", "wrong"), 1.1, legal_choices),
    Primitive("grouped_moves", "observation", "the legal moves grouped by piece, UCI with SAN, are "
              "easier to choose from than a flat list", ("wrong", "tool_error"), 0.6, grouped_moves),
    Primitive("annotated_moves", "observation", "the legal moves sorted into mates, checks, captures "
              "and others (from the SAN symbols), each capture naming the piece it takes (from the "
              "board), point at forcing moves and material", ("wrong",), 0.8, annotated_moves),
    Primitive("board_diagram", "observation", "the ASCII board shows where the pieces stand",
              ("wrong",), 0.4, board_diagram),
    Primitive("lenient_move", "parsing", "the last legal move named in the answer (UCI or SAN, tagged "
              "or not) is played instead of asking again", ("not_formatted", "tool_error"), 0.7, lenient_move),
    Primitive("more_retries", "retries", "two more retries after malformed or illegal answers",
              ("not_formatted", "tool_error"), 0.6, more_retries),
)
