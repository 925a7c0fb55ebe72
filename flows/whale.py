"""The `whale` Prefect flow: one domain, one condition, from params.yaml.

Conditions (see README):
  weight_only     RSFT under the fixed seed harness h0, in phase-sized chunks.
  harness_only    Harness search over the frozen base model.
  whale           Fixed (E, I) alternation, weight phase first; no harness phase after the last.
  adaptive_whale  Alternation whose phases end by the patience rules.
  stagewise       The whole weight budget, then the whole harness budget, each at its best point.
  prompt_only     As `whale`, but candidates may change only prompt text (Fast-Slow-style).
"""
from __future__ import annotations

from prefect import flow

from flows.phases import PhaseEnd, completed, harness_phase, weight_phase
from tasks.evaluate import evaluate_test
from whale.run.context import Run
from whale.run.schedule import epochs_to_steps
from whale.run.settings import load_params
from whale.train.checkpoint import checkpoint_dir

CONDITIONS = ("weight_only", "harness_only", "whale", "adaptive_whale", "stagewise", "prompt_only")
MAX_CYCLES = 30


def _steps(run: Run, epochs: float) -> int:
    return epochs_to_steps(run.params, len(run.domain.examples("weight")), epochs)


def _alternate(run: Run, h0: str, adaptive: bool, harness: bool, prompt_only: bool = False) -> str:
    sched = run.params["schedule"]
    total, phase_len = _steps(run, sched["total_epochs"]), _steps(run, sched["E"])
    a = sched["adaptive"]
    weight_rule = {"min_steps": _steps(run, a["weight_min"]), "window": _steps(run, a["weight_window"]),
                   "patience": _steps(run, a["weight_patience"])} if adaptive else None
    harness_rule = {"min_iters": a["harness_min"], "patience": a["harness_patience"],
                    "max_iters": a["harness_max"]} if adaptive else None
    incumbent, step = h0, 0
    for cycle in range(1, MAX_CYCLES + 1):
        length = total - step if adaptive else min(phase_len, total - step)
        end = weight_phase(run, cycle, incumbent, step, length, weight_rule)
        step = end.last_step + 1
        evaluate_test(run, cycle, "weight", incumbent)
        if step >= total or not end.reason.startswith(("fixed", "patience")):
            break  # no harness phase after the last weight phase (or when the budget ran out)
        if harness:
            end = harness_phase(run, cycle, incumbent, sched["I"], harness_rule, prompt_only)
            incumbent = end.harness_id
            evaluate_test(run, cycle, "harness", incumbent)
    return incumbent


def _harness_only(run: Run, h0: str) -> str:
    end = harness_phase(run, 1, h0, run.params["schedule"]["harness_iterations"])
    evaluate_test(run, 1, "harness", end.harness_id)
    return end.harness_id


def _stagewise(run: Run, h0: str) -> str:
    sched = run.params["schedule"]
    total, every = _steps(run, sched["total_epochs"]), _steps(run, sched["E"])
    end = weight_phase(run, 1, h0, 0, total, checkpoint_every=every)
    # The harness stage runs on the weight stage's best point, chosen on training reward (also on resume).
    run.serve_checkpoint(checkpoint_dir(run.ckpt_root, _best_weight_point(run, every, end)))
    evaluate_test(run, 1, "weight", h0)
    end = harness_phase(run, 2, h0, sched["harness_iterations"])
    evaluate_test(run, 2, "harness", end.harness_id)
    return end.harness_id


def _best_weight_point(run: Run, every: int, end: PhaseEnd) -> int:
    """The checkpoint (a multiple of ``every`` steps) whose last ``every`` steps had the best mean reward."""
    rows = run.store.query(
        "SELECT (step // ?) + 1 AS chunk, avg(reward_mean) FROM train_steps WHERE run_id = ? AND step <= ? "
        "GROUP BY chunk ORDER BY avg(reward_mean) DESC, chunk DESC LIMIT 1", [every, run.run_id, end.last_step])
    return min(rows[0][0] * every, end.last_step + 1)


@flow(name="whale")
def whale(domain: str = "math_reasoning", condition: str = "adaptive_whale", run_id: str | None = None,
          profile: str | None = None, overrides: dict | None = None, params_path: str = "params.yaml",
          runs_dir: str = "runs") -> dict:
    """Run (or resume) one condition on one domain; returns the final test metrics and where they are."""
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose one of {', '.join(CONDITIONS)}")
    params = load_params(params_path, profile, overrides)
    run = Run(params, domain, condition, run_id or f"{domain}-{condition}", runs_dir)
    try:
        h0 = run.seed_harness()
        evaluate_test(run, 0, "start", h0)
        if condition == "harness_only":
            final = _harness_only(run, h0)
        elif condition == "stagewise":
            final = _stagewise(run, h0)
        else:
            final = _alternate(run, h0, adaptive=condition == "adaptive_whale",
                               harness=condition != "weight_only", prompt_only=condition == "prompt_only")
        result = run.store.df("SELECT * FROM evals WHERE run_id = ? ORDER BY cumulative_rollouts DESC, cycle DESC "
                              "LIMIT 1", [run.run_id]).to_dict("records")[0]
        return {"run_id": run.run_id, "run_dir": str(run.dir), "final_harness": final,
                "test_mean_at_k": result["mean_at_k"], "weights_id": run.weights_id,
                "rollouts": int(result["cumulative_rollouts"])}
    finally:
        run.close()


__all__ = ["CONDITIONS", "whale", "completed"]
