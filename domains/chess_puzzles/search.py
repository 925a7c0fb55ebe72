"""Exhaustive checks that make a puzzle's solution line forced.

Three puzzle types, each decided by a complete search of the stated depth (no heuristics, no
engine): ``mate1`` (exactly one mating move), ``mate2`` (exactly one first move after which every
defence is answered by a mate, and no mate in one exists), ``win_piece`` (exactly one move wins
material against every reply, two plies deep, and it captures an undefended piece).
"""
from __future__ import annotations

import chess

PIECE_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}
# The smallest worst-case material gain that counts as winning a piece (a knight or bishop).
PIECE_GAIN = 3
# Stands for a checkmate in material units: beyond any material count.
MATE_SCORE = 1000
# A position with a single legal move is no puzzle: the answer would be forced by the rules.
MIN_CHOICES = 2


def _mates(board: chess.Board):
    """Legal moves that checkmate at once, lazily (only checking moves can)."""
    for move in board.legal_moves:
        if board.gives_check(move):
            board.push(move)
            mate = board.is_checkmate()
            board.pop()
            if mate:
                yield move


def mating_moves(board: chess.Board) -> list[chess.Move]:
    """Every legal move that checkmates at once."""
    return list(_mates(board))


def has_mate_in_1(board: chess.Board) -> bool:
    return next(_mates(board), None) is not None


def every_defence_mated(board: chess.Board, move: chess.Move) -> bool:
    """After ``move``, the opponent has at least one reply and each reply allows a mate in one."""
    board.push(move)
    try:
        replies = list(board.legal_moves)
        if not replies:  # checkmate is a mate in one, stalemate no mate at all
            return False
        for reply in replies:
            board.push(reply)
            answered = has_mate_in_1(board)
            board.pop()
            if not answered:
                return False
        return True
    finally:
        board.pop()


def mate_in_2_moves(board: chess.Board) -> list[chess.Move]:
    """First moves that force mate in two (moves that mate at once are not among them)."""
    return [m for m in board.legal_moves if every_defence_mated(board, m)]


def balance(board: chess.Board, color: chess.Color) -> int:
    """Material of ``color`` minus the opponent's, in pawns."""
    total = 0
    for piece in board.piece_map().values():
        value = PIECE_VALUES[piece.piece_type]
        total += value if piece.color == color else -value
    return total


def worst_case_gain(board: chess.Board, move: chess.Move) -> int:
    """Material the mover is up after ``move`` and the opponent's best reply (two plies).

    A move that mates scores ``MATE_SCORE``, a reply that mates the mover ``-MATE_SCORE``; a
    stalemate counts as no gain.
    """
    color = board.turn
    before = balance(board, color)
    board.push(move)
    try:
        if board.is_checkmate():
            return MATE_SCORE
        worst = None
        for reply in board.legal_moves:
            board.push(reply)
            if board.is_check() and board.is_checkmate():
                gain = -MATE_SCORE
            else:
                gain = balance(board, color) - before
            board.pop()
            worst = gain if worst is None else min(worst, gain)
        return 0 if worst is None else worst
    finally:
        board.pop()


def is_undefended_capture(board: chess.Board, move: chess.Move) -> bool:
    """``move`` takes a knight, bishop, rook or queen that no opponent move can recapture."""
    target = board.piece_at(move.to_square)
    if target is None or target.color == board.turn or PIECE_VALUES[target.piece_type] < PIECE_GAIN:
        return False
    board.push(move)
    try:
        return not any(r.to_square == move.to_square for r in board.legal_moves)
    finally:
        board.pop()


def winning_capture(board: chess.Board) -> chess.Move | None:
    """The one move that wins a piece, or None when there is none or more than one winning move.

    Winning means a worst-case gain of at least ``PIECE_GAIN`` over two plies; every other move
    must gain nothing (worst case <= 0), so the reference move is the only material-winning one.
    """
    if not any(is_undefended_capture(board, m) for m in board.legal_moves if board.is_capture(m)):
        return None
    winner = None
    for move in board.legal_moves:
        gain = worst_case_gain(board, move)
        if gain >= MATE_SCORE:  # a mate in one is a different puzzle
            return None
        if gain > 0:
            if winner is not None or gain < PIECE_GAIN or not is_undefended_capture(board, move):
                return None
            winner = move
    return winner


def solver_positions(fen: str, line: list[str]) -> list[chess.Board]:
    """The positions where the solver is to move along ``line`` (every other ply from the start)."""
    board = chess.Board(fen)
    out = []
    for ply, uci in enumerate(line):
        if ply % 2 == 0:
            out.append(board.copy(stack=False))
        board.push_uci(uci)
    return out


def choices_ok(board: chess.Board, max_legal: int) -> bool:
    return MIN_CHOICES <= board.legal_moves.count() <= max_legal


def mate1_line(board: chess.Board, max_legal: int) -> list[str] | None:
    """``[mate]`` when exactly one move mates and the solver has 2 to ``max_legal`` moves."""
    if not choices_ok(board, max_legal):
        return None
    mates = mating_moves(board)
    return [mates[0].uci()] if len(mates) == 1 else None


def mate2_line(board: chess.Board, max_legal: int) -> list[str] | None:
    """``[first, reply, mate]`` for a forced mate in two, else None.

    No mate in one exists, exactly one first move answers every defence with a mate, and the
    scripted reply is the first defence in UCI order after which the mate is unique and the solver
    has 2 to ``max_legal`` moves (so the second move of the line is the only solution too).
    """
    if not choices_ok(board, max_legal) or has_mate_in_1(board):
        return None
    firsts = mate_in_2_moves(board)
    if len(firsts) != 1:
        return None
    board.push(firsts[0])
    try:
        for reply in sorted(board.legal_moves, key=chess.Move.uci):
            board.push(reply)
            mate = mate1_line(board, max_legal)
            board.pop()
            if mate:
                return [firsts[0].uci(), reply.uci(), *mate]
        return None
    finally:
        board.pop()


def win_piece_line(board: chess.Board, max_legal: int) -> list[str] | None:
    """``[capture]`` when exactly one move wins a piece (see ``winning_capture``)."""
    if not choices_ok(board, max_legal):
        return None
    move = winning_capture(board)
    return [move.uci()] if move else None


LINES = {"mate1": mate1_line, "mate2": mate2_line, "win_piece": win_piece_line}
