"""Weight-phase tasks: one online RSFT step = sample_rollouts -> filter_by_verifier -> sft_step."""
from __future__ import annotations

import random
import time

from prefect import task
from prefect.cache_policies import NONE

from whale.run.context import Run
from whale.train.rsft import StepStats
from whale.types import Example, Rollout


def weight_batch(run: Run, step: int) -> list[Example]:
    """The prompts of RSFT step ``step`` (0-based): a fixed shuffle per epoch, last partial batch dropped."""
    examples = run.domain.examples("weight")
    size = run.settings.rsft.prompt_batch
    per_epoch = len(examples) // size
    epoch, pos = divmod(step, per_epoch)
    order = list(range(len(examples)))
    random.Random(f"{run.settings.seed}:weight-order:{epoch}").shuffle(order)
    return [examples[i] for i in order[pos * size:(pos + 1) * size]]


@task(cache_policy=NONE, task_run_name="sample_rollouts-step{step}")
def sample_rollouts(run: Run, cycle: int, step: int, harness_id: str) -> list[Rollout]:
    """k rollouts per prompt of the step's batch under the current harness and weights."""
    examples = weight_batch(run, step)
    key = run.key(cycle, "weight", step, harness_id, examples, run.settings.rsft.k,
                  run.settings.seed * 1_000_003 + step)
    return run.rollouts_once(key, examples, f"RSFT step {step}")


@task(cache_policy=NONE)
def filter_by_verifier(rollouts: list[Rollout], threshold: float) -> list[Rollout]:
    """Rejection sampling: keep rollouts whose verifier reward is above the threshold."""
    return [r for r in rollouts if r.reward > threshold]


@task(cache_policy=NONE, task_run_name="sft_step-step{step}")
def sft_step(run: Run, cycle: int, step: int, rollouts: list[Rollout], accepted: list[Rollout]) -> StepStats:
    """One supervised update on the accepted rollouts; the backend then serves the new weights."""
    before = run.weights_id
    t0 = time.perf_counter()
    stats = run.weights.update(accepted)
    after = run.weights_id
    run.store.insert("train_steps", [{
        "run_id": run.run_id, "cycle": cycle, "step": step, "weights_before": before, "weights_after": after,
        "reward_mean": sum(r.reward for r in rollouts) / max(len(rollouts), 1), "accepted": len(accepted),
        "total": len(rollouts), "loss": stats.loss, "tokens": stats.tokens,
        "wall_s": round(time.perf_counter() - t0, 3), "skipped": stats.skipped,
    }])
    return stats
