"""The replay proposer: a run proposes again, iteration by iteration, what another run recorded."""
import json

import duckdb
import pytest

from harnesses.proposers import ProposerUnavailable
from harnesses.proposers.replay import ReplayProposer
from whale.testing import make_project


def rows(db, sql):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_run_replays_the_proposals_of_another(tmp_path, tiny_model_dir, monkeypatch):
    from flows.whale import whale

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    whale(domain="chess_puzzles", condition="whale", run_id="recorded", overrides=overrides)
    recorded = tmp_path / "runs" / "recorded"
    files = sorted((recorded / "proposals").glob("c*-i*.json"))
    assert files and all(json.loads(f.read_text())["candidates"] for f in files)

    # another run seed: the offline proposer would write other candidates, the replay does not
    replay = {**overrides, "seed": 1,
              "harness_search": {**overrides["harness_search"], "proposer": "replay", "replay_from": str(recorded)}}
    whale(domain="chess_puzzles", condition="whale", run_id="replayed", overrides=replay)
    replayed = tmp_path / "runs" / "replayed"
    calls = rows(replayed / "rollouts.duckdb", "SELECT cycle, iteration, proposer, fallback_reason "
                                               "FROM proposer_calls")
    assert any(p == "replay" for _, _, p, _ in calls)
    for cycle, iteration, proposer, reason in calls:
        mine = json.loads((replayed / "proposals" / f"c{cycle}-i{iteration}.json").read_text())["candidates"]
        theirs = recorded / "proposals" / f"c{cycle}-i{iteration}.json"
        if proposer == "replay":
            want = json.loads(theirs.read_text())["candidates"]
            assert [c["harness_id"] for c in mine] == [c["harness_id"] for c in want]
        else:  # an iteration the recorded run never reached: offline, and the reason says so
            assert not theirs.exists() and "recorded no proposal" in reason


def test_replay_refuses_what_it_cannot_replay(tmp_path):
    with pytest.raises(FileNotFoundError, match="no proposals/ folder"):
        ReplayProposer(tmp_path)
    (tmp_path / "proposals").mkdir()
    (tmp_path / "harnesses").mkdir()
    (tmp_path / "proposals" / "c1-i2.json").write_text(json.dumps({
        "proposer": "claude", "model": "m", "candidates": [{"harness_id": "0123456789ab"}]}))
    (tmp_path / "harnesses" / "0123456789ab.py").write_text("edited = True\n")

    class Ctx:
        cycle, iteration = 1, 3

    with pytest.raises(ProposerUnavailable, match="no proposal for cycle 1 iteration 3"):
        ReplayProposer(tmp_path).propose(Ctx())
    Ctx.iteration = 2
    with pytest.raises(ValueError, match="does not hash to its name"):
        ReplayProposer(tmp_path).propose(Ctx())
