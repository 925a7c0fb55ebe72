"""The `whale` Prefect flow: one domain, one condition (whale/run/conditions.py), from params.yaml."""
from __future__ import annotations

from prefect import flow

from flows.phases import PhaseEnd, charge_harness_unit, harness_phase, weight_phase
from tasks import log
from tasks.harness import evaluate_harnesses
from tasks.measure import evaluate_test
from whale.run.conditions import get_condition
from whale.run.context import Run
from whale.run.disk import disk_need
from whale.run.schedule import HarnessRule, Spend, WeightRule, epochs_to_steps
from whale.run.settings import Settings, load_settings
from whale.run.stop import raise_if_stopped
from whale.store import run_queries

MAX_CYCLES = 30


def _steps(run: Run, epochs: float) -> int:
    return epochs_to_steps(run.settings, len(run.domain.examples("weight")), epochs)


def boundary(run: Run, cycle: int, phase: str, harness_id: str, spend: Spend) -> None:
    """The test evaluation at the end of a phase (for the curves), unless ``eval.phases`` is off."""
    if run.settings.eval.phases:
        evaluate_test(run, cycle, phase, harness_id, spend.spent)


def _final(run: Run, harness_id: str, spend: Spend) -> None:
    """Without phase evaluations the end of the run is evaluated on its own (free when a grid
    point already measured the same weights and harness)."""
    if not run.settings.eval.phases:
        cycle = run_queries.last_evaluated_cycle(run.store, run.run_id)
        evaluate_test(run, cycle, "final", harness_id, spend.spent)


def _alternate(run: Run, h0: str, spend: Spend) -> str:
    """Weight phase, harness phase, repeated until the budget is spent (weight_only: weight phases
    only, each E epochs long, so the test curve has a point per phase)."""
    sched, condition = run.settings.schedule, run.condition
    phase_len = _steps(run, sched.E)
    weight_rule = WeightRule.from_settings(run.settings, len(run.domain.examples("weight")))
    harness_rule = HarnessRule.from_settings(run.settings)
    incumbent, step = h0, 0
    for cycle in range(1, MAX_CYCLES + 1):
        if not spend.open():
            break
        if condition.adaptive:
            end = weight_phase(run, cycle, incumbent, step, spend, rule=weight_rule)
        else:
            end = weight_phase(run, cycle, incumbent, step, spend, max_steps=phase_len)
        step = end.last_step + 1
        boundary(run, cycle, "weight", incumbent, spend)
        if condition.searches and spend.open():
            if condition.adaptive:
                end = harness_phase(run, cycle, incumbent, spend, rule=harness_rule)
            else:
                end = harness_phase(run, cycle, incumbent, spend, iterations=sched.I)
            incumbent = end.harness_id
            boundary(run, cycle, "harness", incumbent, spend)
    return incumbent


def _harness_only(run: Run, h0: str, spend: Spend) -> str:
    end = harness_phase(run, 1, h0, spend)
    boundary(run, 1, "harness", end.harness_id, spend)
    return end.harness_id


def _stagewise(run: Run, h0: str, spend: Spend) -> str:
    """The weight stage spends ``stagewise_weight_share`` of the budget, the harness stage the rest,
    on the weight stage's best checkpoint, chosen on the harness split (never on test)."""
    sched = run.settings.schedule
    every = _steps(run, sched.E)
    spend.limit = round(sched.stagewise_weight_share * sched.budget)
    end = weight_phase(run, 1, h0, 0, spend, checkpoint_every=every)
    spend.limit = None
    run.weights.serve(_best_weight_point(run, h0, every, end, spend))
    boundary(run, 1, "weight", h0, spend)
    harness = h0
    if spend.open():
        harness = harness_phase(run, 2, h0, spend).harness_id
        boundary(run, 2, "harness", harness, spend)
    return harness


def _best_weight_point(run: Run, h0: str, every: int, end: PhaseEnd, spend: Spend) -> int:
    """The checkpoint (every ``every`` steps, and the last) whose weights score best with h0 on the
    harness split; each scoring is a unit of the budget. Ties go to the later checkpoint."""
    points = sorted({*range(every, end.last_step + 1, every), end.last_step + 1}) if every else [end.last_step + 1]
    best, best_score = points[-1], float("-inf")
    for step in points:
        if not spend.open():
            break
        run.weights.serve(step)
        (score,) = evaluate_harnesses(run, 1, step, [h0])
        charge_harness_unit(run, spend, 1, step, [h0])
        if score is not None and score["mean_reward"] >= best_score:
            best, best_score = step, score["mean_reward"]
    log(f"stagewise: weight stage's best point is step {best} (harness-split score {best_score:.3f})")
    return best


def _check_disk(run: Run) -> None:
    """Warn at the start, not hours in, when the checkpoints may not fit (an upper bound, so no stop)."""
    if not (run.weights.base_model / "config.json").is_file():
        return  # a model this estimate cannot read (not a transformers directory)
    need = disk_need(run.settings, run.condition, len(run.domain.examples("weight")),
                     len(run.domain.examples("harness")), run.weights.base_model, run.dir)
    if not need.fits:
        log(f"warning: {need.advice(run.dir.parent)}")


@flow(name="whale")
def whale(domain: str = "math_reasoning", condition: str = "adaptive_whale", run_id: str | None = None,
          profile: str | None = None, overrides: dict | None = None, params_path: str = "params.yaml",
          runs_dir: str = "runs") -> dict:
    """Run (or resume) one condition on one domain; returns the final test metrics and where they are."""
    return run_condition(load_settings(params_path, profile, overrides, domain), domain, condition, run_id, runs_dir)


def run_condition(settings: Settings, domain: str, condition: str, run_id: str | None = None,
                  runs_dir: str = "runs") -> dict:
    cond = get_condition(condition)
    settings.check_domain(domain)
    run = Run(settings, domain, cond, run_id or f"{domain}-{condition}", runs_dir)
    try:
        if settings.parallel.engine == "ray":
            from tasks.parallel import RayDispatch

            run.dispatch = RayDispatch(settings.parallel)
        _check_disk(run)
        h0 = run.seed_harness()
        spend = Spend(settings.schedule.budget)
        evaluate_test(run, 0, "start", h0, spend.spent)
        if not cond.trains:
            final = _harness_only(run, h0, spend)
        elif cond.stages:
            final = _stagewise(run, h0, spend)
        else:
            final = _alternate(run, h0, spend)
        raise_if_stopped()  # an interrupted run is not evaluated as if it had ended
        _final(run, final, spend)
        result = run_queries.last_evaluation(run.store, run.run_id)
        return {"run_id": run.run_id, "run_dir": str(run.dir), "final_harness": final,
                "test_mean_at_k": result["mean_at_k"], "weights_id": run.weights_id,
                "rollouts": int(result["cumulative_rollouts"])}
    finally:
        run.close()
