"""The chess seed harness h0: its hooks in-process, and whole episodes through the engine."""
from __future__ import annotations

import re
from pathlib import Path

import chess
import pytest

from domains.chess_puzzles import ChessEnvironment
from harnesses.contract import Call, Finish, Prompt
from harnesses.sandbox import static_violations
from harnesses.seeds.chess_puzzles import Harness, parse_move
from tests.support.chess import MATE2, LineBackend, prepared_domain
from whale.rollout.backends.base import Sampling
from whale.rollout.engine import Engine

SOURCE = Path(__file__).resolve().parents[2] / "harnesses" / "seeds" / "chess_puzzles.py"


def started(example=MATE2):
    env, h = ChessEnvironment(example), Harness()
    return env, h, h.start(env.reset())


def test_seed_passes_the_sandbox_static_check():
    assert static_violations(SOURCE.read_text()) == []


def test_start_lists_position_and_every_legal_move():
    env, h, p = started()
    assert isinstance(p, Prompt) and [m["role"] for m in p.messages] == ["system", "user"]
    user = p.messages[1]["content"]
    assert MATE2.public["fen"] in user and "Side to move: white" in user
    listed = re.search(r"Legal moves: (.*)", user).group(1).split()
    assert listed == [m.uci() for m in chess.Board(MATE2.public["fen"]).legal_moves]
    assert "<move></move>" in user and p.max_new_tokens == 64 and p.stop == ["</move>"]
    assert (h.max_turns, h.token_budget) == (9, 512)


@pytest.mark.parametrize("text, expected", [
    ("<move>e2e4</move>", "e2e4"),
    ("<move>c3c1</move> no wait <move> c3a3 </move>", "c3a3"),
    ("<move>Ra3+</move>", "Ra3+"),
    ("I play c3a3 because it checks.", "c3a3"),
    ("c3a3 c3a3", "c3a3"),
    ("c3a3 or c3c1?", None),
    ("I resign", None),
    ("<move></move>", None),
])
def test_parser_takes_last_tag_else_one_bare_uci(text, expected):
    assert parse_move(text) == expected


def test_act_turns_a_move_into_a_call():
    _, h, _ = started()
    assert h.act("<move>e2e4</move>") == Call("move", {"move": "e2e4"})


def test_malformed_answer_gets_one_retry_then_finish():
    _, h, _ = started()
    retry = h.act("I think the rook should go somewhere")
    assert isinstance(retry, Prompt) and retry.messages[0]["role"] == "user"
    assert "could not find a move" in retry.messages[0]["content"]
    assert isinstance(h.act("still nothing"), Finish)


def test_illegal_move_gets_one_retry_then_finish():
    env, h, _ = started()
    obs = env.step(h.act("<move>c3c8</move>")).data
    assert obs["event"] == "illegal"
    nudge = h.observe(obs)
    assert isinstance(nudge, Prompt) and "c3c8 is not a legal move" in nudge.messages[0]["content"]
    assert isinstance(h.observe(env.step(h.act("<move>a1a2</move>")).data), Finish)


def test_correct_move_shows_the_reply_and_new_position():
    env, h, _ = started()
    obs = env.step(h.act("<move>c3a3</move>"))
    assert not obs.done
    p = h.observe(obs.data)
    text = p.messages[0]["content"]
    assert isinstance(p, Prompt) and "opponent replied e6a6" in text and obs.data["fen"] in text
    assert "a3a6" in re.search(r"Legal moves: (.*)", text).group(1).split()


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    return prepared_domain(tmp_path_factory.mktemp("data"), 3)


def test_h0_solves_with_the_reference_moves_through_the_engine(domain, tokenizer):
    examples = domain.examples("test") + [MATE2]
    engine = Engine(LineBackend(tokenizer, examples), domain, Sampling())
    for r, e in zip(engine.run(SOURCE.read_text(), examples, k=1, seed=0, progress=False), examples, strict=False):
        assert r.error is None and r.stop_reason == "answered"
        assert (r.reward, r.formatted) == (1.0, True) and r.turns == e.public["n_solver_moves"]


def test_h0_without_a_move_retries_once_and_scores_zero(domain, tokenizer):
    examples = domain.examples("test")
    engine = Engine(LineBackend(tokenizer, examples, answer_fmt="I am not sure."), domain, Sampling())
    for r in engine.run(SOURCE.read_text(), examples, k=1, seed=0, progress=False):
        assert r.error is None and r.turns == 2 and r.stop_reason == "answered"
        assert (r.reward, r.formatted) == (0.0, False)
        assert "could not find a move" in r.messages[3]["content"]
