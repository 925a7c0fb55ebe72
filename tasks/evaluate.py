"""Test evaluation at phase boundaries: reported, counted in the ledger, never used for decisions."""
from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from tasks import log
from whale.rollout.metrics import summarize
from whale.run.context import Run
from whale.types import RolloutContext


def spent_rollouts(run: Run) -> int:
    """Weight- and harness-phase rollouts spent so far (the budget unit; test rollouts excluded)."""
    return run.store.query("SELECT count(*) FROM rollouts WHERE run_id = ? AND phase IN ('weight', 'harness')",
                           [run.run_id])[0][0]


@task(cache_policy=NONE, task_run_name="evaluate_test-c{cycle}-{phase}")
def evaluate_test(run: Run, cycle: int, phase: str, harness_id: str) -> dict:
    """mean@k of (current weights, ``harness_id``) on the test split, stored in ``evals``.

    A (harness, weights) pair already evaluated in this run is read back, not re-rolled.
    """
    k, wid = run.params["eval"]["k"], run.weights_id
    # A boundary is evaluated once; on resume the backend may already serve later weights.
    done = run.store.query("SELECT * FROM evals WHERE run_id = ? AND cycle = ? AND phase = ?",
                           [run.run_id, cycle, phase])
    if done:
        names = [d[0] for d in run.store.con.description]
        return dict(zip(names, done[0], strict=False))
    step = run.store.query("SELECT count(*) FROM evals WHERE run_id = ?", [run.run_id])[0][0]
    # the same (harness, weights) evaluated at an earlier boundary is read back, not re-rolled
    rollouts = run.rollouts_once(harness_id, run.domain.examples("test"), k, run.params["seed"] + 10_007,
                                 RolloutContext(run.run_id, cycle, "eval", step), f"test eval c{cycle} {phase}",
                                 "run_id = ? AND phase = 'eval' AND harness_id = ? AND weights_id = ?",
                                 [run.run_id, harness_id, wid])
    m = summarize(rollouts)
    row = {"run_id": run.run_id, "cycle": cycle, "phase": phase, "harness_id": harness_id, "weights_id": wid,
           "split": "test", "k": k, "n_examples": m["n_examples"], "mean_at_k": m["mean_at_k"],
           "format_rate": m["format_rate"], "truncation_rate": m["truncation_rate"], "rollouts": m["n"],
           "cumulative_rollouts": spent_rollouts(run)}
    run.store.insert("evals", [row])
    log(f"test mean@{k} after cycle {cycle} {phase}: {m['mean_at_k']:.3f} "
        f"(format {m['format_rate']:.2f}, truncated {m['truncation_rate']:.2f}, "
        f"{row['cumulative_rollouts']} rollouts spent)")
    return row
