"""Offline-proposer primitives: what each edit does to a harness, through hooks, the engine and real domains."""
from __future__ import annotations

import ast

import chess
import pytest

from domains import get_domain
from harnesses.contract import Call, Finish, Prompt
from harnesses.proposers.offline import (
    masked,
)
from harnesses.proposers.primitives.edit import (
    append_sentence,
    class_constant,
    instruction_literal,
    set_class_constant,
)
from harnesses.sandbox import HarnessSandbox, static_violations
from tests.offline_support import CHESS, MATH, PROGRAM, SEARCH, edited, hooks
from whale.rollout.backends.base import Backend, GenResult, Sampling
from whale.rollout.engine import Engine


def test_format_nudge_asks_once_for_the_answer_only_when_it_is_missing():
    source = edited("math_reasoning", "format_nudge", MATH)
    assert class_constant(source, "max_turns") == 3
    start = ("start", {"question": "What is 2+3?"})
    _, nudge, after = hooks(source, [start, ("act", "It is five."), ("act", "Still five.")])
    assert isinstance(nudge, Prompt) and "\\boxed{}" in nudge.messages[0]["content"]
    assert (nudge.prefix, nudge.stop) == ("\\boxed{", ["}"])  # the nudge turn is the answer turn
    assert isinstance(after, Finish)  # one nudge only
    _, done = hooks(source, [start, ("act", "So \\boxed{5}.")])
    assert isinstance(done, Finish)


def test_answer_prefix_opens_the_last_turn_with_the_answer_tag():
    source = edited("search_qa", "answer_prefix", SEARCH)
    obs = {"tool": "search", "error": None, "passages": [{"title": "Brasko", "text": "A town."}]}
    first, call, last = hooks(source, [("start", {"question": "Where?"}), ("act", "<search>x</search>"),
                                       ("observe", obs)])
    assert first.prefix == "" and isinstance(call, Call)
    assert (last.prefix, last.stop) == ("<answer>", ["</answer>"])


@pytest.mark.parametrize("order", [("answer_prefix", "format_nudge"), ("format_nudge", "answer_prefix")])
def test_a_nudge_stacked_with_answer_prefix_opens_with_the_answer_tag_in_either_order(order):
    inner, outer = order
    source = edited("search_qa", outer, edited("search_qa", inner, SEARCH))
    start = ("start", {"question": "Where?"})
    actions = hooks(source, [start, ("act", "It is Brasko.")])
    nudge = actions[-1]
    assert isinstance(nudge, Prompt) and "<answer>" in nudge.messages[0]["content"]
    assert (nudge.prefix, nudge.stop) == ("<answer>", ["</answer>"])


def test_search_arguments_and_query_rewrites_reach_the_call():
    source = edited("search_qa", "query_add_entity", edited("search_qa", "top_k_3", SEARCH))
    _, call = hooks(source, [("start", {"question": "Where was Tavel Orimund born?"}),
                             ("act", "<search>birthplace</search>")])
    assert call == Call("search", {"query": "birthplace Tavel Orimund", "top_k": 3, "max_chars": 800})


SHARED = """from harnesses.contract import BaseHarness, Prompt

ASK = Prompt(messages=[{"role": "user", "content": "Answer in <answer> tags, please."}])


class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        return ASK

    def act(self, completion):
        return ASK
"""


def test_layers_copy_what_they_change_so_shared_prompts_do_not_leak_between_episodes():
    source = edited("search_qa", "answer_prefix", SHARED)
    with HarnessSandbox(source) as sandbox:
        sandbox.calls([(0, "start", {"question": "q"})])
        [(_, last)] = sandbox.calls([(0, "act", "no tags")])
        [(_, fresh)] = sandbox.calls([(1, "start", {"question": "q"})])
    assert last["prefix"] == "<answer>" and fresh["prefix"] == ""


# --- the source edits themselves ---------------------------------------------------------------

def test_class_constants_are_edited_in_place_or_layered_when_inherited():
    once = set_class_constant(MATH, "max_turns", 5, "max_turns_5", "h")
    assert "max_turns = 5  # offline proposer: max_turns_5" in once
    assert len(once.splitlines()) == len(MATH.splitlines())
    bare = "from harnesses.contract import BaseHarness\n\nclass Harness(BaseHarness):\n    pass\n"
    assert class_constant(bare, "token_budget") == 512
    layered = set_class_constant(bare, "token_budget", 1024, "t", "h")
    assert class_constant(layered, "token_budget") == 1024 and static_violations(layered) == []


