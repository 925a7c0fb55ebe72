"""The synthetic chess generator: deterministic, sized, disjoint, and every line truly forced.

The forced-line checks here are written again from plain python-chess loops, independently of
``domains/chess_puzzles/search.py``, so a bug in the generator's search cannot hide itself.
"""
from __future__ import annotations

import chess
import pytest

from domains.chess_puzzles import ChessDomain, make_domain
from domains.chess_puzzles.generate import DEFAULT_MAX_LEGAL_MOVES, TYPES, generate, line_keys, type_counts
from domains.chess_puzzles.search import mate1_line, mate2_line, win_piece_line

SMALL = {"weight": 6, "harness": 3, "test": 3}
FAST_MIX = {"mate1": 0.5, "win_piece": 0.5}  # no mate in two: about a second each to find
VALUE = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


@pytest.fixture(scope="module")
def splits():
    return generate(SMALL, seed=0)


def mates(board):
    out = []
    for m in list(board.legal_moves):
        board.push(m)
        if board.is_checkmate():
            out.append(m.uci())
        board.pop()
    return out


def forces_mate(board, move):
    board.push(move)
    replies = list(board.legal_moves)
    ok = bool(replies)
    for r in replies:
        board.push(r)
        ok = ok and bool(mates(board))
        board.pop()
    board.pop()
    return ok


def material(board, color):
    return sum(VALUE[p.piece_type] * (1 if p.color == color else -1) for p in board.piece_map().values())


def two_ply_gain(board, move):
    me, before = board.turn, material(board, board.turn)
    board.push(move)
    gains = []
    for r in list(board.legal_moves):
        board.push(r)
        gains.append(-1000 if board.is_checkmate() else material(board, me) - before)
        board.pop()
    board.pop()
    return min(gains) if gains else 0


def assert_forced(fen, kind, line):
    board = chess.Board(fen)
    if kind == "mate1":
        assert mates(board) == line
    elif kind == "mate2":
        assert mates(board) == []
        assert [m.uci() for m in board.legal_moves if forces_mate(board, m)] == [line[0]]
        board.push_uci(line[0])
        assert line[1] in [m.uci() for m in board.legal_moves]
        board.push_uci(line[1])
        assert mates(board) == [line[2]]
    else:
        assert mates(board) == []
        winners = {m.uci(): two_ply_gain(board, m) for m in board.legal_moves}
        assert [u for u, g in winners.items() if g > 0] == line and winners[line[0]] >= 3
        move = chess.Move.from_uci(line[0])
        assert board.piece_type_at(move.to_square) in (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)
        board.push(move)
        assert not any(r.to_square == move.to_square for r in board.legal_moves)


def test_sizes_ids_fields_and_mix(splits):
    assert list(splits) == ["weight", "harness", "test"]
    for split, examples in splits.items():
        assert [e.id for e in examples] == [f"chess-{split}-{i}" for i in range(SMALL[split])]
        counts = {t: sum(e.public["type"] == t for e in examples) for t in TYPES}
        assert counts == type_counts(SMALL[split], {"mate1": 0.3, "mate2": 0.1, "win_piece": 0.6})
        for e in examples:
            assert e.split == split and set(e.public) == {"fen", "type", "n_solver_moves"}
            assert set(e.gold) == {"moves"}  # the line never sits in public
            assert e.public["n_solver_moves"] == (len(e.gold["moves"]) + 1) // 2
            assert len(e.gold["moves"]) == (3 if e.public["type"] == "mate2" else 1)


def test_every_line_is_forced_and_within_the_legal_move_bound(splits):
    for e in [e for examples in splits.values() for e in examples]:
        assert_forced(e.public["fen"], e.public["type"], e.gold["moves"])
        board = chess.Board(e.public["fen"])
        for ply, uci in enumerate(e.gold["moves"]):
            if ply % 2 == 0:
                assert 2 <= board.legal_moves.count() <= DEFAULT_MAX_LEGAL_MOVES
            board.push_uci(uci)


def test_independent_checks_can_fail():
    # two rooks that both mate: the search refuses it, and so does the independent check
    two_mates = "k7/8/1K6/8/8/8/8/2R4R w - - 0 1"
    assert mate1_line(chess.Board(two_mates), 40) is None
    with pytest.raises(AssertionError):
        assert_forced(two_mates, "mate1", ["h1h8"])
    assert mate1_line(chess.Board("k7/8/1K6/8/8/8/8/7R w - - 0 1"), 40) == ["h1h8"]
    # mate in two: check, forced block, mate; the bound applies to both solver positions
    m2 = "k7/2K1p3/4r3/8/8/2R5/8/8 w - - 0 1"
    assert mate2_line(chess.Board(m2), 16) == ["c3a3", "e6a6", "a3a6"]
    assert mate2_line(chess.Board(m2), 10) is None
    # a knight en prise, but the queen on d8 can take it back: nothing is won
    defended = "3qk3/8/8/3n4/8/8/3R4/4K3 w - - 0 1"
    assert win_piece_line(chess.Board(defended), 40) is None
    assert win_piece_line(chess.Board("4k3/8/8/3n4/8/8/3R4/4K3 w - - 0 1"), 40) == ["d2d5"]


