"""The two phases, composed from the Prefect tasks. A phase is complete only when its row in
``phases`` exists, and that row is written after the phase's outputs are durable (checkpoint
saved, accepted harness archived), so a rerun after a crash redoes the phase from its last
durable point and never mistakes a half-done phase for a finished one."""
from __future__ import annotations

from dataclasses import dataclass

from tasks import log
from tasks.harness import (
    accept_harness,
    evaluate_harnesses,
    propose_harnesses,
    recheck_harnesses,
    revived_harnesses,
    select_harness,
    validate_candidate,
)
from tasks.measure import evaluate_test
from tasks.weight import filter_by_verifier, sample_rollouts, sft_step
from whale.run.context import Run
from whale.run.drafts import draft_allowance
from whale.run.schedule import Decision, HarnessRule, Spend, WeightRule, recheck_rollouts
from whale.run.stop import raise_if_stopped
from whale.store import run_queries

MAX_IDLE_ITERATIONS = 3


@dataclass
class PhaseEnd:
    harness_id: str
    weights_id: str
    last_step: int
    reason: str
    rollouts: int = 0


def completed(run: Run, cycle: int, phase: str, spend: Spend) -> PhaseEnd | None:
    """The recorded end of a finished phase (its rollouts charged to ``spend``), else None."""
    row = run_queries.phase_end(run.store, run.run_id, cycle, phase)
    if not row:
        return None
    spend.charge(row["rollouts"] or 0)
    return PhaseEnd(**row)


def record(run: Run, cycle: int, phase: str, first: int, end: PhaseEnd) -> PhaseEnd:
    run.store.insert("phases", [{"run_id": run.run_id, "cycle": cycle, "phase": phase, "first_step": first,
                                 "last_step": end.last_step, "harness_id": end.harness_id,
                                 "weights_id": end.weights_id, "decision": "end", "reason": end.reason,
                                 "rollouts": end.rollouts}])
    log(f"cycle {cycle} {phase} phase ended: {end.reason} (harness {end.harness_id}, weights {end.weights_id}, "
        f"{end.rollouts} rollouts)")
    return end


def charge_harness_unit(run: Run, spend: Spend, cycle: int, step: int, harness_ids: list[str]) -> int:
    """Charge ``spend`` with the harness-split rollouts a finished unit stored under the current
    weights (the same count whether it ran now or was read back on resume); return it."""
    n = run.store.unit_rollouts(run.run_id, cycle, "harness", step, harness_ids, run.weights_id)
    spend.charge(n)
    return n


