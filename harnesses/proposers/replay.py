"""The replay proposer: the candidates another run recorded, proposed again with no model call.

Every harness phase iteration writes ``proposals/c<cycle>-i<iteration>.json`` (the candidates'
ids and metadata, and a model's conversation when there was one) and archives each candidate's
source under ``harnesses/<harness_id>.py``. Replaying that run directory makes a Claude-driven
run reproducible offline: the same candidates at the same iterations. An iteration the recorded
run never reached raises ProposerUnavailable, so the harness phase falls back to the offline
proposer and records why.
"""
from __future__ import annotations

import json
from pathlib import Path

from harnesses.proposers.base import Candidate, Proposal, ProposerContext, ProposerUnavailable
from whale.ids import harness_id


class ReplayProposer:
    name = "replay"

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        if not (self.run_dir / "proposals").is_dir():
            raise FileNotFoundError(f"replay_from {self.run_dir}: no proposals/ folder (not a run directory, "
                                    "or a run whose harness phases never proposed)")

    def propose(self, ctx: ProposerContext) -> Proposal:
        path = self.run_dir / "proposals" / f"c{ctx.cycle}-i{ctx.iteration}.json"
        if not path.exists():
            raise ProposerUnavailable(f"{self.run_dir.name} recorded no proposal for cycle {ctx.cycle} "
                                      f"iteration {ctx.iteration}")
        record = json.loads(path.read_text())
        if "candidates" not in record:
            raise ValueError(f"{path}: written before candidates were recorded; it cannot be replayed")
        candidates = [self._candidate(c) for c in record["candidates"]]
        model = f"{record.get('proposer')}:{record.get('model')}" if record.get("model") else record.get("proposer")
        return Proposal(candidates, proposer=self.name, model=model)

    def _candidate(self, meta: dict) -> Candidate:
        hid = meta["harness_id"]
        source = (self.run_dir / "harnesses" / f"{hid}.py").read_text()
        if harness_id(source) != hid:
            raise ValueError(f"{self.run_dir}/harnesses/{hid}.py does not hash to its name: the archive was edited")
        return Candidate(source=source, hypothesis=meta.get("hypothesis", ""), axis=meta.get("axis", ""),
                         components=list(meta.get("components") or []), parents=list(meta.get("parents") or []),
                         origin=meta.get("origin", "replay"))
