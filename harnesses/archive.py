"""The persistent harness archive of a run: every harness ever evaluated, content-addressed.

Sources live as ``runs/<run>/harnesses/<harness_id>.py`` (DVC-tracked with the run); metadata
(parents, origin, hypothesis, axis, components, status, error) is the ``harnesses`` table and
scores per weights id are the ``scores`` table of the run's DuckDB. One archive spans all cycles
of a run, so a proposer sees every earlier hypothesis, not just this phase's.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from whale.files import write_atomic
from whale.ids import harness_id
from whale.store import Store, archive_queries

# `unscored`: proposed, but the budget was spent before its evaluation could start.
# `duplicate`: replays its parent's recorded episodes token for token (whale.run.dedupe): not run.
STATUSES = ("ok", "invalid", "error", "solves_without_model", "duplicate", "unscored", "pending")


def first_parents(hid: str, parents: Mapping[str, Sequence[str] | None]) -> list[str]:
    """``hid`` and its ancestors through first parents, newest first (``parents`` maps an id to its
    parents; an id it does not know ends the chain)."""
    chain: list[str] = []
    while hid and hid not in chain:
        chain.append(hid)
        found = parents.get(hid)
        found = [] if found is None else list(found)  # a list, a tuple or an array (pandas rows)
        hid = found[0] if found else None
    return chain


class Archive:
    def __init__(self, run_dir: Path, store: Store, domain: str):
        self.dir = Path(run_dir) / "harnesses"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.store, self.domain = store, domain

    def path(self, hid: str) -> Path:
        return self.dir / f"{hid}.py"

    def source(self, hid: str) -> str:
        path = self.path(hid)
        if not path.exists():
            raise FileNotFoundError(f"harness {hid} is not in the archive {self.dir}")
        return path.read_text()

    def add(self, source: str, origin: str, parents: list[str] | None = None, hypothesis: str = "",
            axis: str = "", components: list[str] | None = None, cycle: int = 0, iteration: int = 0) -> str:
        """Archive a harness (idempotent: the same source is the same harness); return its id."""
        hid = harness_id(source)
        path = self.path(hid)
        if not path.exists():
            write_atomic(path, source)
        self.store.insert("harnesses", [{
            "harness_id": hid, "domain": self.domain, "path": str(path), "parents": parents or [],
            "origin": origin, "hypothesis": hypothesis, "axis": axis, "components": components or [],
            "status": "pending", "error": None, "cycle": cycle, "iteration": iteration,
        }])
        return hid

    def set_status(self, hid: str, status: str, error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown harness status {status!r}")
        archive_queries.set_harness_verdict(self.store.con, hid, status, error)

    def set_null_reward(self, hid: str, reward: float) -> None:
        archive_queries.set_null_reward(self.store.con, hid, reward)

    def null_reward(self, hid: str) -> float | None:
        return archive_queries.null_reward(self.store.con, hid)

    def parents(self, hid: str) -> list[str]:
        found = archive_queries.components_and_parents(self.store.con, hid)
        return found[1] if found else []

    def status(self, hid: str) -> tuple[str, str | None] | None:
        return archive_queries.harness_verdict(self.store.con, hid)
