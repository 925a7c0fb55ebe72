"""When a phase ends: fixed lengths, the rollout budget, and the adaptive patience rules (read from DuckDB)."""
from __future__ import annotations

from dataclasses import dataclass

from whale.run.settings import Settings
from whale.store import Store, run_queries
from whale.train.rsft import steps_for_epochs


@dataclass
class Decision:
    stop: bool
    reason: str = ""


def epochs_to_steps(settings: Settings, n_weight: int, epochs: float) -> int:
    return steps_for_epochs(epochs, n_weight, settings.rsft.prompt_batch)


def recheck_rollouts(recheck_top: int, recheck_samples: int, n_harness: int) -> int:
    """Rollouts of a harness phase's acceptance re-check: the incoming harness and the top
    challengers, ``recheck_samples`` more samples per harness-split example each (0 when off)."""
    return (recheck_top + 1) * recheck_samples * n_harness if recheck_top else 0


def harness_phase_rollouts(settings: Settings, n_harness: int) -> int:
    """Rollouts of a fixed-length harness phase: the incoming harness's re-evaluation, (I - 1)
    iterations of M candidates, and the re-check."""
    h = settings.harness_search
    return (n_harness * (1 + (settings.schedule.I - 1) * h.M)
            + recheck_rollouts(h.recheck_top, h.recheck_samples, n_harness))


@dataclass
class Spend:
    """Weight- plus harness-split rollouts spent so far, counted unit by unit in the flow.

    The count is rebuilt exactly on resume: completed phases add what they recorded, a resumed
    weight phase its checkpointed steps, a replayed harness phase each unit it reads back. (Counting
    the store instead would include the rows of steps a resumed run is about to replay, and stop it
    earlier than an uninterrupted run.) A unit starts only while ``open``; ``limit`` is a stage's
    own share of the budget (stagewise)."""

    budget: int
    spent: int = 0
    limit: int | None = None

    @property
    def cap(self) -> int:
        return self.budget if self.limit is None else min(self.limit, self.budget)

    def open(self, reserve: int = 0) -> bool:
        """Whether a unit may start, keeping ``reserve`` rollouts for work that must follow it."""
        return self.spent + reserve < self.cap

    def charge(self, rollouts: int) -> None:
        self.spent += rollouts

    def decision(self, reserve: int = 0) -> Decision:
        if self.open(reserve):
            return Decision(False)
        kept = f", {reserve} kept for the re-check" if self.open() else ""
        return Decision(True, f"budget: {self.spent} of {self.cap} rollouts spent{kept}")


def _last_improvement(rows: list[tuple[int, float]], first: int) -> tuple[int, float]:
    """Where the signal last improved strictly (ties do not count), and its best value, over (position, value) rows."""
    best_at, best = first, float("-inf")
    for at, value in rows:
        if value > best:
            best_at, best = at, value
    return best_at, best


@dataclass(frozen=True)
class WeightRule:
    """Adaptive weight phase: after ``min_steps``, stop when the windowed mean training reward has
    not improved (strictly) for ``patience`` steps. Windows stay inside the phase."""

    min_steps: int
    window: int
    patience: int

    @classmethod
    def from_settings(cls, settings: Settings, n_weight: int) -> WeightRule:
        a = settings.schedule.adaptive
        steps = [epochs_to_steps(settings, n_weight, e) for e in (a.weight_min, a.weight_window, a.weight_patience)]
        return cls(*steps)

    def decide(self, store: Store, run_id: str, first_step: int, step: int) -> Decision:
        if step - first_step + 1 < self.min_steps:
            return Decision(False)
        rows = run_queries.windowed_train_reward(store, run_id, first_step, step, self.window)
        best_step, best = _last_improvement(rows, first_step)
        if step - best_step >= self.patience:
            return Decision(True, f"patience: windowed train reward {best:.3f} last improved at step {best_step}")
        return Decision(False)


@dataclass(frozen=True)
class HarnessRule:
    """Adaptive harness phase, counted in proposer iterations as the reference does (its 5 / 2 / 15):
    after ``min_iters`` proposer iterations, stop when the phase's best score has not improved
    (strictly) for ``patience`` of them; never past ``max_iters``. The phase's iteration 1 is the
    re-evaluation of the incoming harness, not a proposer iteration: its score joins proposer
    iteration 1's, which therefore always sets the first best (the reference's counters start at
    minus infinity and 0)."""

    min_iters: int
    patience: int
    max_iters: int

    @classmethod
    def from_settings(cls, settings: Settings) -> HarnessRule:
        a = settings.schedule.adaptive
        return cls(a.harness_min, a.harness_patience, a.harness_max)

    def decide(self, store: Store, run_id: str, cycle: int, weights_id: str, iteration: int) -> Decision:
        """``iteration``: the phase's iteration just finished (1 = the re-evaluation)."""
        proposed = iteration - 1
        if proposed >= self.max_iters:
            return Decision(True, f"cap: {self.max_iters} proposer iterations")
        if proposed < self.min_iters:
            return Decision(False)
        rows = run_queries.best_score_per_proposer_iteration(store, run_id, cycle, weights_id)
        best_p, best = _last_improvement(rows, 1)
        if proposed - best_p >= self.patience:
            return Decision(True, f"patience: best harness score {best:.3f} last improved at proposer iteration "
                                  f"{best_p}")
        return Decision(False)
