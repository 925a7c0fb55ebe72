"""The DuckDB store: idempotent inserts, round trips, and stores written by an older schema."""
import duckdb
import pytest

from whale.store import SCHEMA, Store
from whale.store.keys import RolloutKey
from whale.types import Rollout


def _rollout(i: int, tool_calls: int = 2) -> Rollout:
    return Rollout(run_id="r", cycle=1, phase="harness", step=1, split="harness", example_id=f"e{i}",
                   sample_idx=0, harness_id="h", weights_id="w", seed=i, reward=1.0, formatted=True,
                   verdict={"pred": "x"}, turns=3, tool_calls=tool_calls, stop_reason="answered",
                   messages=[{"role": "user", "content": "q"}], token_ids=[1, 2], mask=[0, 1])


def test_rollouts_round_trip_and_duplicates_are_ignored(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        assert store.insert_rollouts([_rollout(0), _rollout(1)]) == 2
        assert store.insert_rollouts([_rollout(1), _rollout(2)]) == 1
        back = store.stored_rollouts(_key(("e2", "e0", "e1")))
    # in the key's order, as the engine returned them: a resumed RSFT step trains on the same sequence
    assert [r.example_id for r in back] == ["e2", "e0", "e1"]
    assert back[1] == _rollout(0)


def _key(examples, k=1, cycle=1, step=1, weights="w", any_boundary=False) -> RolloutKey:
    return RolloutKey("r", cycle, "harness", step, "h", weights, tuple(examples), k, 0, any_boundary)


def test_a_key_reads_back_only_its_complete_batch(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        store.insert_rollouts([_rollout(0), _rollout(1)])
        assert store.stored_rollouts(_key(["e0", "e1", "e2"])) is None  # e2 missing: roll the batch out
        assert store.stored_rollouts(_key(["e0", "e1"], k=2)) is None  # one sample each, two asked for
        assert store.stored_rollouts(_key(["e0"], weights="w2")) is None  # other weights
        assert store.stored_rollouts(_key(["e0"], step=2)) is None  # another iteration
        assert [r.example_id for r in store.stored_rollouts(_key(["e1"]))] == ["e1"]
        # a test evaluation reads back the same (harness, weights) from any earlier boundary
        assert store.stored_rollouts(_key(["e0"], cycle=3, step=5)) is None
        assert len(store.stored_rollouts(_key(["e0"], cycle=3, step=5, any_boundary=True))) == 1


def test_a_key_names_a_known_phase():
    with pytest.raises(ValueError, match="unknown phase 'train'"):
        RolloutKey("r", 1, "train", 0, "h", "w", ("e0",), 1, 0)


def test_a_store_from_before_tool_calls_gains_the_column(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(SCHEMA.split("-- stores written before")[0].replace(" tool_calls INTEGER,", ""))
    con.execute("INSERT INTO rollouts (run_id, cycle, phase, step, split, example_id, sample_idx, harness_id, "
                "weights_id, seed, stop_reason) "
                "VALUES ('r', 1, 'harness', 1, 'harness', 'old', 0, 'h', 'w', 0, 'answered')")
    assert "tool_calls" not in [c[0] for c in con.execute("DESCRIBE rollouts").fetchall()]
    con.close()
    with Store(path) as store:
        assert store.insert_rollouts([_rollout(0, tool_calls=4)]) == 1
        rows = store.query("SELECT example_id, tool_calls FROM rollouts ORDER BY example_id")
    assert rows == [("e0", 4), ("old", None)]


def test_the_writer_publishes_a_snapshot_and_removes_it_when_it_closes(tmp_path):
    store = Store(tmp_path / "rollouts.duckdb", snapshot_every_s=0)
    store.insert_rollouts([_rollout(0), _rollout(1)])
    snap = tmp_path / "snapshot.duckdb"
    assert snap.exists()
    con = duckdb.connect(str(snap), read_only=True)
    try:
        assert con.execute("SELECT split, rollouts FROM ledger").fetchall() == [("harness", 2)]
    finally:
        con.close()
    quiet = Store(tmp_path / "quiet" / "rollouts.duckdb")  # the default interval
    quiet.insert_rollouts([_rollout(0)])  # the first write publishes at once
    (tmp_path / "quiet" / "snapshot.duckdb").unlink()
    quiet.insert_rollouts([_rollout(1)])  # within the interval: nothing
    assert not (tmp_path / "quiet" / "snapshot.duckdb").exists()
    quiet.close()
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quiet", "rollouts.duckdb"]


def test_the_acceptance_pairs_every_sample_or_only_the_rechecks(tmp_path):
    import dataclasses

    from whale.store import RECHECK_ITERATION, run_queries

    chosen = dataclasses.replace(_rollout(0), step=2, reward=1.0)  # the sample a challenger was chosen on
    fresh = dataclasses.replace(_rollout(0), step=RECHECK_ITERATION, seed=100, reward=0.0)  # drawn after
    with Store(tmp_path / "s.duckdb") as store:
        store.insert_rollouts([chosen, fresh])
        assert run_queries.harness_phase_example_means(store, "r", 1, "w", ["h"]) == [("h", "e0", 0.5, 3.0)]
        assert run_queries.harness_phase_example_means(store, "r", 1, "w", ["h"], recheck_only=True) == [
            ("h", "e0", 0.0, 3.0)]
