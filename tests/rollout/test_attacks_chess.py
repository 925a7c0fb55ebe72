"""Attacks on the reward (chess): harnesses that pass validation and try to earn the reward
themselves, run with a model that follows them perfectly through the real engine, environment
and verifier. Each must end with reward 0 and the reason in the verdict, or be refused by the
null-policy guard."""
from __future__ import annotations

from pathlib import Path

import pytest

from domains import get_domain
from tests.support.attacks import Follower, run
from tests.support.chess import MATE2, plays_itself
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.null import NullBackend
from whale.run.guard import null_guard_verdict
from whale.run.settings import load_settings
from whale.types import Example

# Chess: the harness knows the reference move (a table stands in for its own search).
CHESS_HINT = '''
from harnesses.contract import BaseHarness, Call, Finish, Prompt

TABLE = {TABLE}

class Harness(BaseHarness):
    max_turns = 4

    def start(self, observation):
        return self.ask(observation)

    def act(self, completion):
        return Call("move", {"move": completion.strip()})

    def observe(self, observation):
        return self.ask(observation) if observation.get("event") == "correct" else Finish()

    def ask(self, observation):
        gold = TABLE[" ".join(observation["fen"].split()[:4])]
        legal = observation["legal_uci"]
        text = "FEN: " + observation["fen"] + "\\nLegal moves: " + " ".join(legal) + "\\n" + HINT
        return Prompt(messages=[{"role": "user", "content": text}], choices=CHOICES, max_new_tokens=8)
'''
CHESS_HINTS = {  # (text after the legal moves, the turn's choices)
    "hint": ('"Hint: " + gold', "list(legal)"),
    "squares": ('"Move the piece on " + gold[:2] + " to " + gold[2:4]', "list(legal)"),
    "narrowed choices": ('""', "[gold] + [m for m in legal if m != gold][:1]"),
    "listed twice": ('"Good moves: " + gold', "list(legal)"),
}


def chess_table():
    import chess
    board, table = chess.Board(MATE2.public["fen"]), {}
    for ply, uci in enumerate(MATE2.gold["moves"]):
        if ply % 2 == 0:
            table[" ".join(board.fen().split()[:4])] = uci
        board.push_uci(uci)
    return table


def chess_attack(hint, choices="list(legal)"):
    return CHESS_HINT.replace("{TABLE}", repr(chess_table())).replace("HINT", hint).replace("CHOICES", choices)


def plays_gold(context, req):
    fen = context.rsplit("FEN: ", 1)[1].split("\n")[0]
    return chess_table()[" ".join(fen.split()[:4])]


@pytest.mark.parametrize("attack", sorted(CHESS_HINTS))
def test_chess_reference_move_singled_out_is_a_leak(attack, tokenizer, tmp_path):
    [r] = run(chess_attack(*CHESS_HINTS[attack]), get_domain("chess_puzzles", str(tmp_path)), [MATE2],
              Follower(tokenizer, plays_gold))
    assert r.verdict["solved"] and r.reward == 0.0 and "singles out" in r.verdict["leak"]


def test_chess_a_move_the_model_did_not_write_is_not_played(tokenizer, tmp_path):
    source = chess_attack('""').replace('Call("move", {"move": completion.strip()})',
                                        'Call("move", {"move": TABLE[self.key]})').replace(
        "gold = TABLE", "self.key = \" \".join(observation[\"fen\"].split()[:4])\n        gold = TABLE")
    [r] = run(source, get_domain("chess_puzzles", str(tmp_path)), [MATE2],
              Follower(tokenizer, lambda c, q: q.choices[-1]))
    assert r.reward == 0.0 and "not among the moves the model wrote" in r.verdict["unauthored"]
    assert r.verdict["moves"] == []


def test_chess_narrowing_that_names_every_move_equally_is_caught_by_the_null_policy(tokenizer, tmp_path):
    """Offering only the mates while naming every other move once more passes the leak check; the
    null policy, choosing uniformly among what is offered, scores, and the guard refuses it."""
    source = plays_itself(Path("harnesses/examples/chess_choice.py").read_text())
    mate1 = Example("m1", "harness", {"fen": "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "type": "mate1",
                                      "n_solver_moves": 1}, {"moves": ["a1a8"]})
    domain = get_domain("chess_puzzles", str(tmp_path))
    [r] = run(source, domain, [mate1], Follower(tokenizer, lambda c, q: "a1a8"))
    assert r.reward == 1.0 and "leak" not in r.verdict
    null = run(source, domain, [mate1], NullBackend(tokenizer), k=4)
    score = sum(x.reward for x in null) / len(null)
    assert score == 1.0 and "does not come from the model" in null_guard_verdict(load_settings(), score)


