"""Test evaluation at phase boundaries: reported, counted in the ledger, never used for decisions."""
from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from tasks import log
from whale.rollout.metrics import summarize
from whale.run.context import Request, Run
from whale.store import run_queries

TEST_SEED_OFFSET = 10_007  # test rollouts draw from their own seeds, apart from the run's other batches


@task(cache_policy=NONE, task_run_name="evaluate_test-c{cycle}-{phase}")
def evaluate_test(run: Run, cycle: int, phase: str, harness_id: str, spent: int) -> dict:
    """mean@k of (current weights, ``harness_id``) on the test split, stored in ``evals`` with the
    ``spent`` weight + harness rollouts of the run so far (the flow's exact count).

    A (harness, weights) pair already evaluated in this run is read back, not re-rolled.
    """
    # A boundary is evaluated once; on resume the backend may already serve later weights.
    done = run_queries.evaluation(run.store, run.run_id, cycle, phase)
    if done:
        return done
    k, examples = run.settings.eval.k, run.domain.examples("test")
    number = run_queries.evaluations_taken(run.store, run.run_id)
    key = run.key(cycle, "eval", number, harness_id, examples, k, run.settings.seed + TEST_SEED_OFFSET,
                  any_boundary=True)
    (result,) = run.rollouts([Request([(key, examples)], f"test eval c{cycle} {phase}")])
    m = summarize(result.rollouts)
    row = {"run_id": run.run_id, "cycle": cycle, "phase": phase, "harness_id": harness_id,
           "weights_id": key.weights_id, "split": "test", "k": k, "n_examples": m["n_examples"],
           "mean_at_k": m["mean_at_k"], "format_rate": m["format_rate"], "truncation_rate": m["truncation_rate"],
           "rollouts": m["n"], "cumulative_rollouts": spent}
    run.store.insert("evals", [row])
    log(f"test mean@{k} after cycle {cycle} {phase}: {m['mean_at_k']:.3f} "
        f"(format {m['format_rate']:.2f}, truncated {m['truncation_rate']:.2f}, "
        f"{row['cumulative_rollouts']} rollouts spent)")
    return row