def test_same_seed_same_splits_other_seed_differs():
    a = generate({"test": 4, "harness": 2}, seed=0, mix=FAST_MIX)
    b = generate({"test": 4, "harness": 2}, seed=0, mix=FAST_MIX)
    c = generate({"test": 4, "harness": 2}, seed=1, mix=FAST_MIX)
    assert a == b
    assert [e.public["fen"] for e in a["test"]] != [e.public["fen"] for e in c["test"]]


def test_splits_are_disjoint_on_every_solver_position(splits):
    keys = {split: [k for e in exs for k in line_keys(e.public["fen"], e.gold["moves"])]
            for split, exs in splits.items()}
    assert all(len(set(k)) == len(k) for k in keys.values())
    assert not set(keys["weight"]) & set(keys["harness"])
    assert not set(keys["weight"]) & set(keys["test"])
    assert not set(keys["harness"]) & set(keys["test"])


def test_held_out_splits_do_not_move_when_weight_grows():
    small = generate({"weight": 1, "harness": 2, "test": 2}, seed=4, mix=FAST_MIX)
    large = generate({"weight": 6, "harness": 2, "test": 2}, seed=4, mix=FAST_MIX)
    assert small["test"] == large["test"] and small["harness"] == large["harness"]


def test_type_counts_follow_the_mix():
    assert type_counts(10, {"mate1": 0.3, "mate2": 0.1, "win_piece": 0.6}) == {"mate1": 3, "mate2": 1, "win_piece": 6}
    assert type_counts(7, {"mate1": 1.0}) == {"mate1": 7, "mate2": 0, "win_piece": 0}
    assert sum(type_counts(13, {"mate1": 1, "mate2": 1, "win_piece": 1}).values()) == 13


@pytest.mark.parametrize("kwargs, message", [
    ({"mix": {"mate3": 1.0}}, "unknown puzzle type"),
    ({"mix": {"mate1": 0.0}}, "positive sum"),
    ({"max_legal_moves": 1}, "max_legal_moves"),
])
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate({"test": 1}, seed=0, **kwargs)
    with pytest.raises(ValueError, match=message):
        ChessDomain("data", **kwargs)


def test_splits_override_the_shared_mix_and_move_cap():
    easy = {"mix": {"mate1": 1.0}, "max_legal_moves": 6}
    out = generate({"weight": 3, "test": 3}, seed=0, mix=FAST_MIX, max_legal_moves=24, splits={"weight": easy})
    assert {e.public["type"] for e in out["weight"]} == {"mate1"}
    assert all(chess.Board(e.public["fen"]).legal_moves.count() <= 6 for e in out["weight"])
    # the test split keeps the shared values; with the same seed it is the split drawn without overrides
    assert out["test"] == generate({"test": 3}, seed=0, mix=FAST_MIX, max_legal_moves=24)["test"]


@pytest.mark.parametrize("splits, message", [
    ({"train": {}}, "unknown split"),
    ({"weight": {"depth": 3}}, "unknown key"),
    ({"weight": {"max_legal_moves": 1}}, "max_legal_moves"),
])
def test_bad_split_overrides_are_refused(splits, message):
    with pytest.raises(ValueError, match=message):
        generate({"test": 1}, seed=0, mix=FAST_MIX, splits=splits)
    with pytest.raises(ValueError, match=message):
        ChessDomain("data", mix=FAST_MIX, splits=splits)


def test_unknown_split_is_refused():
    with pytest.raises(ValueError, match="unknown split"):
        generate({"train": 3}, seed=0)


def test_domain_prepare_writes_and_reads_back(tmp_path):
    domain = make_domain(str(tmp_path), mix=FAST_MIX, max_legal_moves=12)
    domain.prepare({"weight": 2, "harness": 1, "test": 1}, seed=0)
    examples = domain.examples("weight")
    assert len(examples) == 2 and (tmp_path / "chess_puzzles" / "weight.jsonl").exists()
    for e in examples:
        assert chess.Board(e.public["fen"]).legal_moves.count() <= 12


@pytest.mark.parametrize("kind", TYPES)
def test_an_impossible_request_gives_up_with_a_clear_error(monkeypatch, kind):
    from domains.chess_puzzles import generate as module

    monkeypatch.setattr(module, "MAX_CANDIDATES", 200)
    with pytest.raises(RuntimeError, match=f"no {kind} puzzle with at most 2 legal moves in 200 candidate"):
        generate({"test": 1}, seed=0, mix={kind: 1.0}, max_legal_moves=2)
