"""`whale sql`: one query over every run's DuckDB file, attached read-only (a running job's
snapshot while it holds the file)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import duckdb

from whale.store import find_stores, read_through_snapshot


def attach_runs(runs_dir: str | Path = "runs") -> duckdb.DuckDBPyConnection:
    """An in-memory connection with each ``runs/<run>/rollouts.duckdb`` attached as ``<run>``,
    plus ``all_<table>`` views stacking the runs' tables (a ``run`` column says which); with a
    single run, its tables also answer to their bare names."""
    con = duckdb.connect()
    names = []
    for db in find_stores(runs_dir):
        alias = re.sub(r"\W", "_", db.parent.name)
        try:
            _, note = read_through_snapshot(db, lambda p, a=alias: con.execute(f"ATTACH '{p}' AS \"{a}\" (READ_ONLY)"))
        except duckdb.IOException as e:  # a running job holds the file's only lock, no snapshot yet
            print(f"whale sql: skipped {db.parent.name} (in use by a running job that has not published "
                  f"a snapshot yet: {str(e).splitlines()[0]})", file=sys.stderr)
            continue
        if note:
            print(f"whale sql: {note}", file=sys.stderr)
        names.append(alias)
    # a store written by an older version may lack a table: each view stacks the runs that have it
    holders: dict[str, list[str]] = {}
    for table, db in con.execute("SELECT table_name, database_name FROM duckdb_tables() ORDER BY ALL").fetchall():
        if db in names:
            holders.setdefault(table, []).append(db)
    for table, dbs in sorted(holders.items()):
        union = " UNION ALL BY NAME ".join(f"SELECT '{n}' AS run, * FROM \"{n}\".{table}" for n in dbs)
        con.execute(f"CREATE VIEW all_{table} AS {union}")
    if len(names) == 1:  # one run: its tables answer to their bare names too
        con.execute(f"SET search_path = '\"{names[0]}\".main,memory.main'")
    return con


def run_sql(query: str, runs_dir: str | Path = "runs", max_rows: int = 200) -> str:
    con = attach_runs(runs_dir)
    try:
        try:
            rel = con.sql(query)
        except duckdb.Error as e:  # the user's query: say what DuckDB said, no traceback
            raise ValueError(f"query failed: {e}{_which_run(con, e)}") from None
        if rel is None:
            return "ok"
        df = rel.limit(max_rows).df()
        return df.to_string(index=False, max_colwidth=80)
    finally:
        con.close()


def _which_run(con, error: duckdb.Error) -> str:
    """With several runs a bare table name is ambiguous: say how to name one, or all of them."""
    missing = re.search(r"Table with name (\w+) does not exist", str(error))
    if not missing:
        return ""
    table = missing.group(1)
    runs = [db for (db,) in con.execute("SELECT DISTINCT database_name FROM duckdb_tables() WHERE table_name = ? "
                                        "ORDER BY 1", [table]).fetchall()]
    if len(runs) < 2:
        return ""
    return (f"\n{len(runs)} runs have a table {table!r}: name one as <run>.{table} "
            f"({', '.join(runs)}), or query all_{table} (every run, with a `run` column)")


def add_arguments(p) -> None:
    p.add_argument("query")
    p.add_argument("--runs", default="runs")


def run(args, settings) -> None:
    print(run_sql(args.query, args.runs))
