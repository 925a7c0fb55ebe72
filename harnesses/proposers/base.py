"""What every harness proposer takes and returns, and the read-only view of the run it may query.

A proposer reads the archive (every harness tried so far, its scores and its harness-split
rollouts) and writes up to ``M`` candidate harness modules. It never sees the test split: the
view it queries is a separate in-memory DuckDB database that holds copies of the visible rows
only, so a query cannot reach test rows by forgetting a filter.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import duckdb

from whale.store import Store

# The axes a candidate's single mechanism may change (one axis per candidate).
AXES = ("prompt", "observation", "parsing", "retries", "budgets", "tool_args")

# The tables the proposer may see, each with the query that selects its visible rows.
# token_ids and mask are training data, useless to a proposer and large.
VISIBLE = {
    "harnesses": "SELECT * FROM {db}.harnesses",
    "scores": "SELECT * FROM {db}.scores WHERE split = 'harness'",
    "rollouts": "SELECT * EXCLUDE (token_ids, mask) FROM {db}.rollouts WHERE split = 'harness'",
}


@dataclass
class Candidate:
    """A proposed harness before validation."""

    source: str
    hypothesis: str
    axis: str
    components: list[str]
    parents: list[str]
    origin: str


@dataclass
class ProposerContext:
    """Everything a proposer may read for one iteration of one harness phase."""

    run_id: str
    domain: str
    cycle: int
    iteration: int
    M: int
    seed: int
    incumbent_id: str  # harness_id of the current best
    archive_dir: Path  # every archived harness source as <harness_id>.py
    store_path: Path  # the run's DuckDB file
    notes_path: Path  # domains/<domain>/notes.md
    contract_path: Path  # harnesses/contract.py (harnesses/README.md beside it is read too)
    prompt_only: bool = False  # candidates may differ from the incumbent only in prompt text
    # The orchestrator's open store of store_path, when it holds the file: DuckDB refuses a
    # second handle on a file already open in the same process (see proposer_view).
    store: Store | None = field(default=None, repr=False)
    # Rolls a draft module on a few harness-split examples under the current weights, charged to
    # the budget, and answers what happened as text; raises ValueError with the reason when it
    # cannot (a broken module, no budget left). None: no drafts this iteration.
    trial: Callable[[str], str] | None = field(default=None, repr=False)
    # (source, parent id) -> True when the source would replay the parent's recorded harness-split
    # episodes unchanged (whale/run/dedupe.py), so its evaluation could not differ from the
    # parent's. The run rejects such candidates unevaluated; a proposer that asks first can offer
    # another in the slot. None: no check (``harness_search.skip_duplicates`` off).
    duplicate: Callable[[str, str], bool] | None = field(default=None, repr=False)


@dataclass
class Proposal:
    """The candidates of one proposer call and what the call cost."""

    candidates: list[Candidate]
    proposer: str
    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    fallback_reason: str | None = None
    # The conversation that produced the candidates (Claude's messages and tool results), for the
    # run's logs; empty for proposers without one.
    transcript: list[dict] = field(default_factory=list, repr=False)
    # The conversation of an LLM session that ended without candidates, when this proposal is the
    # fallback's: what the model said and which tool calls failed.
    failed_transcript: list[dict] = field(default_factory=list, repr=False)


class Proposer(Protocol):
    name: str

    def propose(self, ctx: ProposerContext) -> Proposal: ...


class ProposerUnavailable(RuntimeError):
    """The proposer could not produce candidates (API down, no key, no valid candidate).

    Carries what the failed call already spent, so the caller can record it before it falls
    back to the offline proposer (see ``harnesses.proposers.propose_with_fallback``).
    """

    def __init__(self, reason: str, model: str | None = None, input_tokens: int = 0,
                 output_tokens: int = 0, cost_usd: float = 0.0, transcript: list[dict] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cost_usd = cost_usd
        self.transcript = transcript or []


def proposer_view(ctx: ProposerContext) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding copies of the harness-split rows, the scores and the archive.

    Without ``ctx.store`` the run's file is ATTACHed read-only, copied from and DETACHed. DuckDB
    2.0 refuses that while another connection of this process has the file open ("Unique file
    handle conflict"), so the orchestrator passes its own store and the rows are copied through
    a cursor of it as Arrow tables. Either way
    the returned connection has no route back to the file: external access is switched off and
    the setting locked, so SQL run on it cannot attach files or read them.
    """
    view = duckdb.connect(":memory:")
    if ctx.store is None:
        _copy_by_attach(view, Path(ctx.store_path))
    else:
        _copy_through(view, ctx.store.cursor())
    view.execute("SET enable_external_access = false")
    # A query the proposer writes may not take the machine's memory or every core from the run.
    view.execute("SET memory_limit = '1GB'")
    view.execute("SET threads = 1")
    view.execute("SET lock_configuration = true")
    return view


def _copy_by_attach(view: duckdb.DuckDBPyConnection, path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"run store {path} does not exist")
    try:
        view.execute("ATTACH ? AS run_store (READ_ONLY)", [str(path)])
    except duckdb.Error as e:
        raise RuntimeError(f"cannot open {path} read-only ({e}); a process that holds it open "
                           "must pass its store as ProposerContext.store") from e
    try:
        for table, query in VISIBLE.items():
            view.execute(f"CREATE TABLE {table} AS {query.format(db='run_store')}")
    finally:
        view.execute("DETACH run_store")


def _copy_through(view: duckdb.DuckDBPyConnection, source: duckdb.DuckDBPyConnection) -> None:
    db = source.execute("SELECT current_database()").fetchone()[0]
    try:
        for table, query in VISIBLE.items():
            q = query.format(db=f'"{db}"')
            # Arrow drops the JSON logical type, so the table is declared from the source's types.
            columns = source.execute(f"DESCRIBE {q}").fetchall()
            decl = ", ".join(f'"{name}" {dtype}' for name, dtype, *_ in columns)
            view.execute(f"CREATE TABLE {table} ({decl})")
            rows = source.sql(q).to_arrow_table()  # noqa: F841  (DuckDB reads it by name)
            view.execute(f"INSERT INTO {table} SELECT * FROM rows")
    finally:
        source.close()
