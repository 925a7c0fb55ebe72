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


class ScriptedMath(Backend):
    """A stand-in model for the program flow: ``program`` on a code turn, ``pick`` on the answer
    turn (after "\\boxed{"), whose choices it records."""

    weights_id = "scripted"

    def __init__(self, tokenizer, program: str = "print(2 * 3)", pick: str = "6}"):
        self.tokenizer, self.program, self.pick = tokenizer, program, pick
        self.offered: list[list[str] | None] = []

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            answering = self.tokenizer.decode(req.ids).endswith("\\boxed{")
            if answering:
                self.offered.append(req.choices)
            text = self.pick if answering else self.program + "\n```"
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False), "stop"))
        return out


def answer_is_6(tmp_path):
    """The math domain and one harness-split problem whose gold answer is set to 6."""
    domain = get_domain("math_reasoning", str(tmp_path))
    example = domain.generate({"weight": 0, "harness": 1, "test": 0}, seed=0)["harness"][0]
    return domain, type(example)(example.id, example.split, example.public, {"answer": 6})


def test_program_then_answer_runs_the_program_and_boxes_its_output(tmp_path, tokenizer):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "program_then_answer", MATH)
    [r] = Engine(ScriptedMath(tokenizer), domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    assert r.error is None and r.stop_reason == "answered" and r.turns == 2
    assert r.messages[-1]["content"] == "\\boxed{6}" and "The program printed:\n6" in r.messages[-2]["content"]
    assert (r.reward, r.formatted) == (1.0, True)


@pytest.mark.parametrize(("program", "offered"), [
    ("print(2 * 3)\nprint('done after', 100, 'steps')", [["100}", "6}"]]),
    ("print(6 / 0)", [None]),  # a program that failed offers nothing to choose: the answer is free
    # 2**2000 has 603 digits, past the contract's cap on a choice: left out, not a broken harness
    ("print(2 ** 2000)\nprint(2 * 3)", [["6}"]]),
])
def test_printed_choices_offer_the_integers_a_program_printed_last_first(tmp_path, tokenizer, program, offered):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "printed_choices", PROGRAM)
    backend = ScriptedMath(tokenizer, program)
    [r] = Engine(backend, domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    assert backend.offered == offered
    assert r.error is None and r.messages[-1]["content"] == "\\boxed{6}" and r.reward == 1.0
    assert static_violations(source) == []


def test_one_expression_makes_the_first_code_turn_one_line_that_the_harness_prints(tmp_path, tokenizer):
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "one_expression", PROGRAM)
    assert static_violations(source) == []
    first = hooks(source, [("start", {"question": "What is 2 * 3?"})])[0]
    assert first.prefix == "```python\nanswer = " and first.stop == ["\n", "```"]
    assert first.messages[-1]["content"].startswith("What is 2 * 3?") and "answer = " in first.messages[-1]["content"]
    [r] = Engine(ScriptedMath(tokenizer, program="2 * 3"), domain, Sampling()).run(source, [example], k=1, seed=0,
                                                                                   progress=False)
    assert r.error is None and r.messages[1]["content"] == "```python\nanswer = 2 * 3\n```"
    assert "The program printed:\n6" in r.messages[2]["content"]
    assert r.messages[-1]["content"] == "\\boxed{6}" and r.reward == 1.0


def test_one_expression_needs_a_code_turn_and_earns_nothing_under_the_null_policy(tmp_path, tokenizer):
    from harnesses.proposers.primitives import library
    from harnesses.proposers.primitives.edit import NotApplicable
    from whale.rollout.backends.null import NullBackend

    info, primitives = library("math_reasoning")
    with pytest.raises(NotApplicable):
        next(p for p in primitives if p.name == "one_expression").apply(MATH, info)
    domain = get_domain("math_reasoning", str(tmp_path))
    examples = domain.generate({"weight": 0, "harness": 8, "test": 0}, seed=0)["harness"]
    source = edited("math_reasoning", "printed_choices", edited("math_reasoning", "one_expression", PROGRAM))
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=2, seed=1, progress=False)
    assert all(r.error is None for r in null) and sum(r.reward for r in null) == 0


def test_printed_choices_earn_nothing_under_the_null_policy(tmp_path, tokenizer):
    """Without the model there is no program that runs, so nothing to choose from: the choice
    cannot turn into a reward the model did not earn."""
    from whale.rollout.backends.null import NullBackend

    domain = get_domain("math_reasoning", str(tmp_path))
    examples = domain.generate({"weight": 0, "harness": 8, "test": 0}, seed=0)["harness"]
    source = edited("math_reasoning", "printed_choices", PROGRAM)
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(source, examples, k=2, seed=1, progress=False)
    assert all(r.error is None for r in null) and sum(r.reward for r in null) == 0


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


def test_program_then_answer_shows_a_long_output_from_its_end_within_the_context(tmp_path, tokenizer):
    # a chatty program's 3k characters relayed whole took an episode past a 2048-token context:
    # the contract refused the harness, and the search lost math's program primitive
    domain, example = answer_is_6(tmp_path)
    source = edited("math_reasoning", "program_then_answer", MATH)
    backend = ScriptedMath(tokenizer, "for i in range(200):\n    print('step number', i)\nprint(2 * 3)")
    backend.context_len = 700
    [r] = Engine(backend, domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    shown = r.messages[-2]["content"]
    assert r.error is None and r.reward == 1.0
    assert shown.startswith("The program printed:\n[first ") and "step number 199\n6" in shown and len(shown) < 800
