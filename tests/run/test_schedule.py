"""The patience rules read their signals from DuckDB; the epoch-to-step rule."""
from whale.run.schedule import HarnessRule, WeightRule
from whale.store import Store
from whale.train.rsft import steps_for_epochs


def steps(store, rewards, first=0):
    store.insert("train_steps", [{"run_id": "r", "cycle": 1, "step": first + i, "reward_mean": r, "accepted": 0,
                                  "total": 1, "skipped": False} for i, r in enumerate(rewards)])


def test_weight_patience_waits_for_min_then_stops_when_the_window_stops_improving(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    steps(store, [0.1, 0.2, 0.3, 0.3, 0.2, 0.1, 0.1])
    rule = WeightRule(min_steps=3, window=2, patience=2)
    assert not rule.decide(store, "r", 0, 1).stop  # below the minimum
    assert not rule.decide(store, "r", 0, 3).stop  # window means 0.1 .15 .25 .3: improving
    assert not rule.decide(store, "r", 0, 4).stop  # best window (0.3) at step 3, 1 step ago
    d = rule.decide(store, "r", 0, 5)
    assert d.stop and "last improved at step 3" in d.reason


def test_weight_windows_stay_inside_the_phase(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    steps(store, [0.9, 0.9, 0.0, 0.1, 0.2])  # a previous phase's high rewards at steps 0-1
    assert not WeightRule(min_steps=2, window=1, patience=2).decide(store, "r", 2, 4).stop


def test_harness_patience_min_patience_and_cap(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    scores = [(1, 0.2), (2, 0.5), (3, 0.5), (4, 0.4), (5, 0.5)]
    store.insert("scores", [{"run_id": "r", "harness_id": f"h{i}", "weights_id": "w", "split": "harness", "cycle": 1,
                             "iteration": i, "n": 8, "mean_reward": s} for i, s in scores])
    rule = HarnessRule(min_iters=3, patience=2, max_iters=6)
    assert not rule.decide(store, "r", 1, "w", 2).stop
    assert not rule.decide(store, "r", 1, "w", 3).stop  # best at 2 (ties do not improve)
    d = rule.decide(store, "r", 1, "w", 4)
    assert d.stop and d.reason.startswith("patience")
    # scores under other weights are never compared with these
    store.insert("scores", [{"run_id": "r", "harness_id": f"g{i}", "weights_id": "w2", "split": "harness", "cycle": 1,
                             "iteration": i, "n": 8, "mean_reward": s} for i, s in [(1, 0.1), (4, 0.3)]])
    assert not rule.decide(store, "r", 1, "w2", 4).stop
    assert rule.decide(store, "r", 1, "w", 6).reason == "cap: 6 iterations"


def test_epochs_round_to_nearest_step():
    assert steps_for_epochs(0.6, 18946, 256) == 44 and steps_for_epochs(0.2, 18946, 256) == 15
    assert steps_for_epochs(0.6, 16384, 256) == 38 and steps_for_epochs(0.5, 64, 4) == 8
