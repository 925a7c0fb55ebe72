"""A proposer's context over a small real store: a seed harness h0 with harness- and test-split
rows (the proposer must see the first and never the second)."""
from __future__ import annotations

from pathlib import Path

from harnesses.proposers import ProposerContext
from whale.ids import harness_id
from whale.store import Store
from whale.types import Rollout

ROOT = Path(__file__).resolve().parents[2]
H0 = '''from harnesses.contract import BaseHarness, Prompt, Finish


class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": "Answer in <answer> tags: " + observation["question"]}])

    def act(self, completion):
        return Finish()
'''
GOOD = H0.replace("max_turns = 2", "max_turns = 3")
PROMPT = H0.replace("Answer in <answer> tags: ", "Think, then answer in <answer> tags: ")
H0_ID = harness_id(H0)


def rollout(split: str, ex: str, reward: float) -> Rollout:
    return Rollout(run_id="r1", cycle=1, phase="harness", step=1, split=split, example_id=ex,
                   sample_idx=0, harness_id=H0_ID, weights_id="w1", seed=0, reward=reward,
                   stop_reason="answered", messages=[{"role": "assistant", "content": f"secret-{split}"}],
                   token_ids=[1, 2, 3], mask=[0, 1, 1])


def make_context(tmp_path: Path) -> ProposerContext:
    """h0 archived, domain notes, and one run's rows of every split in its store."""
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / f"{H0_ID}.py").write_text(H0)
    notes = tmp_path / "notes.md"
    notes.write_text("NOTE: the search tool returns at most 3 passages.")
    with Store(tmp_path / "rollouts.duckdb") as store:
        store.insert("harnesses", [{"harness_id": H0_ID, "domain": "search_qa", "path": f"{H0_ID}.py",
                                    "parents": [], "origin": "seed", "hypothesis": "h0", "axis": None,
                                    "components": [], "status": "ok", "error": None, "cycle": 0,
                                    "iteration": 1}])
        store.insert("scores", [{"run_id": "r1", "harness_id": H0_ID, "weights_id": "w1", "split": s,
                                 "cycle": 1, "iteration": 1, "n": 2, "mean_reward": m}
                                for s, m in (("harness", 0.25), ("test", 0.875))])
        store.insert_rollouts([rollout("harness", "a", 0.0), rollout("harness", "b", 1.0),
                               rollout("test", "t1", 1.0), rollout("weight", "w1", 1.0)])
    return ProposerContext(run_id="r1", domain="search_qa", cycle=1, iteration=2, M=2, seed=0,
                           incumbent_id=H0_ID, archive_dir=archive, store_path=tmp_path / "rollouts.duckdb",
                           notes_path=notes, contract_path=ROOT / "harnesses" / "contract.py")
