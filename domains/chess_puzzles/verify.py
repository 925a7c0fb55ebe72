"""The chess verifier: reward 1 only when the whole reference line (or a mate in its place) was played.

It reads the environment's final state (trusted: the environment applied every move to the real
board), never the model's text, so what a harness prints cannot earn credit.
- reward 1.0 when ``solved`` and the moves played equal the reference line (solver moves and
  scripted replies, in UCI), or equal it up to a last move that gave checkmate where the line's
  own last move mates too (any mate solves a mate puzzle, as on Lichess); otherwise 0.0. A legal
  wrong move, running out of turns or tokens, or giving up after malformed/illegal answers all
  score 0.
- formatted: at least one move reached the environment and parsed as a move (legal or not).
  Answers the harness itself could not parse never reach the environment and do not count.
"""
from __future__ import annotations

from whale.types import Example, Verdict


def verify(example: Example, state: dict) -> Verdict:
    played = list(state.get("moves_played") or [])
    line = list(example.gold["moves"])
    other_mate = len(played) == len(line) and played[:-1] == line[:-1] and bool(state.get("checkmate"))
    solved = bool(state.get("solved")) and (played == line or other_mate)
    return Verdict(
        reward=1.0 if solved else 0.0,
        formatted=int(state.get("submitted") or 0) >= 1,
        details={"moves": played, "solved": solved, "illegal": int(state.get("illegal") or 0),
                 "wrong_move": state.get("wrong_move")},
    )
