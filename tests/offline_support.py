"""Shared pieces of the offline-proposer tests: seed sources, stored rollouts, contexts, hook drivers."""
from __future__ import annotations

from pathlib import Path

from harnesses.contract import from_wire
from harnesses.proposers import ProposerContext
from harnesses.proposers.offline import (
    harness_id,
)
from harnesses.proposers.primitives import applied_tags, library
from harnesses.sandbox import HarnessSandbox
from whale.store import Store
from whale.types import Rollout

ROOT = Path(__file__).resolve().parents[1]
SEEDS = {d: (ROOT / "harnesses" / "seeds" / f"{d}.py").read_text()
         for d in ("math_reasoning", "search_qa", "chess_puzzles")}
MATH, SEARCH, CHESS = SEEDS["math_reasoning"], SEEDS["search_qa"], SEEDS["chess_puzzles"]
PROGRAM = (ROOT / "harnesses" / "examples" / "math_program.py").read_text()


def rollout(hid: str, i: int, split="harness", weights="w2", cycle=1, stop="answered", formatted=False,
            reward=0.0, messages=None, tool_calls=None) -> Rollout:
    """A stored rollout; unless ``tool_calls`` is given, every message after the first assistant
    turn that is not the model's is a tool result."""
    messages = messages if messages is not None else [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "```python\nprint(5)\n```"},
        {"role": "user", "content": "Output:\n5"}, {"role": "assistant", "content": "It is 5."}]
    if tool_calls is None:
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
        tool_calls = sum(m["role"] != "assistant" for m in messages[first:])
    return Rollout(run_id="r1", cycle=cycle, phase="harness", step=1, split=split, example_id=f"e{i}",
                   sample_idx=0, harness_id=hid, weights_id=weights, seed=i, reward=reward,
                   formatted=formatted, stop_reason=stop, turns=2, tokens_out=40, messages=messages,
                   tool_calls=tool_calls)


def register(store: Store, hid: str, domain: str, components=(), parents=(), origin="seed") -> None:
    store.insert("harnesses", [{"harness_id": hid, "domain": domain, "path": f"{hid}.py",
                                "parents": list(parents), "origin": origin, "hypothesis": "", "axis": None,
                                "components": list(components), "status": "ok", "error": None,
                                "cycle": 0, "iteration": 1}])


def context(tmp_path: Path, domain: str, source: str, rollouts=(), M=2, prompt_only=False, iteration=2,
            components=(), parents=(), registered=True) -> ProposerContext:
    archive = tmp_path / "archive"
    archive.mkdir(exist_ok=True)
    hid = harness_id(source)
    (archive / f"{hid}.py").write_text(source)
    with Store(tmp_path / "rollouts.duckdb") as store:
        if registered:
            register(store, hid, domain, components, parents)
        store.insert_rollouts(list(rollouts))
    return ProposerContext(run_id="r1", domain=domain, cycle=1, iteration=iteration, M=M, seed=0,
                           incumbent_id=hid, archive_dir=archive, store_path=tmp_path / "rollouts.duckdb",
                           notes_path=ROOT / "domains" / domain / "notes.md",
                           contract_path=ROOT / "harnesses" / "contract.py", prompt_only=prompt_only)


def primitive_of(candidate) -> str:
    return applied_tags(candidate.source)[-1]


def edited(domain: str, name: str, source: str) -> str:
    info, primitives = library(domain)
    return next(p for p in primitives if p.name == name).apply(source, info).source


def hooks(source: str, calls: list[tuple[str, object]]) -> list:
    """Run hook calls of one episode in the sandbox; return the actions."""
    out = []
    with HarnessSandbox(source) as sandbox:
        for hook, arg in calls:
            [(ok, payload)] = sandbox.calls([(0, hook, arg)])
            assert ok, payload
            payload.pop("max_turns", None)
            payload.pop("token_budget", None)
            out.append(from_wire(payload))
    return out
