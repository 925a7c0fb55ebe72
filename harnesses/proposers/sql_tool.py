"""The Claude proposer's ``sql`` tool: one read-only query over the proposer's view, bounded.

The view itself refuses files and settings (``proposer_view``); here a query is bounded in wall
time (DuckDB has no statement timeout, so a timer interrupts it), in rows and in characters,
each value cut inside DuckDB so neither an endless result nor one giant value reaches Python.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import duckdb

SQL_TIMEOUT_S = 5.0
SQL_MAX_ROWS = 200
SQL_MAX_CHARS = 12_000
SQL_MAX_CELL_CHARS = 2_000


class SqlRefused(Exception):
    """A query refused or stopped; its text tells Claude what to change."""


@dataclass(frozen=True)
class SqlLimits:
    """What one ``sql`` call may cost: wall time, rows and characters (whole result and each value)."""

    timeout_s: float = SQL_TIMEOUT_S
    max_rows: int = SQL_MAX_ROWS
    max_chars: int = SQL_MAX_CHARS
    max_cell_chars: int = SQL_MAX_CELL_CHARS

    def __post_init__(self):
        if self.timeout_s <= 0 or min(self.max_rows, self.max_chars, self.max_cell_chars) < 1:
            raise ValueError(f"SQL limits must be positive: {self}")

    def describe(self) -> str:
        return (f"it is stopped after {self.timeout_s:g} s; at most {self.max_rows} rows, {self.max_cell_chars} "
                f"characters per value and {self.max_chars} characters in all come back")


DEFAULT_SQL_LIMITS = SqlLimits()


def run_select(view: duckdb.DuckDBPyConnection, query: str, limits: SqlLimits = DEFAULT_SQL_LIMITS) -> str:
    """The result of one SELECT/WITH ``query`` as tab-separated text within ``limits``."""
    check_select(query)
    names, rows = _select(view, _unterminated(query), limits)
    shown = rows[:limits.max_rows]
    lines = ["\t".join(names)] + ["\t".join(_cell(v, limits.max_cell_chars) for v in r) for r in shown]
    if not rows:
        lines.append("(0 rows)")
    elif len(rows) > limits.max_rows:
        lines.append(f"... first {limits.max_rows} rows shown, more were cut: aggregate or add LIMIT")
    return cap("\n".join(lines), limits.max_chars)


def check_select(query: str) -> None:
    """Refuse anything but one SELECT/WITH statement."""
    if not isinstance(query, str) or not query.strip():
        raise SqlRefused("query must be a non-empty string")
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as e:
        raise SqlRefused(f"{type(e).__name__}: {e}") from None
    if len(statements) != 1:
        raise SqlRefused("send exactly one statement")
    head = re.sub(r"^(\s|--[^\n]*\n|/\*.*?\*/)*", "", query, flags=re.S).split(None, 1)[0].upper()
    if statements[0].type != duckdb.StatementType.SELECT or head not in ("SELECT", "WITH"):
        raise SqlRefused("only SELECT or WITH queries are allowed")


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [cut: {len(text) - limit} more characters]"


class _Watchdog:
    """Interrupts ``con`` once ``seconds`` pass while the guarded block runs, and never after it.

    ``interrupt`` stops whatever the connection runs at that moment, so the timer acts only under
    the lock while the block is still armed: a late timer cannot stop the next query on the view.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float):
        self.con, self.armed, self.fired = con, False, False
        self.lock = threading.Lock()
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self.armed = True
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        with self.lock:
            self.armed = False

    def _fire(self) -> None:
        with self.lock:
            if self.armed:
                self.fired = True
                self.con.interrupt()


def _select(view: duckdb.DuckDBPyConnection, query: str, limits: SqlLimits) -> tuple[list[str], list[tuple]]:
    """Column names and at most max_rows + 1 rows of ``query``, each value as text of at most max_cell_chars + 1.

    The row limit and the cut run inside DuckDB (a relation over the query), so the fetch is
    bounded before it starts; the watchdog bounds the time it takes.
    """
    with _Watchdog(view, limits.timeout_s) as dog:
        try:
            rel = view.sql(query).limit(limits.max_rows + 1)
            rel = rel.project(f"left(CAST(COLUMNS(*) AS VARCHAR), {limits.max_cell_chars + 1})")
            return rel.columns, rel.fetchall()
        except duckdb.Error as e:
            if dog.fired:
                raise SqlRefused(f"the query was stopped after {limits.timeout_s:g} s: add filters, "
                                 "aggregate, or add LIMIT") from None
            raise SqlRefused(f"{type(e).__name__}: {e}") from None


def _unterminated(query: str) -> str:
    """One checked statement without its closing ';' and what follows it (comments, empty statements).

    ``_select`` nests the query as a subquery, where a ';' is a syntax error. Token positions are
    byte offsets, hence the encoding.
    """
    raw = query.encode()
    for pos, kind in duckdb.tokenize(query):
        if kind == duckdb.token_type.operator and raw[pos:pos + 1] == b";":
            return raw[:pos].decode()
    return query


def _cell(v: str | None, limit: int) -> str:
    """One value on one line; DuckDB cut it to ``limit`` + 1 characters, so a longer one was cut."""
    if v is None:
        return "NULL"
    text = v[:limit].replace("\t", " ").replace("\n", "\\n")
    return text + f"...[value cut at {limit} characters]" if len(v) > limit else text
