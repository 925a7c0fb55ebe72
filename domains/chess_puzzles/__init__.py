"""chess_puzzles: forced puzzle lines on a real board, one ``move`` tool, a whole-line verifier."""
from __future__ import annotations

from pathlib import Path

from domains.base import Domain, write_examples
from domains.chess_puzzles import generate as _generate
from domains.chess_puzzles.environment import ChessEnvironment
from domains.chess_puzzles.leak import leak as _leak
from domains.chess_puzzles.load import load_lichess_csv
from domains.chess_puzzles.verify import verify as _verify
from whale.types import Example, Verdict, check_splits

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

    def import_files(self, files: dict[str, str | Path]) -> dict[str, int]:
        """Write splits from Lichess CSV files (``{split: path}``), made disjoint, and count them.

        A puzzle whose start position (board + side to move) was already taken is dropped: by a
        held-out split from the others (test beats harness beats weight), or by an earlier row.
        """
        check_splits(*files)
        seen: set[str] = set()
        counts = {}
        for split in _generate.DRAW_ORDER:
            if split not in files:
                continue
            kept = []
            for ex in load_lichess_csv(files[split], split):
                key = " ".join(ex.public["fen"].split()[:2])
                if key not in seen:
                    seen.add(key)
                    kept.append(ex)
            write_examples(self.data_dir / f"{split}.jsonl", kept)
            counts[split] = len(kept)
        return counts

    def environment(self, example: Example) -> ChessEnvironment:
        return ChessEnvironment(example)

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        return _verify(example, state)

    def leak(self, example: Example, events: list[tuple[str, str]]) -> str | None:
        return _leak(example, events)


def make_domain(data_dir: str | Path = "data", **params) -> ChessDomain:
    return ChessDomain(data_dir, **params)
