"""Named queries of a run's flow over its own store: phase ends, evaluations, spend, scores and the
rows the schedule's patience rules and the acceptance rule read.

Each takes the run's ``Store`` and its run id; the phases, tasks and schedule hold no SQL.
"""
from __future__ import annotations

from whale.store import RECHECK_ITERATION, Store


def run_identity(store: Store, run_id: str) -> dict | None:
    """The (domain, condition, params) row a run id was first started with, or None."""
    return store.row("SELECT domain, condition, params FROM runs WHERE run_id = ?", [run_id])


def phase_end(store: Store, run_id: str, cycle: int, phase: str) -> dict | None:
    """The recorded end of a finished phase: harness_id, weights_id, last_step, reason, rollouts."""
    return store.row("SELECT harness_id, weights_id, last_step, reason, rollouts FROM phases "
                     "WHERE run_id = ? AND cycle = ? AND phase = ?", [run_id, cycle, phase])


def weight_rollouts_between(store: Store, run_id: str, cycle: int, first: int, end: int) -> int:
    """Weight-phase rollouts of ``cycle`` stored for steps ``first`` <= step < ``end``."""
    return store.query("SELECT count(*) FROM rollouts WHERE run_id = ? AND cycle = ? AND phase = 'weight' "
                       "AND step >= ? AND step < ?", [run_id, cycle, first, end])[0][0]


def grid_points_done(store: Store, run_id: str) -> set[str]:
    """The grid evaluations (``grid-<n>``) a run has taken."""
    return {p for (p,) in store.query("SELECT phase FROM evals WHERE run_id = ? AND phase LIKE 'grid-%'",
                                      [run_id])}


def evaluation(store: Store, run_id: str, cycle: int, phase: str) -> dict | None:
    """The test evaluation taken at (``cycle``, ``phase``), or None."""
    return store.row("SELECT * FROM evals WHERE run_id = ? AND cycle = ? AND phase = ?", [run_id, cycle, phase])


def evaluations_taken(store: Store, run_id: str) -> int:
    return store.query("SELECT count(*) FROM evals WHERE run_id = ?", [run_id])[0][0]


def last_evaluated_cycle(store: Store, run_id: str) -> int:
    """The latest cycle with a test evaluation (0 when none)."""
    return store.query("SELECT coalesce(max(cycle), 0) FROM evals WHERE run_id = ?", [run_id])[0][0]


def last_evaluation(store: Store, run_id: str) -> dict | None:
    """The test evaluation taken last: mean_at_k and cumulative_rollouts."""
    return store.row("SELECT mean_at_k, cumulative_rollouts FROM evals WHERE run_id = ? "
                     "ORDER BY rowid DESC LIMIT 1", [run_id])


def windowed_train_reward(store: Store, run_id: str, first_step: int, step: int, window: int) -> list[tuple]:
    """(step, mean train reward over the last ``window`` steps) from ``first_step`` to ``step``."""
    return store.query(
        "SELECT step, avg(reward_mean) OVER (ORDER BY step ROWS BETWEEN ? PRECEDING AND CURRENT ROW) "
        "FROM train_steps WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step",
        [window - 1, run_id, first_step, step])


def best_score_per_proposer_iteration(store: Store, run_id: str, cycle: int, weights_id: str) -> list[tuple]:
    """(proposer iteration, best harness-split score) of a harness phase; the re-evaluation of the
    incoming harness (iteration 1) counts as proposer iteration 1."""
    return store.query(
        "SELECT greatest(iteration - 1, 1) AS p, max(mean_reward) FROM scores WHERE run_id = ? AND cycle = ? "
        "AND weights_id = ? AND split = 'harness' AND iteration >= 1 GROUP BY p ORDER BY p",
        [run_id, cycle, weights_id])


def iteration_candidates(store: Store, cycle: int, iteration: int) -> list[str]:
    """The proposed (not seed) harnesses archived in one harness-phase iteration, in proposal order."""
    return [h for (h,) in store.query("SELECT harness_id FROM harnesses WHERE cycle = ? AND iteration = ? "
                                      "AND origin <> 'seed' ORDER BY created_at, harness_id", [cycle, iteration])]


def harness_score(store: Store, run_id: str, harness_id: str, weights_id: str, cycle: int,
                  iteration: int) -> dict | None:
    """A harness's stored harness-split score in one iteration: harness_id, mean_reward, mean_turns, n."""
    return store.row("SELECT harness_id, mean_reward, mean_turns, n FROM scores WHERE run_id = ? AND harness_id = ? "
                     "AND weights_id = ? AND cycle = ? AND iteration = ? AND split = 'harness'",
                     [run_id, harness_id, weights_id, cycle, iteration])


def ranked_scores(store: Store, run_id: str, cycle: int, weights_id: str, limit: int, recheck: bool) -> list[tuple]:
    """(harness_id, mean_reward, mean_turns, iteration) of a harness phase's scores under
    ``weights_id``, best first (higher reward, then fewer turns, then earlier): the acceptance
    re-check's (``recheck``) or the proposer iterations'."""
    op = "=" if recheck else ">"
    return store.query(
        "SELECT harness_id, mean_reward, mean_turns, iteration FROM scores WHERE run_id = ? AND cycle = ? "
        f"AND weights_id = ? AND split = 'harness' AND iteration {op} ? "
        "ORDER BY mean_reward DESC, mean_turns ASC, iteration ASC, harness_id LIMIT ?",
        [run_id, cycle, weights_id, RECHECK_ITERATION, limit])


def harness_phase_example_means(store: Store, run_id: str, cycle: int, weights_id: str,
                                harness_ids: list[str], recheck_only: bool = False) -> list[tuple]:
    """(harness_id, example_id, mean reward, mean turns) of the named harnesses' harness-phase
    rollouts on the harness split under ``weights_id`` (with ``recheck_only``, the re-check's
    alone): what the acceptance rule pairs."""
    return store.query(
        "SELECT harness_id, example_id, avg(reward), avg(turns) FROM rollouts WHERE run_id = ? AND cycle = ? "
        "AND phase = 'harness' AND split = 'harness' AND weights_id = ? AND list_contains(?, harness_id) "
        "AND (NOT ? OR step = ?) GROUP BY ALL",  # a harness-phase rollout's step is its iteration
        [run_id, cycle, weights_id, harness_ids, recheck_only, RECHECK_ITERATION])


def drafts_taken(store: Store, run_id: str, cycle: int, iteration: int) -> int:
    """Drafts the proposer tried in one harness-phase iteration."""
    return store.query("SELECT count(*) FROM drafts WHERE run_id = ? AND cycle = ? AND iteration = ?",
                       [run_id, cycle, iteration])[0][0]
