"""The chess environment and verifier: the real board, scripted replies, whole-line reward."""
from __future__ import annotations

import pytest

from domains import get_domain
from domains.chess_puzzles import ChessEnvironment
from domains.chess_puzzles.verify import verify
from harnesses.contract import Call
from tests.support.chess import MATE2
from whale.types import Example

MATE1 = Example("m1", "test", {"fen": "k7/8/1K6/8/8/8/8/7R w - - 0 1", "type": "mate1", "n_solver_moves": 1},
                {"moves": ["h1h8"]})
BOARD_FIELDS = {"fen", "board", "side_to_move", "legal_uci", "legal_san", "last_opponent_move",
                "moves_played", "move_number", "type", "n_solver_moves"}


def move(text):
    return Call("move", {"move": text})


def test_start_observation_shows_the_board_not_the_line():
    obs = ChessEnvironment(MATE2).reset()
    assert set(obs) == BOARD_FIELDS | {"event"} and obs["event"] == "start"
    assert obs["fen"] == MATE2.public["fen"] and obs["side_to_move"] == "white"
    assert len(obs["legal_uci"]) == len(obs["legal_san"]) == 15
    assert obs["legal_san"][obs["legal_uci"].index("c3a3")] == "Ra3+"
    assert obs["last_opponent_move"] is None and obs["moves_played"] == [] and obs["move_number"] == 1
    assert "e6a6" not in str(obs)  # the scripted reply is not leaked


def test_gold_line_is_solved_with_the_scripted_reply():
    env = ChessEnvironment(MATE2)
    env.reset()
    first = env.step(move("c3a3"))
    assert not first.done and first.data["event"] == "correct" and first.data["move"] == "c3a3"
    assert first.data["last_opponent_move"] == {"uci": "e6a6", "san": "Ra6"}
    assert first.data["moves_played"] == ["c3a3", "e6a6"] and first.data["move_number"] == 2
    assert first.data["side_to_move"] == "white" and "a3a6" in first.data["legal_uci"]
    last = env.step(move("a3a6"))
    assert last.done and last.data["event"] == "solved"
    state = env.final_state()
    assert state == {"moves_played": ["c3a3", "e6a6", "a3a6"], "solved": True, "illegal": 0,
                     "malformed": 0, "submitted": 2, "wrong_move": None,
                     "checkmate": True}
    verdict = verify(MATE2, state)
    assert (verdict.reward, verdict.formatted) == (1.0, True)
    assert verdict.details == {"moves": ["c3a3", "e6a6", "a3a6"], "solved": True, "illegal": 0, "wrong_move": None}


@pytest.mark.parametrize("text", ["Rh8#", "Rh8", "H1H8", " h1h8 "])
def test_san_and_loose_uci_are_accepted(text):
    env = ChessEnvironment(MATE1)
    env.reset()
    obs = env.step(move(text))
    assert obs.done and obs.data["event"] == "solved" and verify(MATE1, env.final_state()).reward == 1.0


def test_a_legal_wrong_move_ends_the_episode_with_reward_zero():
    env = ChessEnvironment(MATE2)
    env.reset()
    obs = env.step(move("c3c1"))
    assert obs.done and obs.data["event"] == "wrong" and obs.data["move"] == "c3c1"
    state = env.final_state()
    assert state["wrong_move"] == "c3c1" and state["moves_played"] == [] and not state["solved"]
    verdict = verify(MATE2, state)
    assert (verdict.reward, verdict.formatted) == (0.0, True)
    after = env.step(move("c3a3"))  # nothing can be played after the end
    assert after.done and "over" in after.data["error"]


def test_wrong_second_move_after_a_correct_first_scores_zero():
    env = ChessEnvironment(MATE2)
    env.reset()
    env.step(move("c3a3"))
    obs = env.step(move("a3a4"))
    assert obs.done and obs.data["event"] == "wrong"
    assert verify(MATE2, env.final_state()).reward == 0.0


