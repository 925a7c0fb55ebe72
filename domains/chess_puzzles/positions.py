"""Random sources of candidate positions; ``generate`` keeps only those the search proves forced.

Measured on this machine (2 cores, 20 s runs): random play from the initial position reaches a
position with a unique mate in one and at most 12 legal moves about once per 20 s, so mates come
from random sparse set-ups instead (a defending king on an edge, a few pieces near it), and mates
in two from random take-backs of a mate-in-one position. Material-winning captures are common
enough in capture-biased random games from the initial position.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import chess

# Attacker material is light on queens: a queen alone has up to 27 moves, far above the bound.
ATTACK_MENU = (chess.QUEEN, chess.ROOK, chess.ROOK, chess.BISHOP, chess.KNIGHT, chess.PAWN, chess.PAWN)
DEFENCE_MENU = (chess.PAWN, chess.PAWN, chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK)
BACK_RANKS = (0, 7)


@dataclass(frozen=True)
class NetShape:
    """How ``mating_net`` draws: piece counts per side, chance a piece lands near the king."""

    attack: tuple[int, int]
    defence: tuple[int, int]
    near_king: float
    # Most squares the defending king may still step to; looser nets rarely hold a mate.
    max_flights: int = 2


# Tuned by measurement (puzzles found per second at 16 legal moves): dense nets give the most
# mates in one; mates in two come more often from lighter nets taken back two plies.
MATE1_NET = NetShape(attack=(2, 4), defence=(3, 7), near_king=0.9)
MATE2_NET = NetShape(attack=(1, 3), defence=(0, 4), near_king=0.6)


def _edge_square(rng: random.Random) -> chess.Square:
    file, rank = rng.randrange(8), rng.choice(BACK_RANKS)
    return chess.square(file, rank) if rng.random() < 0.5 else chess.square(rank, file)


def _near(rng: random.Random, square: chess.Square) -> chess.Square:
    file = min(7, max(0, chess.square_file(square) + rng.randint(-2, 2)))
    rank = min(7, max(0, chess.square_rank(square) + rng.randint(-2, 2)))
    return chess.square(file, rank)


def mating_net(rng: random.Random, shape: NetShape) -> chess.Board | None:
    """A random sparse position, attacker to move, or None when the draw is not a legal position."""
    attacker = rng.random() < 0.5
    king = _edge_square(rng)
    pieces = {king: chess.Piece(chess.KING, not attacker)}
    for color, menu, count in ((attacker, ATTACK_MENU, rng.randint(*shape.attack)),
                               (not attacker, DEFENCE_MENU, rng.randint(*shape.defence))):
        for _ in range(count):
            square = _near(rng, king) if rng.random() < shape.near_king else rng.randrange(64)
            piece_type = rng.choice(menu)
            if square in pieces or (piece_type == chess.PAWN and chess.square_rank(square) in BACK_RANKS):
                continue
            pieces[square] = chess.Piece(piece_type, color)
    free = [s for s in range(64) if s not in pieces]
    pieces[rng.choice(free)] = chess.Piece(chess.KING, attacker)
    board = chess.Board(None)
    board.set_piece_map(pieces)
    board.turn = attacker
    if flight_squares(board) > shape.max_flights or not board.is_valid():
        return None
    return board


def flight_squares(board: chess.Board) -> int:
    """Squares next to the defending king (not to move) that are free of its own pieces and unattacked."""
    attacker = board.turn
    king = board.king(not attacker)
    own = board.occupied_co[not attacker]
    return sum(1 for s in chess.SquareSet(chess.BB_KING_ATTACKS[king] & ~own)
               if not board.is_attacked_by(attacker, s))


def take_back(rng: random.Random, board: chess.Board,
              piece_type: chess.PieceType | None = None) -> tuple[chess.Board, chess.Move] | None:
    """Undo a random non-capturing move of the side that just moved (not the side to move).

    ``piece_type`` restricts the take-back to that kind of piece.
    Returns the earlier position (that side to move) and the move that leads back to ``board``,
    or None when the drawn piece has nowhere to come from or the earlier position is illegal.
    """
    color = not board.turn
    squares = [s for s, p in board.piece_map().items()
               if p.color == color and piece_type in (None, p.piece_type)]
    if not squares:
        return None
    square = rng.choice(squares)
    piece = board.piece_at(square)
    if piece.piece_type == chess.PAWN:
        back = square - 8 if color == chess.WHITE else square + 8
        if chess.square_rank(square) in BACK_RANKS or board.piece_at(back) is not None:
            return None
        origins = [back]
    else:
        origins = [s for s in board.attacks(square) if board.piece_at(s) is None]
    if not origins:
        return None
    origin = rng.choice(origins)
    earlier = board.copy(stack=False)
    earlier.remove_piece_at(square)
    earlier.set_piece_at(origin, piece)
    earlier.turn = color
    earlier.castling_rights = chess.BB_EMPTY
    earlier.ep_square = None
    if not earlier.is_valid():
        return None
    return earlier, chess.Move(origin, square)


def random_game(rng: random.Random, capture_bias: float = 0.7, max_plies: int = 300):
    """Positions of one random game from the initial position; captures are preferred."""
    board = chess.Board()
    for _ in range(max_plies):
        moves = list(board.legal_moves)
        if not moves or board.is_insufficient_material():
            return
        yield board
        captures = [m for m in moves if board.is_capture(m)]
        board.push(rng.choice(captures) if captures and rng.random() < capture_bias else rng.choice(moves))
