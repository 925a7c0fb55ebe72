"""The two phases, composed from the Prefect tasks. A phase is complete only when its row in
``phases`` exists, and that row is written after the phase's outputs are durable (checkpoint
saved, accepted harness archived), so a rerun after a crash redoes the phase from its last
durable point and never mistakes a half-done phase for a finished one."""
from __future__ import annotations

from dataclasses import dataclass

from tasks import log
from tasks.harness import (
    accept_harness,
    evaluate_harness,
    propose_harnesses,
    recheck_harnesses,
    select_harness,
    validate_candidate,
)
from tasks.weight import filter_by_verifier, sample_rollouts, sft_step
from whale.run.context import Run
from whale.run.schedule import Decision, HarnessRule, WeightRule, budget_decision


@dataclass
class PhaseEnd:
    harness_id: str
    weights_id: str
    last_step: int
    reason: str


def completed(run: Run, cycle: int, phase: str) -> PhaseEnd | None:
    row = run.store.row("SELECT harness_id, weights_id, last_step, reason FROM phases "
                        "WHERE run_id = ? AND cycle = ? AND phase = ?", [run.run_id, cycle, phase])
    return PhaseEnd(**row) if row else None


def record(run: Run, cycle: int, phase: str, first: int, end: PhaseEnd) -> PhaseEnd:
    run.store.insert("phases", [{"run_id": run.run_id, "cycle": cycle, "phase": phase, "first_step": first,
                                 "last_step": end.last_step, "harness_id": end.harness_id,
                                 "weights_id": end.weights_id, "decision": "end", "reason": end.reason}])
    log(f"cycle {cycle} {phase} phase ended: {end.reason} (harness {end.harness_id}, weights {end.weights_id})")
    return end


def over_budget(run: Run, cost: int) -> Decision:
    return budget_decision(run.settings, run.store.spent_rollouts(run.run_id), cost)


def weight_phase(run: Run, cycle: int, harness_id: str, first_step: int, max_steps: int,
                 rule: WeightRule | None = None, checkpoint_every: int | None = None) -> PhaseEnd:
    """Online RSFT from ``first_step`` for at most ``max_steps`` steps (fewer under an adaptive ``rule``)."""
    done = completed(run, cycle, "weight")
    if done:
        return done
    rsft = run.settings.rsft
    run.weights.start_training()
    step = max(first_step, run.weights.resume_step())
    every = checkpoint_every if checkpoint_every is not None else rsft.checkpoint_every
    reason = f"fixed length: {max_steps} steps"
    while step < first_step + max_steps:
        budget = over_budget(run, rsft.prompt_batch * rsft.k)
        if budget.stop:
            reason = budget.reason
            break
        rollouts = sample_rollouts(run, cycle, step, harness_id)
        accepted = filter_by_verifier(rollouts, rsft.threshold)
        stats = sft_step(run, cycle, step, rollouts, accepted)
        loss = "skipped (nothing accepted)" if stats.skipped else f"loss {stats.loss:.3f}"
        reward = sum(r.reward for r in rollouts) / max(len(rollouts), 1)
        log(f"RSFT step {step}: train reward {reward:.3f}, accepted {len(accepted)}/{len(rollouts)}, {loss}")
        step += 1
        if every and step % every == 0 and step < first_step + max_steps:
            run.weights.save(step)
        if rule:
            d = rule.decide(run.store, run.run_id, first_step, step - 1)
            if d.stop:
                reason = d.reason
                break
    wid = run.weights.save(step)
    return record(run, cycle, "weight", first_step, PhaseEnd(harness_id, wid, step - 1, reason))


def harness_phase(run: Run, cycle: int, incoming: str, iterations: int | None = None,
                  rule: HarnessRule | None = None) -> PhaseEnd:
    """Iteration 1 re-evaluates ``incoming`` under the current weights; then proposer iterations.
    The accepted harness is the phase's best (incoming included); written only at the end."""
    done = completed(run, cycle, "harness")
    if done:
        return done
    evaluate_harness(run, cycle, 1, incoming)
    search, prompt_only = run.settings.harness_search, run.condition.prompt_only
    n_harness = len(run.domain.examples("harness"))
    it = 1
    while True:
        if rule:
            d = rule.decide(run.store, run.run_id, cycle, run.weights_id, it)
        else:
            d = Decision(it >= iterations, f"fixed length: {iterations} iterations")
        d = d if d.stop else over_budget(run, search.M * n_harness)
        if d.stop:
            reason = d.reason
            break
        it += 1
        best = select_harness(run, cycle)["harness_id"]
        for hid in propose_harnesses(run, cycle, it, best, prompt_only):
            if validate_candidate(run, hid, best, prompt_only):
                evaluate_harness(run, cycle, it, hid, smoke=True)
    rechecked = recheck_harnesses(run, cycle, incoming, search.recheck_top, search.recheck_samples) \
        if search.recheck_top else []
    if len(rechecked) > 1:
        best = accept_harness(run, cycle, incoming, rechecked)
        reason = f"{reason}; {best['reason']}"
    else:
        best = select_harness(run, cycle)
    log(f"cycle {cycle}: accepted harness {best['harness_id']} (harness-split score {best['mean_reward']:.3f})"
        + (f": {best['reason']}" if "reason" in best else ""))
    return record(run, cycle, "harness", 1, PhaseEnd(best["harness_id"], run.weights_id, it, reason))