@pytest.mark.parametrize("text, reason", [("h1a2", "not a legal move"), ("Qh5", "not a legal move"),
                                          ("e7e8q", "not a legal move"), ("--", "null move")])
def test_illegal_moves_change_nothing_and_do_not_end(text, reason):
    env = ChessEnvironment(MATE1)
    start = env.reset()
    obs = env.step(move(text))
    assert not obs.done and obs.data["event"] == "illegal" and obs.data["move"] == text
    assert reason in obs.data["reason"] and obs.data["fen"] == start["fen"]
    assert env.final_state()["illegal"] == 1
    assert env.step(move("h1h8")).data["event"] == "solved"  # retries are the harness's business


@pytest.mark.parametrize("text", ["hello", "", "<move>h1h8</move>", "z9z9"])
def test_malformed_moves_are_reported_and_not_formatted(text):
    env = ChessEnvironment(MATE1)
    env.reset()
    obs = env.step(move(text))
    assert not obs.done and obs.data["event"] == "malformed" and set(BOARD_FIELDS) <= set(obs.data)
    state = env.final_state()
    assert state["malformed"] == 1 and state["submitted"] == 0
    assert verify(MATE1, state).formatted is False


@pytest.mark.parametrize("call, fragment", [
    (Call("search", {"query": "x"}), "unknown tool"),
    (Call("move", {}), "bad arguments"),
    (Call("move", {"move": "h1h8", "why": "mate"}), "bad arguments"),
    (Call("move", {"move": 7}), "must be a string"),
])
def test_bad_calls_come_back_as_errors(call, fragment):
    env = ChessEnvironment(MATE1)
    env.reset()
    obs = env.step(call)
    assert not obs.done and fragment in obs.data["error"] and set(obs.data) == {"error"}


def test_verifier_trusts_only_a_complete_matching_line():
    assert verify(MATE2, {}).reward == 0.0 and verify(MATE2, {}).formatted is False
    partial = {"moves_played": ["c3a3", "e6a6"], "solved": False, "submitted": 1}
    assert verify(MATE2, partial).reward == 0.0
    mismatch = {"moves_played": ["c3a3", "e6a6", "a3a7"], "solved": True, "submitted": 2}
    assert verify(MATE2, mismatch).reward == 0.0


def test_domain_wires_environment_and_verifier(tmp_path):
    domain = get_domain("chess_puzzles", str(tmp_path))
    env = domain.environment(MATE1)
    env.reset()
    env.step(move("h1h8"))
    assert domain.verify(MATE1, [], env.final_state()).reward == 1.0


# The line mates with Rg8#; Rh8# mates as well, Rg7 does not.
TWO_MATES = Example("two", "test", {"fen": "k7/8/1K6/8/8/8/8/6RR w - - 0 1", "type": "mate1", "n_solver_moves": 1},
                    {"moves": ["g1g8"]})


@pytest.mark.parametrize("text, reward", [("g1g8", 1.0), ("Rh8#", 1.0), ("g1g7", 0.0)])
def test_any_mate_solves_a_line_that_ends_in_mate(text, reward):
    env = ChessEnvironment(TWO_MATES)
    env.reset()
    obs = env.step(move(text))
    assert obs.done and obs.data["event"] == ("solved" if reward else "wrong")
    assert verify(TWO_MATES, env.final_state()).reward == reward


def test_another_move_on_a_last_ply_that_does_not_mate_is_wrong():
    # MATE2's last reference move mates; on a line whose last move only wins material, no other
    # move is taken, and a mate claimed by the state without the line's own moves earns nothing
    env = ChessEnvironment(MATE2)
    env.reset()
    env.step(move("c3a3"))
    assert env.step(move("a3a5")).data["event"] == "wrong"
    forged = {"moves_played": ["c3a4", "e6a6", "a4a6"], "solved": True, "checkmate": True, "submitted": 2}
    assert verify(MATE2, forged).reward == 0.0