def grid(run: Run, spend: Spend, cycle: int, harness_id: str) -> None:
    """Test-evaluate the system as it stands at every grid point (a multiple of ``eval.every``
    rollouts) that the spend has crossed and that has no evaluation yet."""
    every = run.settings.eval.every
    if not every:
        return
    done = run_queries.grid_points_done(run.store, run.run_id)
    for point in range(1, spend.spent // every + 1):
        if f"grid-{point}" not in done:
            evaluate_test(run, cycle, f"grid-{point}", harness_id, spend.spent)


def weight_phase(run: Run, cycle: int, harness_id: str, first_step: int, spend: Spend, max_steps: int | None = None,
                 rule: WeightRule | None = None, checkpoint_every: int | None = None) -> PhaseEnd:
    """Online RSFT from ``first_step``: ``max_steps`` steps (None: no limit), fewer under an adaptive
    ``rule`` or when the budget is spent."""
    done = completed(run, cycle, "weight", spend)
    if done:
        return done
    rsft = run.settings.rsft
    run.weights.start_training()
    step = max(first_step, run.weights.resume_step())
    # Steps before the checkpoint are not replayed: their rollouts were spent all the same.
    spent = run_queries.weight_rollouts_between(run.store, run.run_id, cycle, first_step, step)
    spend.charge(spent)
    every = checkpoint_every if checkpoint_every is not None else rsft.checkpoint_every
    reason = f"fixed length: {max_steps} steps"
    while max_steps is None or step < first_step + max_steps:
        raise_if_stopped()
        d = spend.decision()
        if d.stop:
            reason = d.reason
            break
        rollouts = sample_rollouts(run, cycle, step, harness_id)
        spend.charge(len(rollouts))
        spent += len(rollouts)
        accepted = filter_by_verifier(rollouts, rsft.threshold)
        stats = sft_step(run, cycle, step, rollouts, accepted)
        loss = "skipped (nothing accepted)" if stats.skipped else f"loss {stats.loss:.3f}"
        reward = sum(r.reward for r in rollouts) / max(len(rollouts), 1)
        check = run.weights.fingerprint
        synced = f"; {check.describe(run.weights.fingerprint_tol)}" if check and not stats.skipped else ""
        log(f"RSFT step {step}: train reward {reward:.3f}, accepted {len(accepted)}/{len(rollouts)}, {loss}{synced}")
        step += 1
        if every and step % every == 0 and (max_steps is None or step < first_step + max_steps):
            checkpoint(run, step)
        grid(run, spend, cycle, harness_id)
        if rule:
            d = rule.decide(run.store, run.run_id, first_step, step - 1)
            if d.stop:
                reason = d.reason
                break
    wid = checkpoint(run, step)
    return record(run, cycle, "weight", first_step, PhaseEnd(harness_id, wid, step - 1, reason, spent))


def checkpoint(run: Run, step: int) -> str:
    """Checkpoint the weights after ``step`` steps, then drop those ``storage.keep_checkpoints``
    does not keep; returns the weights id."""
    wid = run.weights.save(step)
    for gone in run.weights.prune():
        log(f"removed checkpoint {gone.name} (storage.keep_checkpoints: {run.weights.keep_checkpoints})")
    return wid


def harness_phase(run: Run, cycle: int, incoming: str, spend: Spend, iterations: int | None = None,
                  rule: HarnessRule | None = None) -> PhaseEnd:
    """Iteration 1 re-evaluates ``incoming`` under the current weights; then proposer iterations
    (``iterations`` in all, or until the adaptive ``rule`` or the budget ends the phase; with
    neither, until the budget). The accepted harness is the phase's best (incoming included) by
    the acceptance rule; written only at the end."""
    done = completed(run, cycle, "harness", spend)
    if done:
        return done
    search, prompt_only = run.settings.harness_search, run.condition.prompt_only
    spent = 0
    # Once a challenger has been scored, candidates stop early enough for the acceptance re-check
    # to fit in the budget too (replayed identically on resume: units are read back in order).
    size = len(run.domain.examples("harness"))
    reserve = recheck_rollouts(search.recheck_top, search.recheck_samples, size)
    kept = 0

    def unit(iteration: int, hids: list[str]) -> None:
        nonlocal spent, kept
        n = charge_harness_unit(run, spend, cycle, iteration, hids)
        spent += n
        if (iteration >= 2 or len(hids) > 1) and n:  # a challenger exists: its re-check must fit in the budget
            kept = reserve
        grid(run, spend, cycle, incoming)

    it, reason, idle = 1, "", 0
    # Iteration 1: the incoming harness and, beyond the paper, the previous weights' best frontier
    # harnesses, which may do better than the incumbent under the new weights.
    revived = revived_harnesses(run, cycle, incoming, search.rescore_frontier)
    revived = [h for i, h in enumerate(revived) if spend.open((i + 1) * size + reserve)]
    evaluate_harnesses(run, cycle, 1, [incoming, *revived])  # callers start a phase only while the budget is open
    unit(1, [incoming, *revived])
    while True:
        raise_if_stopped()
        if idle >= MAX_IDLE_ITERATIONS:  # without it, a proposer whose candidates never run would never end
            reason = f"stalled: no candidate ran in {idle} iterations"
            break
        if rule:
            d = rule.decide(run.store, run.run_id, cycle, run.weights_id, it)
        elif iterations is not None:
            d = Decision(it >= iterations, f"fixed length: {iterations} iterations")
        else:
            d = Decision(False)
        d = d if d.stop else spend.decision(kept)
        if d.stop:
            reason = d.reason
            break
        it += 1
        best = select_harness(run, cycle)["harness_id"]
        # an LLM proposer's drafts spend what the budget leaves beside this iteration's candidates
        allowance = draft_allowance(search.drafts, search.draft_examples,
                                    spend.cap - spend.spent - search.M * size - max(reserve, kept))
        proposed = propose_harnesses(run, cycle, it, best, prompt_only, allowance)
        drafted = run.store.draft_rollouts(run.run_id, cycle, it)
        spend.charge(drafted)
        spent += drafted
        before = spent
        admitted: list[str] = []
        for hid in proposed:
            # The iteration's candidates run together (in parallel under Ray), so each is admitted
            # before any runs, charged in advance its full cost and, once a challenger is in, the re-check.
            ahead = len(admitted) * size + (reserve if admitted else kept)
            if not spend.open(ahead):
                if run.archive.status(hid)[0] == "pending":
                    run.archive.set_status(hid, "unscored", "the budget was spent before its evaluation")
            elif validate_candidate(run, hid, best, prompt_only):
                admitted.append(hid)
        evaluate_harnesses(run, cycle, it, admitted, smoke=True)
        for hid in admitted:
            unit(it, [hid])
        idle = idle + 1 if spent == before else 0
    rechecked = [incoming]
    if search.recheck_top:
        rechecked = recheck_harnesses(run, cycle, incoming, search.recheck_top, search.recheck_samples,
                                      sample=spend.open())
        unit(0, rechecked)
    if len(rechecked) > 1:
        best = accept_harness(run, cycle, incoming, rechecked)
        reason = f"{reason}; {best['reason']}"
    else:
        best = select_harness(run, cycle)
    verb = "kept its incoming" if best["harness_id"] == incoming else "accepted"
    log(f"cycle {cycle}: {verb} harness {best['harness_id']} (harness-split score {best['mean_reward']:.3f})"
        + (f": {best['reason']}" if "reason" in best else ""))
    return record(run, cycle, "harness", 1, PhaseEnd(best["harness_id"], run.weights_id, it, reason, spent))
