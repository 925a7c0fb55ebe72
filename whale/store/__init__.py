"""The DuckDB store of a run: rollouts, harnesses, scores, training steps, phase decisions.

One file per run (``runs/<run_id>/rollouts.duckdb``) and one writer: the orchestrating process.
Readers (the proposer's SQL tool, ``whale sql``, reports) open read-only connections. DuckDB lets
no other process open a file while its writer holds it, so the writer also publishes a copy,
``snapshot.duckdb``, at its first write and then every half minute or so; readers fall back to it
while the run is going and the writer deletes it when it closes.
Bulk inserts go through Arrow; ``executemany`` is two thousand times slower.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from whale.store.keys import RolloutKey
from whale.store.schema import SCHEMA
from whale.types import Rollout

_ROLLOUT_TYPES = {
    "verdict": "json", "messages": "json",
    "token_ids": pa.list_(pa.int32()), "mask": pa.list_(pa.uint8()),
}


DB = "rollouts.duckdb"
SNAPSHOT = "snapshot.duckdb"
SNAPSHOT_EVERY_S = 30.0
# A harness phase's acceptance re-check stores its scores as iteration 0 (its iterations are 1, 2, ...).
RECHECK_ITERATION = 0
# A copy may take at most 1/SNAPSHOT_COST_SHARE of the wall time (stores of many GB copy less often).
SNAPSHOT_COST_SHARE = 20

log = logging.getLogger(__name__)
T = TypeVar("T")


def store_path(run_dir: str | Path) -> Path:
    """The DuckDB file of the run in ``run_dir``."""
    return Path(run_dir) / DB


def find_stores(runs_dir: str | Path, run_ids: list[str] | None = None) -> list[Path]:
    """The DuckDB file of every run under ``runs_dir`` (or of the named runs), sorted."""
    if run_ids is not None:
        return [store_path(Path(runs_dir) / r) for r in run_ids]
    return sorted(Path(runs_dir).glob(f"*/{DB}"))


def read_through_snapshot(db: str | Path, open_: Callable[[Path], T]) -> tuple[T, str | None]:
    """``open_(db)``, or ``open_`` of the snapshot while ``db``'s writer holds the file's lock.

    Returns what ``open_`` returned and, for a snapshot, a note saying which run and how old it is.
    Any other error, or a lock with no snapshot published yet, is raised as ``open_`` raised it.
    """
    db = Path(db)
    snap = db.with_name(SNAPSHOT)
    try:
        return open_(db), None
    except duckdb.IOException as e:
        if "lock" not in str(e).lower() or not snap.exists():
            raise
    at = datetime.fromtimestamp(snap.stat().st_mtime)
    note = f"{db.parent.name} is being written by a running job: read its snapshot of {at:%Y-%m-%d %H:%M:%S}"
    return open_(snap), note


class Store:
    """The single writer of one run's DuckDB file (or, with ``read_only``, a reader of it)."""

    def __init__(self, path: str | Path, read_only: bool = False, snapshot_every_s: float = SNAPSHOT_EVERY_S):
        self.path = Path(path)
        self.read_only = read_only
        self.snapshot_every_s = snapshot_every_s
        # the first write publishes at once: a reader sees a new or resumed run right away, not after
        # its first unit of rollouts (a math run's start evaluation is half an hour on CPU)
        self._snapshot_due = time.monotonic()
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(self.path), read_only=read_only)
        if not read_only:
            self.con.execute(SCHEMA)

    def close(self) -> None:
        self.con.close()
        if not self.read_only:  # the file itself is readable again
            self.path.with_name(SNAPSHOT).unlink(missing_ok=True)

    def publish_snapshot(self) -> Path | None:
        """Copy every committed table and view to ``snapshot.duckdb`` beside the store, atomically.

        A failed copy is logged and skipped: the snapshot is for readers, the run does not need it.
        """
        snap = self.path.with_name(SNAPSHOT)
        tmp = self.path.with_name(f".{SNAPSHOT}.{os.getpid()}.tmp")
        start = time.monotonic()
        try:
            tmp.unlink(missing_ok=True)
            db = self.con.execute("SELECT current_database()").fetchone()[0]
            self.con.execute(f"ATTACH '{tmp}' AS whale_snapshot")
            try:
                self.con.execute(f'COPY FROM DATABASE "{db}" TO whale_snapshot')
            finally:
                self.con.execute("DETACH whale_snapshot")
            os.replace(tmp, snap)
        except (duckdb.Error, OSError) as e:
            log.warning("could not publish %s: %s", snap, e)
            tmp.unlink(missing_ok=True)
            return None
        finally:
            cost = time.monotonic() - start
            self._snapshot_due = time.monotonic() + max(self.snapshot_every_s, SNAPSHOT_COST_SHARE * cost)
        return snap

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def insert_rollouts(self, rollouts: list[Rollout]) -> int:
        """Insert rollouts in one Arrow batch; rows already stored (same key) are skipped."""
        if not rollouts:
            return 0
        rows = [asdict(r) for r in rollouts]
        for r in rows:
            r["verdict"] = json.dumps(r["verdict"])
            r["messages"] = json.dumps(r["messages"])
        return self.insert("rollouts", rows, types=_ROLLOUT_TYPES)

    def insert(self, table: str, rows: list[dict], types: dict | None = None) -> int:
        """Bulk insert ``rows`` (dicts keyed by column) through Arrow; duplicates are ignored."""
        if not rows:
            return 0
        cols = list(rows[0])
        arrays = {}
        for c in cols:
            values = [r[c] for r in rows]
            t = (types or {}).get(c)
            arrays[c] = pa.array(values, type=None if t in (None, "json") else t)
        batch = pa.table(arrays)  # noqa: F841  (DuckDB reads the local variable by name)
        before = self.count(table)
        names = ", ".join(cols)
        self.con.execute(f"INSERT OR IGNORE INTO {table} ({names}) SELECT {names} FROM batch")
        added = self.count(table) - before
        if time.monotonic() >= self._snapshot_due:
            self.publish_snapshot()
        return added

    def record_start(self, run_id: str, code: str) -> str | None:
        """Store a start (or resume) of ``run_id`` by a process running ``code``; returns the code
        of the run's previous start, None for its first."""
        last = self.row("SELECT start, code FROM run_starts WHERE run_id = ? ORDER BY start DESC LIMIT 1", [run_id])
        self.insert("run_starts", [{"run_id": run_id, "start": last["start"] + 1 if last else 1, "code": code}])
        return last["code"] if last else None

    def stored_rollouts(self, key: RolloutKey) -> list[Rollout] | None:
        """The complete stored batch of ``key``, or None when any rollout is missing.

        The rows come back in the order the engine returned them (the key's examples as listed,
        then sample index): the RSFT step that trains on a read-back batch must see the same rows
        in the same order as the step that drew it, or a resumed run trains to other weights."""
        cur = self.con.execute(
            "SELECT * FROM rollouts WHERE run_id = $run AND phase = $phase AND harness_id = $harness "
            "AND weights_id = $weights AND list_contains($examples, example_id) AND sample_idx < $k "
            "AND ($any_boundary OR (cycle = $cycle AND step = $step)) "
            "ORDER BY list_position($examples, example_id), sample_idx",
            {"run": key.run_id, "phase": key.phase, "harness": key.harness_id, "weights": key.weights_id,
             "examples": list(key.example_ids), "k": key.k, "any_boundary": key.any_boundary,
             "cycle": key.cycle, "step": key.step})
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            r = dict(zip(names, row, strict=True))
            r["verdict"], r["messages"] = json.loads(r["verdict"]), json.loads(r["messages"])
            out.append(Rollout(**r))
        return out if len(out) == key.size else None

    def recorded_episodes(self, run_id: str, harness_id: str) -> list[dict]:
        """The first sample of each example in ``harness_id``'s latest harness-split evaluation
        (latest cycle, then iteration): what a candidate is replayed against (``whale.run.dedupe``)."""
        return self.rows(
            "WITH latest AS (SELECT cycle, step, weights_id FROM rollouts WHERE run_id = $run "
            "AND harness_id = $harness AND phase = 'harness' AND split = 'harness' "
            "ORDER BY cycle DESC, step DESC LIMIT 1) "
            "SELECT example_id, token_ids, mask, reward, stop_reason FROM rollouts JOIN latest "
            "USING (cycle, step, weights_id) WHERE run_id = $run AND harness_id = $harness "
            "AND phase = 'harness' AND split = 'harness' AND sample_idx = 0 ORDER BY example_id",
            {"run": run_id, "harness": harness_id})

    def unit_rollouts(self, run_id: str, cycle: int, phase: str, step: int, harness_ids: list[str],
                      weights_id: str) -> int:
        """Rollouts stored for one unit of work (a step or iteration of a phase, its harnesses, weights)."""
        return self.query("SELECT count(*) FROM rollouts WHERE run_id = ? AND cycle = ? AND phase = ? AND step = ? "
                          "AND list_contains(?, harness_id) AND weights_id = ?",
                          [run_id, cycle, phase, step, harness_ids, weights_id])[0][0]

    def draft_rollouts(self, run_id: str, cycle: int, iteration: int) -> int:
        """Rollouts the proposer's drafts of one harness-phase iteration spent."""
        return self.query("SELECT coalesce(sum(rollouts), 0) FROM drafts WHERE run_id = ? AND cycle = ? "
                          "AND iteration = ?", [run_id, cycle, iteration])[0][0]

    def count(self, table: str) -> int:
        return self.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def rows(self, sql: str, params: list | None = None) -> list[dict]:
        """The result rows as dicts keyed by column name."""
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def row(self, sql: str, params: list | None = None) -> dict | None:
        """The first result row as a dict, or None."""
        found = self.rows(sql, params)
        return found[0] if found else None

    def execute(self, sql: str, params: list | None = None) -> None:
        """A statement without a result (UPDATE, DELETE) in the writer's connection."""
        self.con.execute(sql, params or [])

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor on the store's connection, for readers inside the writer's process (DuckDB
        refuses a second handle on a file this process holds open); the caller closes it."""
        return self.con.cursor()

    def df(self, sql: str, params: list | None = None):
        return self.con.execute(sql, params or []).df()


def score_label(cycle: int, iteration: int) -> str:
    """Where a harness-split score was taken: ``c2 i3``, or ``c2 re-check``."""
    return f"c{cycle} re-check" if iteration == RECHECK_ITERATION else f"c{cycle} i{iteration}"
