"""What the comparison machinery costs a finished run: the evaluation grid and the re-checks.

    .venv/bin/python bench/costs.py runs/<run_id>

From the run's store, side by side: the re-check rollouts (harness phases' iteration 0) as a
share of all harness-phase rollouts, and the grid's test evaluations as a share of everything the
run generated, in rollouts and in generated tokens (generation dominates wall time on CPU; the
Prefect task durations are not stored). Rollouts that a grid point read back from an earlier
evaluation of the same (harness, weights) pair cost nothing and are not counted. Prints one JSON line.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb


def costs(run_dir: Path) -> dict:
    con = duckdb.connect(str(run_dir / "rollouts.duckdb"), read_only=True)
    try:
        q = lambda sql: con.execute(sql).fetchone()  # noqa: E731
        harness, recheck = q("SELECT count(*), count(*) FILTER (WHERE step = 0) FROM rollouts WHERE phase = 'harness'")
        total, tokens = q("SELECT count(*), sum(tokens_out) FROM rollouts")
        # a test evaluation's rollouts are keyed by its place among the run's evaluations (insertion order)
        grid, grid_tokens = q(
            "WITH e AS (SELECT phase, row_number() OVER (ORDER BY rowid) - 1 AS number "
            "FROM evals) SELECT count(*), coalesce(sum(tokens_out), 0) FROM rollouts r JOIN e "
            "ON r.phase = 'eval' AND r.step = e.number WHERE e.phase LIKE 'grid-%'")
    finally:
        con.close()
    return {"run": run_dir.name, "harness_rollouts": harness, "recheck_rollouts": recheck,
            "recheck_share_of_harness": round(recheck / harness, 3) if harness else None,
            "all_rollouts": total, "grid_rollouts": grid, "grid_share_of_rollouts": round(grid / total, 3),
            "grid_share_of_generated_tokens": round(grid_tokens / tokens, 3) if tokens else None}


if __name__ == "__main__":
    print(json.dumps(costs(Path(sys.argv[1]))))
