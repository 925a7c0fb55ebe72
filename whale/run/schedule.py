"""When a phase ends: fixed lengths, the budget, and the adaptive patience rules (read from DuckDB)."""
from __future__ import annotations

from dataclasses import dataclass

from whale.store import Store
from whale.train.rsft import steps_for_epochs


@dataclass
class Decision:
    stop: bool
    reason: str = ""


def epochs_to_steps(params: dict, n_weight: int, epochs: float) -> int:
    return steps_for_epochs(epochs, n_weight, params["rsft"]["prompt_batch"])


def weight_patience(store: Store, run_id: str, first_step: int, step: int, min_steps: int, window: int,
                    patience: int) -> Decision:
    """Adaptive weight phase: after ``min_steps``, stop when the windowed mean training reward
    has not improved (strictly) for ``patience`` steps. Windows stay inside the phase."""
    if step - first_step + 1 < min_steps:
        return Decision(False)
    rows = store.query(
        "SELECT step, avg(reward_mean) OVER (ORDER BY step ROWS BETWEEN ? PRECEDING AND CURRENT ROW) "
        "FROM train_steps WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step",
        [window - 1, run_id, first_step, step])
    best_step, best = first_step, float("-inf")
    for s, mean in rows:
        if mean > best:
            best_step, best = s, mean
    if step - best_step >= patience:
        return Decision(True, f"patience: windowed train reward {best:.3f} last improved at step {best_step}")
    return Decision(False)


def harness_patience(store: Store, run_id: str, cycle: int, weights_id: str, iteration: int, min_iters: int,
                     patience: int, max_iters: int) -> Decision:
    """Adaptive harness phase: after ``min_iters``, stop when the phase's best score has not
    improved (strictly) for ``patience`` iterations; never past ``max_iters``."""
    if iteration >= max_iters:
        return Decision(True, f"cap: {max_iters} iterations")
    if iteration < min_iters:
        return Decision(False)
    rows = store.query(
        "SELECT iteration, max(mean_reward) FROM scores WHERE run_id = ? AND cycle = ? AND weights_id = ? "
        "AND split = 'harness' AND iteration >= 1 GROUP BY iteration ORDER BY iteration",
        [run_id, cycle, weights_id])
    best_it, best = 1, float("-inf")
    for it, score in rows:
        if score > best:
            best_it, best = it, score
    if iteration - best_it >= patience:
        return Decision(True, f"patience: best harness score {best:.3f} last improved at iteration {best_it}")
    return Decision(False)
