"""`whale compare` on hand-built runs: conditions grouped by seed, paired on examples and seeds."""
from __future__ import annotations

import json

import pytest

from whale.cli import main
from whale.report.compare import compare
from whale.report.data import load_runs
from whale.store import Store
from whale.types import Rollout

DOMAIN, K, N = "chess_puzzles", 2, 24


def build(runs, condition: str, seed: int, solved: set[int], grid_solved: set[int] = frozenset()) -> None:
    """A run whose grid point (at 32 rollouts) solves ``grid_solved`` and whose final evaluation (at
    64) solves ``solved`` (both samples of each test example)."""
    rid = f"{DOMAIN}-{condition}-s{seed}"
    store = Store(runs / rid / "rollouts.duckdb")
    store.insert("runs", [{"run_id": rid, "domain": DOMAIN, "condition": condition,
                           "params": json.dumps({"seed": seed})}])
    for phase, wid, ok, spent in (("start", "base", {0, 1}, 0), ("grid-1", f"g{seed}", grid_solved, 32),
                                  ("weight", f"w{seed}", solved, 64)):
        store.insert("evals", [{"run_id": rid, "cycle": 1, "phase": phase, "harness_id": "h", "weights_id": wid,
                                "split": "test", "k": K, "n_examples": N, "mean_at_k": len(ok) / N,
                                "format_rate": 1.0, "truncation_rate": 0.0, "rollouts": N * K,
                                "cumulative_rollouts": spent}])
        store.insert_rollouts([Rollout(run_id=rid, cycle=1, phase="eval", step=0, split="test",
                                       example_id=f"t{e:02d}", sample_idx=s, harness_id="h", weights_id=wid, seed=s,
                                       reward=float(e in ok), stop_reason="answered")
                               for e in range(N) for s in range(K)])
    store.close()


@pytest.fixture
def runs(tmp_path):
    for seed in (0, 1, 2):
        build(tmp_path, "weight_only", seed, set(range(4 + seed)))
        build(tmp_path, "whale", seed, set(range(12 + seed)), set(range(10)))  # all weight_only solves, and more
        build(tmp_path, "harness_only", seed, set(range(5 - seed, 9 - seed)))  # about weight_only's level
    return tmp_path


def test_conditions_are_grouped_by_seed_and_paired(runs):
    loaded, warnings = load_runs(runs)
    assert warnings == []
    c = compare(loaded, DOMAIN)
    scores = {s.condition: s for s in c.scores}
    assert scores["whale"].seeds == [0, 1, 2] and c.n_examples == N
    assert scores["whale"].final.mean == pytest.approx((12 + 13 + 14) / 3 / N)
    pairs = {(p.a, p.b): p.diff for p in c.pairs}
    assert pairs[("weight_only", "whale")].significant and pairs[("weight_only", "whale")].mean < 0
    assert not pairs[("harness_only", "weight_only")].significant
    # at the grid point (32 rollouts) whale already leads weight_only (10 examples against none)
    assert scores["whale"].grid["grid-1"].mean == pytest.approx(10 / N)
    assert scores["weight_only"].grid["grid-1"].mean == 0
    assert {(p.a, p.b): p.grid["grid-1"] for p in c.pairs}[("weight_only", "whale")].significant
    # the start (the same base system in every condition) is the grid's first point, the baseline
    assert list(scores["whale"].grid) == ["start", "grid-1"]
    assert scores["whale"].grid["start"].mean == scores["weight_only"].grid["start"].mean == pytest.approx(2 / N)


def test_command_prints_and_writes_json(runs, capsys, tmp_path):
    out = tmp_path / "cmp.json"
    assert main(["compare", "--domain", DOMAIN, "--runs", str(runs), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "* weight_only - whale" in text and "noise at this sample size" in text and "at grid-1:" in text
    data = json.loads(out.read_text())
    assert {s["condition"] for s in data["scores"]} == {"weight_only", "whale", "harness_only"}
    assert all("half_width" in s["final"] for s in data["scores"])


def test_unknown_domain_fails_clearly(runs):
    assert main(["compare", "--domain", "math_reasoning", "--runs", str(runs)]) == 2
