"""The chess example h0 with annotated legal moves: what it shows, and whole episodes through the
engine (solved by a model that picks the reference move, not by the null policy)."""
from __future__ import annotations

import re
from pathlib import Path

import chess
import pytest

from domains.chess_puzzles import ChessEnvironment
from harnesses.contract import Call, Finish, Prompt
from harnesses.examples.chess_annotated import Harness
from harnesses.sandbox import static_violations
from tests.support.chess import MATE2, LineBackend, prepared_domain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine
from whale.types import Example

SOURCE = Path(__file__).resolve().parents[2] / "harnesses" / "examples" / "chess_annotated.py"
# White to move: only Qxd8# takes (the rook) and mates; every other move is quiet
MIXED = Example("mixed", "test", {"fen": "3r2k1/5ppr/8/8/8/8/5PPP/3Q2K1 w - - 0 1", "type": "mate1",
                                  "n_solver_moves": 1}, {"moves": ["d1d8"]})


def test_example_passes_the_sandbox_static_check():
    assert static_violations(SOURCE.read_text()) == []


def test_start_groups_the_legal_moves_and_offers_each_as_the_answer():
    env = ChessEnvironment(MIXED)
    obs = env.reset()
    p = Harness().start(obs)
    user = p.messages[1]["content"]
    assert "Checkmates: d1d8 (Qxd8#, takes rook)" in user
    assert re.search(r"^Other moves: .*d1e1 \(Qe1\)", user, re.M)
    assert "Captures" not in user and "Checks" not in user  # empty groups are left out
    listed = re.findall(r"\b([a-h][1-8][a-h][1-8][qrbn]?) \(", user)
    assert sorted(listed) == sorted(m.uci() for m in chess.Board(MIXED.public["fen"]).legal_moves)
    assert p.prefix == "<move>" and p.choices == [m + "</move>" for m in obs["legal_uci"]]


def test_act_calls_the_chosen_move_and_a_wrong_or_finished_line_ends():
    env, h = ChessEnvironment(MATE2), Harness()
    h.start(env.reset())
    assert h.act("<move>c3a3</move>") == Call("move", {"move": "c3a3"})
    step = env.step(Call("move", {"move": "c3a3"}))
    nxt = h.observe(step.data)
    assert isinstance(nxt, Prompt) and "The opponent replied e6a6" in nxt.messages[0]["content"]
    assert "a3a6</move>" in nxt.choices
    assert isinstance(h.observe({"event": "illegal", "move": "x"}), Finish)
    assert isinstance(h.act("no tag"), Finish)


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    return prepared_domain(tmp_path_factory.mktemp("data"), 8)


def test_the_reference_moves_solve_and_the_null_policy_does_not(domain, tokenizer):
    examples = domain.examples("test") + [MATE2]
    solved = Engine(LineBackend(tokenizer, examples, "{}</move>"), domain, Sampling()).run(
        SOURCE.read_text(), examples, k=1, seed=0, progress=False)
    for r, e in zip(solved, examples, strict=True):
        assert r.error is None and (r.reward, r.formatted) == (1.0, True)
        assert r.turns == e.public["n_solver_moves"]
    null = Engine(NullBackend(tokenizer), domain, Sampling()).run(SOURCE.read_text(), examples, k=8, seed=0,
                                                                  progress=False)
    assert all(r.error is None for r in null)
    # a uniform pick among 2-48 legal moves: far below the guard's 0.25
    assert sum(r.reward for r in null) / len(null) < 0.25
