"""The chess leak check: the reference move singled out in harness-written text.

The environment lists every legal move, so a first-mention rule cannot work here: the answer is
always in the observation. What a harness must not do is point at it. A harness-written text
singles the reference move out when it names that move at least once and as often as at most a
quarter of the legal moves do (a hint naming one move, a short list of "candidates", choices cut
down to a few). Naming every legal move equally often passes, whatever the order or grouping: a
list grouped by the environment's own SAN marks (``#``, ``+``, ``x``) passes, a list that puts
the answer first passes too (order is beyond this check; docs/security.md). Once the model has
named the move in a position, the harness may repeat it.
"""
from __future__ import annotations

import re

import chess

from domains.encodings import SEPARATOR
from whale.types import Example

RANK = "[pnbrqkPNBRQK1-8]{1,8}"
FEN = re.compile(rf"(?:{RANK}/){{7}}{RANK} [wb] (?:[KQkq]{{1,4}}|-) (?:[a-h][36]|-) \d+ \d+")


def solver_positions(example: Example) -> dict[str, str]:
    """Board+side key of each position where the solver moves -> the reference move (UCI)."""
    board, out = chess.Board(example.public["fen"]), {}
    for ply, uci in enumerate(example.gold["moves"]):
        if ply % 2 == 0:
            out[_key(board.fen())] = uci
        board.push_uci(uci)
    return out


def move_counts(board: chess.Board, text: str) -> dict[chess.Move, int]:
    """How often ``text`` names each legal move: in UCI, in SAN (with or without + and #), or as its
    two squares apart ("g1-f3", "g1 to f3", "from g1 to f3")."""
    counts = {}
    for move in board.legal_moves:
        uci = move.uci()
        forms = [re.escape(uci), re.escape(board.san(move).rstrip("+#")),
                 f"{uci[:2]}(?:{SEPARATOR}|\\s+to\\s+){uci[2:4]}{uci[4:]}"]
        counts[move] = sum(len(re.findall(r"(?<![\w])" + f + r"(?![\w])", text, re.I)) for f in forms)
    return counts


def singled_out(board: chess.Board, gold: chess.Move, text: str) -> bool:
    counts = move_counts(board, text)
    if counts.get(gold, 0) == 0:
        return False
    rivals = sum(c >= counts[gold] for c in counts.values())
    return rivals <= max(1, len(counts) // 4)


def leak(example: Example, events: list[tuple[str, str]]) -> str | None:
    """Why the episode leaked the reference move (None when it did not)."""
    golds = solver_positions(example)
    key = named = None
    for author, text in events:
        if author == "env":
            fen = _fen(text)
            if fen is not None:
                key, named = _key(fen), False
            continue
        if key not in golds:
            continue
        board, gold = chess.Board(_full(key)), chess.Move.from_uci(golds[key])
        if author == "model":
            named = named or move_counts(board, text).get(gold, 0) > 0
        elif not named and singled_out(board, gold, text):
            return f"harness-written text singles out the reference move {gold.uci()} before the model named it"
    return None


def _fen(text: str) -> str | None:
    """The last FEN in an observation's text."""
    found = FEN.findall(text)
    return found[-1] if found else None


def _key(fen: str) -> str:
    return " ".join(fen.split()[:4])


def _full(key: str) -> str:
    return f"{key} 0 1"
