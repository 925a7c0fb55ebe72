"""chess_puzzles: forced puzzle lines on a real board, one ``move`` tool, a whole-line verifier."""
from __future__ import annotations

from pathlib import Path

from domains.base import Domain
from domains.chess_puzzles import generate as _generate
from domains.chess_puzzles.environment import ChessEnvironment
from domains.chess_puzzles.leak import leak as _leak
from domains.chess_puzzles.load import load_lichess_csv
from domains.chess_puzzles.verify import verify as _verify
from whale.types import Example, Verdict

__all__ = ["ChessDomain", "ChessEnvironment", "load_lichess_csv", "make_domain"]


class ChessDomain(Domain):
    name = "chess_puzzles"

    def __init__(self, data_dir: str | Path = "data", mix: dict[str, float] | None = None,
                 max_legal_moves: int = _generate.DEFAULT_MAX_LEGAL_MOVES,
                 splits: dict[str, dict] | None = None):
        super().__init__(data_dir)
        self.mix = dict(_generate.DEFAULT_MIX if mix is None else mix)
        self.max_legal_moves = max_legal_moves
        self.splits = dict(splits or {})
        _generate.split_params(self.mix, max_legal_moves, self.splits)

    def generate(self, sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
        return _generate.generate(sizes, seed, self.mix, self.max_legal_moves, self.splits)

    def load_file(self, path: str | Path, split: str) -> list[Example]:
        return load_lichess_csv(path, split)

    def identity(self, example: Example) -> str:
        """The start position: board and side to move (a puzzle repeated under another id)."""
        return " ".join(example.public["fen"].split()[:2])

    def environment(self, example: Example) -> ChessEnvironment:
        return ChessEnvironment(example)

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        return _verify(example, state)

    def leak(self, example: Example, events: list[tuple[str, str]]) -> str | None:
        return _leak(example, events)


def make_domain(data_dir: str | Path = "data", **params) -> ChessDomain:
    return ChessDomain(data_dir, **params)
