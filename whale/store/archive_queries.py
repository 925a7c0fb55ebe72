"""Named queries over the archive's tables (harnesses, scores, phases, harness-split rollouts).

The reads take any DuckDB connection holding those tables: the run's store, a reader of it
(``whale harness``) or the proposer's view of it (harnesses/proposers/base.py), which has the same
columns and only harness-split rows. The two writes (a verdict, a null reward) take the writer's.
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


def harness_verdict(con: duckdb.DuckDBPyConnection, harness_id: str) -> tuple[str, str | None] | None:
    """An archived harness's (status, error), or None when it is not archived."""
    return con.execute("SELECT status, error FROM harnesses WHERE harness_id = ?", [harness_id]).fetchone()


def set_harness_verdict(con: duckdb.DuckDBPyConnection, harness_id: str, status: str, error: str | None) -> None:
    con.execute("UPDATE harnesses SET status = ?, error = ? WHERE harness_id = ?", [status, error, harness_id])


def null_reward(con: duckdb.DuckDBPyConnection, harness_id: str) -> float | None:
    """The null-policy reward stored for a harness (None: not measured, or not archived)."""
    row = con.execute("SELECT null_reward FROM harnesses WHERE harness_id = ?", [harness_id]).fetchone()
    return row[0] if row else None


def set_null_reward(con: duckdb.DuckDBPyConnection, harness_id: str, reward: float) -> None:
    con.execute("UPDATE harnesses SET null_reward = ? WHERE harness_id = ?", [reward, harness_id])


def ids_starting_with(con: duckdb.DuckDBPyConnection, prefix: str) -> list[str]:
    """Archived harness ids that start with ``prefix``, sorted."""
    rows = con.execute("SELECT harness_id FROM harnesses WHERE starts_with(harness_id, ?) ORDER BY harness_id",
                       [prefix]).fetchall()
    return [h for (h,) in rows]


def harness_rows(con: duckdb.DuckDBPyConnection, columns: list[str]) -> list[tuple]:
    """``columns`` of every archived harness, in the order they were proposed."""
    known = {name for (name, *_) in con.execute("DESCRIBE harnesses").fetchall()}
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise ValueError(f"harnesses has no column {', '.join(unknown)}")
    return con.execute(f"SELECT {', '.join(columns)} FROM harnesses "
                       "ORDER BY cycle, iteration, created_at, harness_id").fetchall()


def best_scores(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(harness_id, weights_id, best harness-split score, first cycle) per harness and weights."""
    return con.execute("SELECT harness_id, weights_id, max(mean_reward), min(cycle) AS c FROM scores "
                       "WHERE split = 'harness' GROUP BY harness_id, weights_id "
                       "ORDER BY harness_id, c, weights_id").fetchall()


def phase_harnesses(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(cycle, phase, harness_id) of every finished phase: the harness a harness phase accepted or
    a weight phase trained under."""
    return con.execute("SELECT cycle, phase, harness_id FROM phases ORDER BY cycle, phase DESC").fetchall()


def harness_scores(con: duckdb.DuckDBPyConnection, harness_id: str) -> list[tuple]:
    """Every score of one harness: (weights_id, split, cycle, iteration, n, mean_reward,
    format_rate, truncation_rate, error_rate, mean_turns)."""
    return con.execute(
        "SELECT weights_id, split, cycle, iteration, n, mean_reward, format_rate, truncation_rate, error_rate, "
        "mean_turns FROM scores WHERE harness_id = ? ORDER BY cycle, iteration, split, weights_id",
        [harness_id]).fetchall()


def archived_harnesses(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(harness_id, parents, origin, status, error, hypothesis, axis, cycle, iteration) of every
    archived harness, in the order they were archived."""
    return con.execute("SELECT harness_id, parents, origin, status, error, hypothesis, axis, cycle, iteration "
                       "FROM harnesses ORDER BY created_at, harness_id").fetchall()


def all_scores(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(harness_id, weights_id, cycle, iteration, n, mean_reward, format_rate, truncation_rate,
    error_rate, mean_turns) of every score, in the order they were taken."""
    return con.execute("SELECT harness_id, weights_id, cycle, iteration, n, mean_reward, format_rate, "
                       "truncation_rate, error_rate, mean_turns FROM scores ORDER BY cycle, iteration").fetchall()


def rollout_messages(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(harness_id, weights_id, example_id, sample_idx, reward, messages) of every rollout held."""
    return con.execute("SELECT harness_id, weights_id, example_id, sample_idx, reward, messages FROM rollouts "
                       "ORDER BY harness_id, weights_id, example_id, sample_idx").fetchall()
