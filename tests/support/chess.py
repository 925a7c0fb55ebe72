"""A stand-in chess model for harness tests: it answers the reference move of the position shown."""
from __future__ import annotations

import re

import chess

from domains import get_domain
from whale.rollout.backends.base import Backend, GenResult
from whale.types import Example

# A mate in two: the solver's two moves around the opponent's forced reply.
MATE2 = Example("m2", "test", {"fen": "k7/2K1p3/4r3/8/8/2R5/8/8 w - - 0 1", "type": "mate2", "n_solver_moves": 2},
                {"moves": ["c3a3", "e6a6", "a3a6"]})


class LineBackend(Backend):
    """Answers ``answer_fmt`` filled with the reference move of the last FEN in the prompt; on a turn
    with choices that answer must be one of them."""

    weights_id = "scripted"

    def __init__(self, tokenizer, examples, answer_fmt="<move>{}</move>"):
        self.tokenizer, self.answer_fmt = tokenizer, answer_fmt
        self.solutions = {}
        for e in examples:
            board = chess.Board(e.public["fen"])
            for ply, uci in enumerate(e.gold["moves"]):
                if ply % 2 == 0:
                    self.solutions[board.fen()] = uci
                board.push_uci(uci)

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            fen = re.findall(r"FEN: (.*)", self.tokenizer.decode(req.ids))[-1].strip()
            text = self.answer_fmt.format(self.solutions[fen])
            assert req.choices is None or text in req.choices, (text, req.choices)
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False)
                                 + [self.tokenizer.eos_token_id], "eos"))
        return out


def plays_itself(choice_source: str) -> str:
    """``examples/chess_choice.py`` rewritten to offer only the mates when there are any, else only the
    captures, and to name every move it does not offer once more in its text, so that no move is named
    more often than another: it plays the tactic itself without singling the move out in text, so the
    leak check passes it and only the null policy exposes it."""
    old = """        messages = messages + [{"role": "user", "content": render(observation)}]
        return Prompt(messages=messages, choices=list(observation["legal_uci"]), max_new_tokens=8)"""
    new = """        pairs = list(zip(observation["legal_san"], observation["legal_uci"]))
        offered = [u for s, u in pairs if s.endswith("#")] or [u for s, u in pairs if "x" in s] or [
            u for s, u in pairs]
        others = " ".join(u for s, u in pairs if u not in offered)
        messages = messages + [{"role": "user", "content": render(observation) + "\\nNot offered: " + others}]
        return Prompt(messages=messages, choices=offered, max_new_tokens=8)"""
    assert old in choice_source
    return choice_source.replace(old, new)


def prepared_domain(directory, test: int):
    """The chess domain with ``test`` generated test examples (seed 0) under ``directory``."""
    d = get_domain("chess_puzzles", str(directory))
    d.prepare({"weight": 0, "harness": 0, "test": test}, seed=0)
    return d
