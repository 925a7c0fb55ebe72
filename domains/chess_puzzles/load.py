"""The Lichess puzzle database (``lichess_db_puzzle.csv``) as examples.

Columns used: PuzzleId, FEN, Moves, Rating, Themes (others, such as GameUrl, are ignored).
``FEN`` is the position *before* the opponent's trigger move, the first UCI move of ``Moves``;
the puzzle starts after it, and the solver's line is ``Moves[1:]`` (solver, reply, solver, ...,
always ending on a solver move). Every move is checked for legality here, so the environment
never meets a broken line. A bad row stops the load with its file and line number.
"""
from __future__ import annotations

import csv
from pathlib import Path

import chess

from whale.types import Example

COLUMNS = ("PuzzleId", "FEN", "Moves", "Rating", "Themes")
THEME_TYPES = {"mateIn1": "mate1", "mateIn2": "mate2"}


class BadRow(ValueError):
    """A row of a puzzle file that cannot become an example."""


def load_lichess_csv(path: str | Path, split: str) -> list[Example]:
    """Every row of a Lichess puzzle CSV as an example of ``split``, in file order."""
    path = Path(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise BadRow(f"{path}:1: missing column(s) {', '.join(missing)}; need {', '.join(COLUMNS)}")
        examples, ids = [], set()
        for row in reader:
            line_no = reader.line_num
            try:
                example = row_to_example(row, split)
            except BadRow as e:
                raise BadRow(f"{path}:{line_no}: {e}") from None
            if example.id in ids:
                raise BadRow(f"{path}:{line_no}: duplicate PuzzleId {row['PuzzleId']!r}")
            ids.add(example.id)
            examples.append(example)
    return examples


def row_to_example(row: dict, split: str) -> Example:
    empty = [c for c in COLUMNS if c != "Themes" and not (row.get(c) or "").strip()]
    if empty:
        raise BadRow(f"empty value in column(s) {', '.join(empty)}")
    fen = row["FEN"].strip()
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise BadRow(f"bad FEN {fen!r} ({e})") from None
    if not board.is_valid():
        raise BadRow(f"FEN {fen!r} is not a legal position ({board.status()!r})")
    moves = row["Moves"].split()
    if len(moves) < 2 or len(moves) % 2:
        raise BadRow(f"Moves must be the trigger move then a line ending on a solver move "
                     f"(an even count >= 2), got {len(moves)} move(s)")
    played = []
    for i, uci in enumerate(moves, 1):
        try:
            move = board.parse_uci(uci)
        except ValueError:
            move = chess.Move.null()
        if not move:  # a null move parses without error but is no move
            raise BadRow(f"move {i} {uci!r} of Moves is not legal in {board.fen()!r}")
        board.push(move)
        played.append(move.uci())
    try:
        rating = int(row["Rating"])
    except ValueError:
        raise BadRow(f"Rating must be an integer, got {row['Rating']!r}") from None
    themes = (row.get("Themes") or "").split()
    start = chess.Board(fen)
    start.push_uci(played[0])
    kind = next((THEME_TYPES[t] for t in themes if t in THEME_TYPES), "lichess")
    line = played[1:]
    return Example(
        id=f"lichess-{row['PuzzleId'].strip()}", split=split,
        public={"fen": start.fen(), "type": kind, "n_solver_moves": (len(line) + 1) // 2},
        gold={"moves": line, "rating": rating, "themes": themes},
    )
