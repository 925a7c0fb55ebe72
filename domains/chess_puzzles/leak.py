"""The chess leak check: a winning move singled out in harness-written text.

A winning move is the reference move, or on a last ply whose reference move mates, any mate.

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


def solver_positions(example: Example) -> dict[str, list[chess.Move]]:
    """Board+side key of each position where the solver moves -> the moves that score there: the
    reference move, and on a last ply that mates, every mating move (the environment takes any)."""
    board, out = chess.Board(example.public["fen"]), {}
    line = example.gold["moves"]
    for ply, uci in enumerate(line):
        if ply % 2 == 0:
            out[_key(board.fen())] = _winning(board, chess.Move.from_uci(uci), ply == len(line) - 1)
        board.push_uci(uci)
    return out


def _winning(board: chess.Board, reference: chess.Move, last: bool) -> list[chess.Move]:
    if not (last and _mates(board, reference)):
        return [reference]
    return [reference] + [m for m in board.legal_moves if m != reference and _mates(board, m)]


def _mates(board: chess.Board, move: chess.Move) -> bool:
    after = board.copy(stack=False)
    after.push(move)
    return after.is_checkmate()


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


def _named(board: chess.Board, golds: list[chess.Move], text: str) -> bool:
    counts = move_counts(board, text)
    return any(counts.get(g, 0) > 0 for g in golds)


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
        board = chess.Board(_full(key))
        if author == "model":
            named = named or _named(board, golds[key], text)
            continue
        pointed = next((g for g in golds[key] if not named and singled_out(board, g, text)), None)
        if pointed is not None:
            return f"harness-written text singles out the winning move {pointed.uci()} before the model named it"
    return None


def _fen(text: str) -> str | None:
    """The last FEN in an observation's text."""
    found = FEN.findall(text)
    return found[-1] if found else None


def _key(fen: str) -> str:
    return " ".join(fen.split()[:4])


def _full(key: str) -> str:
    return f"{key} 0 1"
