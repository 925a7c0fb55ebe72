"""Named queries of the report (``whale report``, ``whale compare``): one DataFrame per name, read
from each run's store."""
from __future__ import annotations

import duckdb

# Test-split mean@k of every (harness, weights) pair that has test rollouts, from any phase:
# the run's own phase-boundary evaluations and `whale eval` measurements alike.
MEASURED_SQL = """
SELECT harness_id, weights_id, count(*) AS n_examples, max(n) AS k, sum(n) AS rollouts, avg(r) AS mean_at_k
FROM (SELECT harness_id, weights_id, example_id, count(*) AS n, avg(reward) AS r
      FROM rollouts WHERE split = 'test' GROUP BY ALL)
GROUP BY ALL
"""

QUERIES = {
    "runs": "SELECT run_id, domain, condition, params FROM runs ORDER BY run_id",
    "evals": "SELECT * FROM evals WHERE split = 'test'",
    "phases": "SELECT * FROM phases ORDER BY cycle, phase",
    "harnesses": "SELECT * FROM harnesses ORDER BY cycle, iteration, harness_id",
    "scores": "SELECT * FROM scores WHERE split = 'harness' ORDER BY cycle, iteration",
    "proposer": "SELECT * FROM proposer_calls ORDER BY cycle, iteration",
    "counts": "SELECT run_id, phase, count(*) AS rollouts FROM rollouts GROUP BY ALL ORDER BY ALL",
    "measured": MEASURED_SQL,
    # per-example test rewards of every (harness, weights) pair: the unit of the paired bootstrap
    "by_example": "SELECT run_id, harness_id, weights_id, example_id, count(*) AS n, avg(reward) AS reward "
                  "FROM rollouts WHERE split = 'test' GROUP BY ALL ORDER BY ALL",
    "starts": "SELECT run_id, code FROM run_starts ORDER BY run_id, start",
}


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables a store has (one written by an older version may lack some)."""
    return {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
