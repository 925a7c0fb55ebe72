"""A stand-in chess model for harness tests: it answers the reference move of the position shown."""
from __future__ import annotations

import re

import chess

from whale.rollout.backends.base import Backend, GenResult


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
    captures: it plays the tactic itself, so the null policy scores."""
    return choice_source.replace('choices=list(observation["legal_uci"])', """choices=[u for s, u in zip(
            observation["legal_san"], observation["legal_uci"]) if s.endswith("#")] or [
            u for s, u in zip(observation["legal_san"], observation["legal_uci"]) if "x" in s] or list(
            observation["legal_uci"])""")
