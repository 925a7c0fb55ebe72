"""The Lichess puzzle CSV loader: trigger move applied, whole line checked, bad rows refused by line."""
from __future__ import annotations

import csv

import chess
import pytest

from domains.chess_puzzles import load_lichess_csv, make_domain
from domains.chess_puzzles.environment import ChessEnvironment
from domains.chess_puzzles.load import BadRow
from harnesses.contract import Call

HEADER = ["PuzzleId", "FEN", "Moves", "Rating", "RatingDeviation", "Popularity", "NbPlays", "Themes",
          "GameUrl", "OpeningTags"]
LONG = ["00008", "r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2R1/PqP2bPP/7K b - - 0 24", "f2g3 e6e7 b2b1 b3c1 b1c1 h6c1",
        "1852", "74", "97", "444", "crushing hangingPiece long middlegame",
        "https://lichess.org/787zsVup/black#47", ""]
MATE1 = ["t1", "1k6/8/1K6/8/8/8/8/7R b - - 0 1", "b8a8 h1h8", "600", "80", "90", "10", "mate mateIn1 oneMove", "", ""]
MATE2 = ["t2", "k7/2K1p3/8/4r3/8/2R5/8/8 b - - 0 1", "e5e6 c3a3 e6a6 a3a6",
         "900", "80", "90", "10", "mate mateIn2", "", ""]


def write(path, rows, header=HEADER):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_fixture_rows_become_examples(tmp_path):
    examples = load_lichess_csv(write(tmp_path / "p.csv", [LONG, MATE1, MATE2]), "test")
    assert [e.id for e in examples] == ["lichess-00008", "lichess-t1", "lichess-t2"]
    long, m1, m2 = examples
    # the trigger move f2g3 is played before the puzzle starts; the solver is white
    assert long.public == {"fen": "r6k/pp2r2p/4Rp1Q/3p4/8/1N1P2b1/PqP3PP/7K w - - 0 25", "type": "lichess",
                           "n_solver_moves": 3}
    assert long.gold["moves"] == ["e6e7", "b2b1", "b3c1", "b1c1", "h6c1"] and long.gold["rating"] == 1852
    assert m1.public["type"] == "mate1" and m1.gold["moves"] == ["h1h8"]
    assert m2.public == {"fen": "k7/2K1p3/4r3/8/8/2R5/8/8 w - - 1 2", "type": "mate2", "n_solver_moves": 2}
    assert all(e.split == "test" for e in examples)


def test_loaded_line_plays_through_the_environment(tmp_path):
    long = load_lichess_csv(write(tmp_path / "p.csv", [LONG]), "test")[0]
    env = ChessEnvironment(long)
    env.reset()
    events = [env.step(Call("move", {"move": m})).data["event"] for m in long.gold["moves"][::2]]
    assert events == ["correct", "correct", "solved"] and env.final_state()["solved"]


@pytest.mark.parametrize("column, value, fragment", [
    ("Moves", "b8a8 h1g8", "move 2 'h1g8' of Moves is not legal"),
    ("Moves", "b8b6 h1h8", "move 1 'b8b6' of Moves is not legal"),
    ("Moves", "b8a8 0000", "move 2 '0000' of Moves is not legal"),
    ("Moves", "b8a8", "even count"),
    ("Moves", "", "empty value in column(s) Moves"),
    ("FEN", "not a fen", "bad FEN 'not a fen'"),
    ("FEN", "8/8/8/8/8/8/8/8 w - - 0 1", "not a legal position"),
    ("Rating", "high", "Rating must be an integer"),
])
def test_bad_rows_are_refused_with_their_line_number(tmp_path, column, value, fragment):
    bad = list(MATE1)
    bad[HEADER.index(column)] = value
    path = write(tmp_path / "bad.csv", [LONG, MATE2, bad])
    with pytest.raises(BadRow) as err:
        load_lichess_csv(path, "weight")
    assert str(err.value).startswith(f"{path}:4: ") and fragment in str(err.value)


def test_missing_column_and_duplicate_id_are_refused(tmp_path):
    header = [h for h in HEADER if h != "Themes"]
    rows = [[v for h, v in zip(HEADER, MATE1, strict=False) if h != "Themes"]]
    with pytest.raises(BadRow, match=r"p\.csv:1: missing column\(s\) Themes"):
        load_lichess_csv(write(tmp_path / "p.csv", rows, header), "test")
    with pytest.raises(BadRow, match=r"d\.csv:3: duplicate PuzzleId 't1'"):
        load_lichess_csv(write(tmp_path / "d.csv", [MATE1, MATE1]), "test")


def test_import_files_keeps_held_out_positions_out_of_weight(tmp_path):
    domain = make_domain(str(tmp_path / "data"))
    counts = domain.import_files({"weight": write(tmp_path / "w.csv", [LONG, MATE1, MATE2]),
                                  "test": write(tmp_path / "t.csv", [MATE2])})
    assert counts == {"test": 1, "weight": 2}
    assert [e.id for e in domain.examples("weight")] == ["lichess-00008", "lichess-t1"]
    assert chess.Board(domain.examples("test")[0].public["fen"]).turn == chess.WHITE
    with pytest.raises(ValueError, match="unknown split"):
        domain.import_files({"train": tmp_path / "w.csv"})


def test_a_real_test_file_drops_its_positions_from_the_generated_splits(tmp_path):
    from domains.base import write_examples
    from domains.tables import relabel

    domain = make_domain(str(tmp_path / "data"))
    path = write(tmp_path / "t.csv", [MATE1, MATE2])
    # a generated weight split that happens to hold MATE2's start position under another id
    twin = relabel(load_lichess_csv(path, "weight")[1], "weight")
    write_examples(domain.data_dir / "weight.jsonl", [twin, *load_lichess_csv(write(tmp_path / "w.csv", [LONG]),
                                                                              "weight")])
    assert domain.import_files({"test": path}) == {"test": 2}
    assert [e.id for e in domain.examples("weight")] == ["lichess-00008"]


def test_two_mates_on_the_last_ply_both_solve_a_loaded_puzzle(tmp_path):
    row = ["t3", "1k6/8/1K6/8/8/8/8/6RR b - - 0 1", "b8a8 g1g8", "700", "80", "90", "10", "mate mateIn1", "", ""]
    (ex,) = load_lichess_csv(write(tmp_path / "p.csv", [row]), "test")
    domain = make_domain(str(tmp_path / "data"))
    for text in ("g1g8", "h1h8"):
        env = domain.environment(ex)
        env.reset()
        env.step(Call("move", {"move": text}))
        assert domain.verify(ex, [], env.final_state()).reward == 1.0
