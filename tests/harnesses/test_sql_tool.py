"""The Claude proposer's `sql` tool on the proposer's view of a real store: timeout, row and size caps."""
from __future__ import annotations

import time

import pytest

from harnesses.proposers import proposer_view
from harnesses.proposers.claude_tools import Workbench
from harnesses.proposers.sql_tool import SqlLimits


@pytest.fixture
def view(ctx):
    view = proposer_view(ctx)
    yield view
    view.close()


def _sql(bench: Workbench, query: str) -> tuple[str, bool]:
    return bench.run("sql", {"query": query})


def test_sql_stops_a_runaway_query_and_the_view_keeps_working(ctx, view):
    bench = Workbench(ctx, view, SqlLimits(timeout_s=1))
    started = time.monotonic()
    out, is_error = _sql(bench, "SELECT count(*) FROM range(1000000000000)")
    assert is_error and "stopped after 1 s" in out and "LIMIT" in out
    assert time.monotonic() - started < 30  # stopped, not run to the end (hours)
    assert _sql(bench, "SELECT count(*) AS n FROM rollouts") == ("n\n2", False)


def test_sql_timer_of_a_finished_query_cannot_stop_the_next_one(ctx, view):
    bench = Workbench(ctx, view, SqlLimits(timeout_s=0.2))
    assert _sql(bench, "SELECT 1 AS one") == ("one\n1", False)
    # ~1 s of work on this view: a timer left armed by the query above would interrupt it at 0.2 s
    assert view.execute("SELECT count(*) > 0 FROM range(300000000) WHERE range % 7 = 0").fetchone() == (True,)


def test_sql_returns_capped_rows_in_order(ctx, view):
    out, is_error = _sql(Workbench(ctx, view), "SELECT range AS i FROM range(1000000) ORDER BY i DESC")
    lines = out.splitlines()
    assert not is_error and lines[:3] == ["i", "999999", "999998"] and len(lines) == 1 + 200 + 1
    assert lines[-1].startswith("... first 200 rows shown, more were cut")
    assert _sql(Workbench(ctx, view), "SELECT 1 AS i WHERE false") == ("i\n(0 rows)", False)
    # the query runs nested as a subquery: a closing ';' (and a comment after it) is dropped first
    assert _sql(Workbench(ctx, view), "SELECT 'é;' AS s; -- done") == ("s\né;", False)


def test_sql_caps_giant_values_and_the_whole_result(ctx, view):
    bench = Workbench(ctx, view, SqlLimits(max_cell_chars=100, max_chars=5000))
    out, is_error = _sql(bench, "SELECT repeat('x', 10000000) AS big, NULL AS nothing, 'a\tb' AS tab")
    big, nothing, tab = out.splitlines()[1].split("\t")
    assert not is_error and big == "x" * 100 + "...[value cut at 100 characters]"
    assert (nothing, tab) == ("NULL", "a b")
    many, _ = _sql(bench, "SELECT repeat('y', 1000000) AS big FROM range(1000)")
    assert len(many) < 5100 and many.endswith("more characters]")
    sql = next(s for s in bench.specs() if s["name"] == "sql")
    assert "200 rows, 100 characters per value and 5000" in sql["description"]
