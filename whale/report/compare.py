"""`whale compare`: conditions side by side on their final test scores, with paired intervals.

Runs of one domain are grouped by condition; the runs of a condition are its run seeds. Each run
contributes the per-example test rewards of its final evaluation (the last (harness, weights)
pair it evaluated). Every condition is paired with every other on the same test examples and,
where both have them, the same run seeds (see ``whale/report/stats.py``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from whale.report.data import RunData
from whale.stats import Difference, Estimate, difference, estimate


@dataclass(frozen=True)
class ConditionScore:
    condition: str
    run_ids: list[str]
    seeds: list[int | None]
    final: Estimate
    final_rollouts: list[int]
    grid: dict[str, Estimate]


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    seeds: list[int | None]
    diff: Difference
    grid: dict[str, Difference]


@dataclass(frozen=True)
class Comparison:
    domain: str
    n_examples: int
    scores: list[ConditionScore]
    pairs: list[Pair]

    def as_dict(self) -> dict:
        out = asdict(self)
        for row, score in zip(out["scores"], self.scores, strict=True):
            row["final"]["half_width"] = score.final.half_width
        for row, pair in zip(out["pairs"], self.pairs, strict=True):
            row["diff"]["significant"] = pair.diff.significant
            for point, d in pair.grid.items():
                row["grid"][point]["significant"] = d.significant
        return out


def final_rewards(run: RunData) -> pd.Series:
    if run.evals.empty:
        raise ValueError(f"run {run.run_id} has no test evaluation yet")
    return _rewards(run, run.evals.iloc[-1])


def grid_rewards(run: RunData) -> dict[str, pd.Series]:
    """Per-example test rewards at the start (before any spend, the same system in every condition:
    the baseline) and at each grid point the run evaluated (``grid-1``, ``grid-2``, ...)."""
    rows = run.evals[run.evals["phase"].str.startswith("grid-") | (run.evals["phase"] == "start")]
    return {row["phase"]: _rewards(run, row) for row in rows.to_dict("records")}


def _rewards(run: RunData, row) -> pd.Series:
    scores = run.test_rewards(row["harness_id"], row["weights_id"])
    if scores.empty:
        raise ValueError(f"run {run.run_id}: its {row['phase']} evaluation has no test rollouts in the store")
    return scores


def compare(runs: list[RunData], domain: str) -> Comparison:
    mine = [r for r in runs if r.domain == domain]
    if not mine:
        raise ValueError(f"no readable run of domain {domain!r}")
    groups: dict[str, list[RunData]] = {}
    for r in sorted(mine, key=lambda r: (r.condition, r.seed if r.seed is not None else -1, r.run_id)):
        groups.setdefault(r.condition, []).append(r)
    points = {"final": {c: {r.seed: final_rewards(r) for r in rs} for c, rs in groups.items()}}
    grids = {c: {r.seed: grid_rewards(r) for r in rs} for c, rs in groups.items()}
    common = set.intersection(*(set(g) for by_seed in grids.values() for g in by_seed.values()))
    for point in sorted(common, key=_grid_order):
        points[point] = {c: {seed: g[point] for seed, g in by_seed.items()} for c, by_seed in grids.items()}
    examples = _common_examples(points["final"])
    grid_names = [p for p in points if p != "final"]
    scores = [ConditionScore(c, [r.run_id for r in rs], [r.seed for r in rs],
                             estimate(_matrix(points["final"][c], list(points["final"][c]), examples)),
                             [int(r.evals.iloc[-1]["cumulative_rollouts"]) for r in rs],
                             {p: estimate(_matrix(points[p][c], list(points[p][c]), examples)) for p in grid_names})
              for c, rs in groups.items()]
    pairs = []
    for a, b in combinations(groups, 2):
        seeds = [s for s in points["final"][a] if s in points["final"][b]] or [None]
        diffs = {p: _paired(points[p], a, b, seeds, examples) for p in points}
        pairs.append(Pair(a, b, seeds, diffs.pop("final"), diffs))
    return Comparison(domain, len(examples), scores, pairs)


def _grid_order(point: str) -> int:
    return 0 if point == "start" else int(point.split("-")[1])


def _paired(point: dict, a: str, b: str, seeds: list, examples: list[str]) -> Difference:
    if seeds == [None]:  # no seed in common: pair by position (each side's seeds in order)
        return difference(_matrix(point[a], list(point[a]), examples), _matrix(point[b], list(point[b]), examples))
    return difference(*(_matrix(point[c], seeds, examples) for c in (a, b)))


def _common_examples(series: dict[str, dict]) -> list[str]:
    sets = [set(s.index) for by_seed in series.values() for s in by_seed.values()]
    common = set.intersection(*sets)
    if common != set.union(*sets):
        raise ValueError("the runs were evaluated on different test examples: they cannot be paired "
                         f"({len(common)} in common of {len(set.union(*sets))})")
    return sorted(common)


def _matrix(by_seed: dict, seeds: list, examples: list[str]) -> np.ndarray:
    return np.stack([by_seed[s].reindex(examples).to_numpy(dtype=float) for s in seeds])


def render(c: Comparison) -> str:
    lines = [f"{c.domain}: final test mean@k per condition, 95 % paired bootstrap intervals over "
             f"{c.n_examples} test examples (and over run seeds where there are several)", ""]
    width = max(len(s.condition) for s in c.scores)
    for s in c.scores:
        lines.append(f"  {s.condition:<{width}}  {s.final}  seeds {_seeds(s.seeds)}  "
                     f"rollouts {', '.join(map(str, s.final_rollouts))}")
    grid = list(c.scores[0].grid)
    if grid:
        lines += ["", "at the evaluation grid (the same cumulative-rollout points in every run):"]
        for s in c.scores:
            lines.append(f"  {s.condition:<{width}}  " + "  ".join(f"{p} {s.grid[p]}" for p in grid))
    lines += ["", "differences (first minus second condition); * = the interval excludes 0:"]
    for p in c.pairs:
        mark = "*" if p.diff.significant else " "
        verdict = "significant" if p.diff.significant else "noise at this sample size"
        lines.append(f"  {mark} {p.a} - {p.b}: {p.diff.mean:+.3f} [{p.diff.lo:+.3f}, {p.diff.hi:+.3f}]  "
                     f"({verdict}; paired on seeds {_seeds(p.seeds)})")
        for point, d in p.grid.items():
            lines.append(f"      at {point}: {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]{' *' if d.significant else ''}")
    budgets = {r for s in c.scores for r in s.final_rollouts}
    if len(budgets) > 1:
        lines += ["", f"note: the runs spent different rollout budgets ({min(budgets)}..{max(budgets)}): "
                      "a difference may come from the budget, not the method"]
    return "\n".join(lines) + "\n"


def _seeds(seeds: list) -> str:
    return ",".join("?" if s is None else str(s) for s in seeds)