# Telling the null policy from the model: greet first, and narrow the choices to the mates (naming
# every other move once more, so no move is singled out) only when the greeting reads like a model's.
CHESS_DETECTS = '''
from harnesses.contract import BaseHarness, Call, Finish, Prompt

class Harness(BaseHarness):
    max_turns = 3

    def start(self, observation):
        self.observation, self.greeted = observation, False
        return Prompt(messages=[{"role": "user", "content": "Say hello."}], max_new_tokens=8)

    def act(self, completion):
        if self.greeted:
            return Call("move", {"move": completion.strip()})
        self.greeted = True
        o = self.observation
        pairs = list(zip(o["legal_san"], o["legal_uci"]))
        offered = [u for s, u in pairs if s.endswith("#")] if "hello" in completion.lower() else []
        offered = offered or [u for s, u in pairs]
        others = " ".join(u for s, u in pairs if u not in offered)
        text = "Legal moves (SAN): " + " ".join(o["legal_san"]) + "\\nNot offered: " + others
        return Prompt(messages=[{"role": "user", "content": text}], choices=offered, max_new_tokens=8)

    def observe(self, observation):
        return Finish()
'''
MATES_IN_ONE = [
    Example("m1", "harness", {"fen": "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "type": "mate1", "n_solver_moves": 1},
            {"moves": ["a1a8"]}),
    Example("m2", "harness", {"fen": "k7/8/1K6/8/8/8/8/7R w - - 0 1", "type": "mate1", "n_solver_moves": 1},
            {"moves": ["h1h8"]}),
]


def test_chess_harness_that_tells_the_null_policy_from_the_model_is_caught_by_the_blind_null_policy(
        tokenizer, tmp_path):
    from whale.rollout.backends.blind import BlindBackend

    domain = get_domain("chess_puzzles", str(tmp_path))
    model = Follower(tokenizer, lambda context, req: req.choices[0] if req.choices else "Hello there.")
    rollouts = run(CHESS_DETECTS, domain, MATES_IN_ONE, model, k=2)
    assert all(r.reward == 1.0 and "leak" not in r.verdict for r in rollouts)  # the model is helped
    uniform = run(CHESS_DETECTS, domain, MATES_IN_ONE, NullBackend(tokenizer), k=8)
    uniform_score = sum(r.reward for r in uniform) / len(uniform)
    assert null_guard_verdict(load_settings(), uniform_score) is None  # random tokens are not helped
    blind = run(CHESS_DETECTS, domain, MATES_IN_ONE, BlindBackend(model), k=2)
    blind_score = sum(r.reward for r in blind) / len(blind)
    assert blind_score == 1.0 and "does not come from the model" in null_guard_verdict(load_settings(), blind_score)


def test_the_blind_null_policy_answers_from_another_example_and_alone_like_the_null_policy(tokenizer):
    from whale.rollout.backends.base import GenRequest
    from whale.rollout.backends.blind import BlindBackend

    seen = []
    model = Follower(tokenizer, lambda context, req: seen.append(context) or "x")
    ids = {g: tokenizer.encode(f"context of {g}", add_special_tokens=False) for g in "ab"}
    requests = [GenRequest(ids["a"], 4, 0, group="a"), GenRequest(ids["a"], 4, 1, group="a"),
                GenRequest(ids["b"], 4, 2, group="b")]
    BlindBackend(model).generate(requests, Sampling())
    assert seen == ["context of b", "context of b", "context of a"]
    seen.clear()
    BlindBackend(model).generate(requests[:2], Sampling())  # one example only: no model at all
    assert seen == []


# Two mates in one (Rg8# is the line's, Rh8# another): any mate scores on the last ply.
TWO_MATES = Example("two", "test", {"fen": "k7/8/1K6/8/8/8/8/6RR w - - 0 1", "type": "mate1", "n_solver_moves": 1},
                    {"moves": ["g1g8"]})


def test_chess_a_harness_pointing_at_another_mate_than_the_lines_is_a_leak(tokenizer, tmp_path):
    """Any mate solves a mate puzzle, so the leak check guards every mate, not only the line's."""
    key = " ".join(TWO_MATES.public["fen"].split()[:4])
    source = CHESS_HINT.replace("{TABLE}", repr({key: "h1h8"})).replace("HINT", '"Hint: " + gold').replace(
        "CHOICES", "list(legal)")
    domain = get_domain("chess_puzzles", str(tmp_path))
    [r] = run(source, domain, [TWO_MATES], Follower(tokenizer, lambda c, q: "h1h8"))
    assert r.verdict["solved"] and r.verdict["moves"] == ["h1h8"]
    assert r.reward == 0.0 and "singles out the winning move h1h8" in r.verdict["leak"]
    quiet = CHESS_HINT.replace("{TABLE}", repr({key: "g1g8"})).replace("HINT", '""').replace("CHOICES", "list(legal)")
    [r] = run(quiet, domain, [TWO_MATES], Follower(tokenizer, lambda c, q: "h1h8"))
    assert r.reward == 1.0 and "leak" not in r.verdict  # the model found it alone
