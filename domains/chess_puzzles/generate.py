"""Synthetic chess puzzles: random positions kept only when an exhaustive search proves the line forced.

Each puzzle is a start FEN and a UCI line (solver, scripted reply, solver, ...). Splits are drawn
test first, then harness, then weight, each from its own seeded stream; a puzzle is skipped when
any position where its solver moves (board + side to move) already belongs to an earlier puzzle,
so the held-out splits do not move when the weight split grows and no position is in two splits.
"""
from __future__ import annotations

import random

import chess

from domains.base import check_sizes
from domains.chess_puzzles import positions, search
from domains.tables import DRAW_ORDER
from whale.types import SPLITS, Example

TYPES = ("mate1", "mate2", "win_piece")
# Few legal moves because the embedded model picks a legal move from a 39-move list in about 1%
# of samples; mates in two are the rarest and slowest to find (about 0.6 per second here).
DEFAULT_MIX = {"mate1": 0.3, "mate2": 0.1, "win_piece": 0.6}
DEFAULT_MAX_LEGAL_MOVES = 16
# Candidate positions examined for one puzzle before giving up (a bound set too low never ends).
MAX_CANDIDATES = 100_000
# Take-back pairs tried from one mate-in-one position when looking for a mate in two.
TAKE_BACK_TRIES = 30


def position_key(board: chess.Board) -> str:
    return f"{board.board_fen()} {'w' if board.turn == chess.WHITE else 'b'}"


def line_keys(fen: str, line: list[str]) -> list[str]:
    """Keys of every position where the solver moves along the line."""
    return [position_key(b) for b in search.solver_positions(fen, line)]


def type_counts(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Split ``n`` puzzles over the types in proportion to ``mix`` (largest remainder)."""
    total = sum(mix.values())
    exact = {t: n * mix.get(t, 0.0) / total for t in TYPES}
    counts = {t: int(exact[t]) for t in TYPES}
    by_remainder = sorted(TYPES, key=lambda t: (-(exact[t] - counts[t]), TYPES.index(t)))
    for t in by_remainder[: n - sum(counts.values())]:
        counts[t] += 1
    return counts


def check_params(mix: dict[str, float], max_legal_moves: int) -> None:
    unknown = set(mix) - set(TYPES)
    if unknown:
        raise ValueError(f"unknown puzzle type(s) {sorted(unknown)} in mix; types are {TYPES}")
    if any(not isinstance(v, (int, float)) or v < 0 for v in mix.values()) or sum(mix.values()) <= 0:
        raise ValueError(f"mix weights must be non-negative numbers with a positive sum, got {mix}")
    if not isinstance(max_legal_moves, int) or max_legal_moves < 2:
        raise ValueError(f"max_legal_moves must be an int >= 2, got {max_legal_moves!r}")


def _give_up(kind: str, max_legal: int):
    return RuntimeError(f"no {kind} puzzle with at most {max_legal} legal moves in {MAX_CANDIDATES} "
                        f"candidate positions; raise max_legal_moves or lower the {kind} share")


def _draw_mate1(rng: random.Random, max_legal: int) -> tuple[str, list[str]]:
    for _ in range(MAX_CANDIDATES):
        board = positions.mating_net(rng, positions.MATE1_NET)
        line = board and search.mate1_line(board, max_legal)
        if line:
            return board.fen(), line
    raise _give_up("mate1", max_legal)


def _draw_mate2(rng: random.Random, max_legal: int) -> tuple[str, list[str]]:
    candidates = 0
    while candidates < MAX_CANDIDATES:
        candidates += 1
        board = positions.mating_net(rng, positions.MATE2_NET)
        if not (board and search.mate1_line(board, max_legal)):
            continue
        candidates += TAKE_BACK_TRIES
        for _ in range(TAKE_BACK_TRIES):
            reply = positions.take_back(rng, board)
            first = reply and positions.take_back(rng, reply[0])
            line = first and search.mate2_line(first[0], max_legal)
            if line:
                return first[0].fen(), line
    raise _give_up("mate2", max_legal)


def _draw_win_piece(rng: random.Random, max_legal: int) -> tuple[str, list[str]]:
    seen = 0
    while seen < MAX_CANDIDATES:
        for board in positions.random_game(rng):
            seen += 1
            line = search.win_piece_line(board, max_legal)
            if line:  # one puzzle per game: later positions of a game are near-copies
                return board.fen(), line
    raise _give_up("win_piece", max_legal)


DRAWERS = {"mate1": _draw_mate1, "mate2": _draw_mate2, "win_piece": _draw_win_piece}


def split_params(mix: dict[str, float] | None, max_legal_moves: int,
                 splits: dict[str, dict] | None) -> dict[str, tuple[dict[str, float], int]]:
    """``(mix, max_legal_moves)`` of every split: the shared values, overridden per split."""
    unknown = set(splits or {}) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)} in splits; splits are {SPLITS}")
    out = {}
    for split in SPLITS:
        own = (splits or {}).get(split) or {}
        extra = set(own) - {"mix", "max_legal_moves"}
        if extra:
            raise ValueError(f"splits.{split}: unknown key(s) {sorted(extra)}; keys are mix, max_legal_moves")
        params = (dict(own.get("mix") or (DEFAULT_MIX if mix is None else mix)),
                  own.get("max_legal_moves") or max_legal_moves)
        check_params(*params)
        out[split] = params
    return out


def generate(sizes: dict[str, int], seed: int, mix: dict[str, float] | None = None,
             max_legal_moves: int = DEFAULT_MAX_LEGAL_MOVES,
             splits: dict[str, dict] | None = None) -> dict[str, list[Example]]:
    """Splits of ``sizes[split]`` puzzles each, disjoint, identical for the same arguments.

    ``mix`` and ``max_legal_moves`` apply to every split unless ``splits[split]`` overrides them
    (e.g. an easy weight split beside held-out splits shaped like real puzzles).
    """
    params = split_params(mix, max_legal_moves, splits)
    check_sizes(sizes)
    seen: set[str] = set()
    out = {split: _draw_split(split, sizes[split], seed, *params[split], seen)
           for split in DRAW_ORDER if split in sizes}
    return {split: out[split] for split in SPLITS if split in out}


def _draw_split(split: str, n: int, seed: int, mix: dict[str, float], max_legal: int,
                seen: set[str]) -> list[Example]:
    rng = random.Random(f"chess_puzzles:{seed}:{split}")
    puzzles = []
    for kind, count in type_counts(n, mix).items():
        while count:
            fen, line = DRAWERS[kind](rng, max_legal)
            keys = line_keys(fen, line)
            if seen.isdisjoint(keys):
                seen.update(keys)
                puzzles.append((kind, fen, line))
                count -= 1
    rng.shuffle(puzzles)  # types interleaved, so any prefix of a split has the mix
    return [Example(id=f"chess-{split}-{i}", split=split,
                    public={"fen": fen, "type": kind, "n_solver_moves": (len(line) + 1) // 2},
                    gold={"moves": line})
            for i, (kind, fen, line) in enumerate(puzzles)]
