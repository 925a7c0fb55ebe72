"""What `whale report` reads: every run's DuckDB file, opened read-only and closed again.

A file that cannot be opened (a writer holds its lock, it is damaged, it predates the schema) is
skipped and the reason is kept, so the report states which runs are missing instead of crashing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from whale.store import find_stores, read_through_snapshot
from whale.store.report_queries import QUERIES, table_names
from whale.train.checkpoint import META_FILE

# At equal cumulative rollouts a grid point was taken mid-phase, before that phase's boundary.
PHASE_ORDER = {"start": 0, "weight": 1, "harness": 2, "final": 3}
GRID_ORDER = 0.5

# Tables a store written by an older version may lack: their query reads as no rows.
ADDED_LATER = {"starts": ("run_starts", ["run_id", "code"])}


@dataclass
class RunData:
    """One run's rows (test-split evals sorted in the order they were taken) and its files."""

    run_id: str
    domain: str
    condition: str
    dir: Path
    params: dict
    evals: pd.DataFrame
    phases: pd.DataFrame
    harnesses: pd.DataFrame
    scores: pd.DataFrame
    proposer: pd.DataFrame
    rollouts_by_phase: dict[str, int]
    measured: pd.DataFrame
    by_example: pd.DataFrame
    checkpoints: dict[str, Path] = field(default_factory=dict)
    # the code of each start of the run, first start first, each once (empty: not recorded)
    codes: list[str] = field(default_factory=list)

    def harness_path(self, hid: str) -> Path:
        return self.dir / "harnesses" / f"{hid}.py"

    @property
    def seed(self) -> int | None:
        return self.params.get("seed")

    def test_rewards(self, harness_id: str, weights_id: str) -> pd.Series:
        """Mean test reward per example (indexed by example id) of one (harness, weights) pair."""
        df = self.by_example
        rows = df[(df["harness_id"] == harness_id) & (df["weights_id"] == weights_id)]
        return rows.set_index("example_id")["reward"].sort_index()


def load_runs(runs_dir: str | Path, run_ids: list[str] | None = None) -> tuple[list[RunData], list[str]]:
    """Every readable run and one warning line per database that could not be read."""
    runs, warnings = [], []
    for db in find_stores(runs_dir, run_ids):
        if not db.exists():
            warnings.append(f"{db}: no such file (skipped)")
            continue
        try:
            frames, note = read_through_snapshot(db, _read)
        except duckdb.Error as e:  # a writer's lock (no snapshot yet), a damaged file or an older schema
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            warnings.append(f"{db}: could not be opened read-only, skipped ({type(e).__name__}: {first})")
            continue
        if note:
            warnings.append(note)
        if frames["runs"].empty:
            warnings.append(f"{db}: has no row in the runs table (skipped)")
        runs += [_run(db.parent, row, frames) for row in frames["runs"].to_dict("records")]
    return runs, warnings


def _read(db: Path) -> dict[str, pd.DataFrame]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = table_names(con)
        frames = {}
        for name, sql in QUERIES.items():
            table, columns = ADDED_LATER.get(name, (None, []))
            frames[name] = pd.DataFrame(columns=columns) if table and table not in tables else con.execute(sql).df()
        return frames
    finally:
        con.close()


def _run(run_dir: Path, row: dict, frames: dict[str, pd.DataFrame]) -> RunData:
    rid = row["run_id"]

    def mine(name: str) -> pd.DataFrame:
        df = frames[name]
        return df[df["run_id"] == rid].reset_index(drop=True) if "run_id" in df.columns else df

    evals = mine("evals")
    grid = evals["phase"].str.startswith("grid-")
    evals = evals.assign(_order=evals["phase"].map(PHASE_ORDER).where(~grid, GRID_ORDER).fillna(9))
    evals = evals.sort_values(["cumulative_rollouts", "cycle", "_order"]).drop(columns="_order").reset_index(drop=True)
    counts = mine("counts")
    try:
        params = json.loads(row["params"]) if row["params"] else {}
    except (TypeError, ValueError):
        params = {}
    return RunData(
        run_id=rid, domain=row["domain"], condition=row["condition"], dir=run_dir, params=params,
        evals=evals, phases=mine("phases"), harnesses=frames["harnesses"], scores=mine("scores"),
        proposer=mine("proposer"),
        rollouts_by_phase=dict(zip(counts["phase"], counts["rollouts"].astype(int), strict=True)),
        measured=frames["measured"], by_example=mine("by_example"), checkpoints=_checkpoints(run_dir / "checkpoints"),
        codes=list(dict.fromkeys(mine("starts")["code"])))


def _checkpoints(root: Path) -> dict[str, Path]:
    """weights id -> checkpoint directory, from each complete checkpoint's metadata file."""
    out = {}
    for meta in sorted(root.glob(f"step-*/{META_FILE}")):
        try:
            wid = json.loads(meta.read_text()).get("weights_id")
        except (OSError, ValueError):
            continue
        if wid:
            out.setdefault(wid, meta.parent)
    return out
