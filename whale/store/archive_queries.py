"""Named read queries over the archive's tables (harnesses, scores, harness-split rollouts).

They take any DuckDB connection holding those tables: the run's store or the proposer's view of
it (harnesses/proposers/base.py), which has the same columns and only harness-split rows.
"""
from __future__ import annotations

import duckdb


def harness_example_means(con: duckdb.DuckDBPyConnection, weights_id: str) -> list[tuple[str, str, float]]:
    """(harness, example, mean reward) of every `ok` harness scored on the harness split under
    ``weights_id``, a missing reward counted as 0."""
    return con.execute(
        "SELECT r.harness_id, r.example_id, avg(coalesce(r.reward, 0)) FROM rollouts r "
        "JOIN harnesses h USING (harness_id) WHERE r.split = 'harness' AND r.weights_id = ? "
        "AND h.status = 'ok' GROUP BY ALL ORDER BY ALL", [weights_id]).fetchall()


def previous_search_weights(con: duckdb.DuckDBPyConnection, weights_id: str) -> str | None:
    """The latest weights other than ``weights_id`` that a harness phase scored harnesses under."""
    row = con.execute(
        "SELECT weights_id FROM rollouts WHERE split = 'harness' AND phase = 'harness' AND weights_id <> ? "
        "GROUP BY weights_id ORDER BY max(cycle) DESC, max(step) DESC, weights_id LIMIT 1", [weights_id]).fetchone()
    return row[0] if row else None


def latest_harness_episodes(con: duckdb.DuckDBPyConnection, harness_id: str) -> list[tuple]:
    """``harness_id``'s harness-split episodes under the latest weights that have any: (weights_id,
    stop_reason, formatted, reward, turns, tokens_out, messages, verdict, tool_calls) each."""
    return con.execute(
        """
        WITH latest AS (
            SELECT weights_id FROM rollouts WHERE harness_id = ? AND split = 'harness'
            GROUP BY weights_id ORDER BY max(cycle) DESC, max(step) DESC, weights_id LIMIT 1)
        SELECT weights_id, stop_reason, formatted, reward, turns, tokens_out, messages, verdict, tool_calls
        FROM rollouts WHERE harness_id = ? AND split = 'harness'
          AND weights_id = (SELECT weights_id FROM latest)
        """, [harness_id, harness_id]).fetchall()


def scored_peers(con: duckdb.DuckDBPyConnection, weights_id: str, harness_id: str) -> list[str]:
    """The other `ok` harnesses with harness-split rollouts under ``weights_id``, sorted."""
    rows = con.execute(
        "SELECT DISTINCT r.harness_id FROM rollouts r JOIN harnesses h USING (harness_id) "
        "WHERE r.split = 'harness' AND r.weights_id = ? AND h.status = 'ok' AND r.harness_id <> ? "
        "ORDER BY r.harness_id", [weights_id, harness_id]).fetchall()
    return [h for (h,) in rows]


def components_and_parents(con: duckdb.DuckDBPyConnection, harness_id: str) -> tuple[list[str], list[str]] | None:
    """An archived harness's components and parents, or None when it is not archived."""
    row = con.execute("SELECT components, parents FROM harnesses WHERE harness_id = ?", [harness_id]).fetchone()
    return (list(row[0] or []), list(row[1] or [])) if row else None
