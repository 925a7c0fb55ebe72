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


def test_harness_patience_counts_proposer_iterations_as_the_reference(tmp_path):
    """Phase iteration 1 re-evaluates the incoming harness; proposer iteration p is phase iteration
    p + 1. The reference's 5 / 2 / 15: at least 5 proposer iterations, stop 2 after the last strict
    improvement, at most 15; its first proposer iteration always sets the best."""
    store = Store(tmp_path / "db.duckdb")
    # re-evaluation 0.6; proposer iterations 1..6 score 0.2 0.5 0.5 0.4 0.5 0.3 (none beats 0.6)
    scores = [(1, 0.6), (2, 0.2), (3, 0.5), (4, 0.5), (5, 0.4), (6, 0.5), (7, 0.3)]
    store.insert("scores", [{"run_id": "r", "harness_id": f"h{i}", "weights_id": "w", "split": "harness", "cycle": 1,
                             "iteration": i, "n": 8, "mean_reward": s} for i, s in scores])
    rule = HarnessRule(min_iters=5, patience=2, max_iters=15)
    for phase_it in range(1, 6):  # proposer iterations 0..4: below the minimum
        assert not rule.decide(store, "r", 1, "w", phase_it).stop
    d = rule.decide(store, "r", 1, "w", 6)  # 5 proposer iterations, best (0.6, folded into p=1) 4 ago
    assert d.stop and d.reason.endswith("0.600 last improved at proposer iteration 1")
    # an improvement at proposer iteration 4 (phase iteration 5) holds the phase for 2 more
    store.insert("scores", [{"run_id": "r", "harness_id": "better", "weights_id": "w", "split": "harness",
                             "cycle": 1, "iteration": 5, "n": 8, "mean_reward": 0.7}])
    assert not rule.decide(store, "r", 1, "w", 6).stop
    assert rule.decide(store, "r", 1, "w", 7).stop
    # scores under other weights are never compared with these
    store.insert("scores", [{"run_id": "r", "harness_id": f"g{i}", "weights_id": "w2", "split": "harness", "cycle": 1,
                             "iteration": i, "n": 8, "mean_reward": s} for i, s in [(1, 0.1), (6, 0.3)]])
    assert not rule.decide(store, "r", 1, "w2", 6).stop  # improved at proposer iteration 5
    assert rule.decide(store, "r", 1, "w", 16).reason == "cap: 15 proposer iterations"


def test_epochs_round_to_nearest_step():
    assert steps_for_epochs(0.6, 18946, 256) == 44 and steps_for_epochs(0.2, 18946, 256) == 15
    assert steps_for_epochs(0.6, 16384, 256) == 38 and steps_for_epochs(0.5, 64, 4) == 8