@pytest.mark.parametrize("prompt", [
    'TEXT = "Answer in <answer> tags, please."\n',
    'TEXT = """Answer in\n<answer> tags."""\n',
    'TEXT = (\n    "Answer in "\n    "<answer> tags."\n)\n',
])
def test_a_sentence_joins_the_instruction_literal(prompt):
    source = prompt + "x = 1\n"
    out = append_sentence(source, "<answer>", "\nCheck it.", "c")
    namespace: dict = {}
    exec(compile(out, "m", "exec"), namespace)  # noqa: S102 (trusted test text)
    assert namespace["TEXT"].endswith("tags.\nCheck it.") or namespace["TEXT"].endswith("please.\nCheck it.")
    assert masked(out) == masked(source) and "offline proposer: c" in out


def test_the_instruction_literal_is_the_one_start_shows():
    node, text = instruction_literal(PROGRAM, "\\boxed{")
    assert "Write a short Python program" in text  # not the docstring, not the nudge in act()
    assert isinstance(ast.parse(PROGRAM), ast.Module) and node.lineno > 30


# --- chess ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chess_examples(tmp_path_factory):
    domain = get_domain("chess_puzzles", str(tmp_path_factory.mktemp("chess")))
    return domain, domain.generate({"weight": 0, "harness": 3, "test": 0}, seed=0)["harness"]


class ChessPicker(Backend):
    """A stand-in model for a choice-constrained turn: picks the reference move, or another one."""

    weights_id = "scripted"

    def __init__(self, tokenizer, examples, right=True):
        self.tokenizer, self.right, self.choices = tokenizer, right, {}
        self.gold = {e.public["fen"]: e.gold["moves"][0] for e in examples}

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            fen = self.tokenizer.decode(req.ids).rsplit("FEN: ", 1)[1].split("\n", 1)[0]
            self.choices[fen] = req.choices
            wanted = self.gold[fen] + "</move>"
            pick = wanted if self.right else next(c for c in req.choices if c != wanted)
            out.append(GenResult(self.tokenizer.encode(pick, add_special_tokens=False), "stop"))
        return out


@pytest.mark.parametrize("right", [True, False])
def test_legal_choices_make_every_answer_a_legal_move(chess_examples, tokenizer, right):
    domain, examples = chess_examples
    examples = [e for e in examples if e.public["n_solver_moves"] == 1]
    assert examples
    source = edited("chess_puzzles", "legal_choices", CHESS)
    backend = ChessPicker(tokenizer, examples, right)
    rollouts = Engine(backend, domain, Sampling()).run(source, examples, k=1, seed=0, progress=False)
    for r, ex in zip(rollouts, examples, strict=False):
        legal = domain.environment(ex).reset()["legal_uci"]
        assert backend.choices[ex.public["fen"]] == [m + "</move>" for m in legal]
        assert r.error is None and r.formatted and r.turns == 1
        assert r.messages[-1]["content"].startswith("<move>") and r.messages[-1]["content"].endswith("</move>")
        assert r.reward == (1.0 if right else 0.0)


@pytest.mark.parametrize("name", ["grouped_moves", "annotated_moves"])
def test_move_lists_replace_the_flat_list_and_keep_every_move(chess_examples, name):
    domain, examples = chess_examples
    observation = domain.environment(examples[0]).reset()
    [prompt] = hooks(edited("chess_puzzles", name, CHESS), [("start", observation)])
    text = prompt.messages[-1]["content"]
    assert " ".join(observation["legal_uci"]) not in text
    for uci, san in zip(observation["legal_uci"], observation["legal_san"], strict=False):
        assert text.count(f"{uci} ({san}") == 1


def test_annotated_captures_name_the_piece_they_take(chess_examples):
    domain, examples = chess_examples
    # the gold move of a win_piece puzzle captures an undefended knight, bishop, rook or queen
    ex = next(e for e in examples if e.public["type"] == "win_piece")
    observation = domain.environment(ex).reset()
    [prompt] = hooks(edited("chess_puzzles", "annotated_moves", CHESS), [("start", observation)])
    text = prompt.messages[-1]["content"]
    board = chess.Board(observation["fen"])
    captures = [m for m in board.legal_moves if board.is_capture(m)]
    assert captures
    for move in captures:
        piece = board.piece_at(move.to_square)
        name = chess.piece_name(piece.piece_type) if piece else "pawn"  # en passant
        assert f"{move.uci()} ({board.san(move)}, takes {name})" in text


def test_lenient_move_plays_the_last_legal_move_named(chess_examples):
    domain, examples = chess_examples
    observation = domain.environment(examples[0]).reset()
    first_san, last_uci = observation["legal_san"][0], observation["legal_uci"][-1]
    source = edited("chess_puzzles", "lenient_move", CHESS)
    _, call = hooks(source, [("start", observation), ("act", f"Maybe {first_san}!, no: {last_uci}.")])
    assert call == Call("move", {"move": last_uci})
    _, retry = hooks(source, [("start", observation), ("act", "I resign zz9")])
    assert isinstance(retry, Prompt)  # nothing legal named: the seed's own format retry
