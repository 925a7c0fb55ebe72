"""Weight-phase tasks: one online RSFT step = sample_rollouts -> filter_by_verifier -> sft_step."""
from __future__ import annotations

import random
import time

from prefect import task
from prefect.cache_policies import NONE

from whale.run.context import Run
from whale.types import Example, Rollout, RolloutContext


def weight_batch(run: Run, step: int) -> list[Example]:
    """The prompts of RSFT step ``step`` (0-based): a fixed shuffle per epoch, last partial batch dropped."""
    examples = run.domain.examples("weight")
    size = run.params["rsft"]["prompt_batch"]
    per_epoch = len(examples) // size
    epoch, pos = divmod(step, per_epoch)
    order = list(range(len(examples)))
    random.Random(f"{run.params['seed']}:weight-order:{epoch}").shuffle(order)
    return [examples[i] for i in order[pos * size:(pos + 1) * size]]


@task(cache_policy=NONE, task_run_name="sample_rollouts-step{step}")
def sample_rollouts(run: Run, cycle: int, step: int, harness_id: str) -> list[Rollout]:
    """k rollouts per prompt of the step's batch under the current harness and weights."""
    key = "run_id = ? AND phase = 'weight' AND step = ? AND harness_id = ? AND weights_id = ?"
    return run.rollouts_once(harness_id, weight_batch(run, step), run.params["rsft"]["k"],
                             run.params["seed"] * 1_000_003 + step, RolloutContext(run.run_id, cycle, "weight", step),
                             f"RSFT step {step}", key, [run.run_id, step, harness_id, run.weights_id])


@task(cache_policy=NONE)
def filter_by_verifier(rollouts: list[Rollout], threshold: float) -> list[Rollout]:
    """Rejection sampling: keep rollouts whose verifier reward is above the threshold."""
    return [r for r in rollouts if r.reward > threshold]


@task(cache_policy=NONE, task_run_name="sft_step-step{step}")
def sft_step(run: Run, cycle: int, step: int, rollouts: list[Rollout], accepted: list[Rollout]) -> dict:
    """One supervised update on the accepted rollouts; the backend then serves the new weights."""
    trainer = run.ensure_trainer()
    before = run.weights_id
    t0 = time.perf_counter()
    stats = trainer.step(accepted)
    after = run.publish_weights() if not stats.get("skipped") else before
    row = {
        "run_id": run.run_id, "cycle": cycle, "step": step, "weights_before": before, "weights_after": after,
        "reward_mean": sum(r.reward for r in rollouts) / max(len(rollouts), 1), "accepted": len(accepted),
        "total": len(rollouts), "loss": stats.get("loss"), "tokens": stats.get("tokens", 0),
        "wall_s": round(time.perf_counter() - t0, 3), "skipped": bool(stats.get("skipped")),
    }
    run.store.insert("train_steps", [row])
    return row
