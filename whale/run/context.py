"""The live state of one run: its store, archive, engine and weights (trainer, checkpoints).

A run is ``runs/<run_id>/``: ``rollouts.duckdb`` (every rollout, score, step and decision),
``harnesses/`` (the archive), ``checkpoints/`` (weights + trainer state), ``metrics/`` and
``plots/``. Everything needed to resume is on disk; this object is rebuilt from it on restart.
"""
from __future__ import annotations

import json
from pathlib import Path

from domains import get_domain
from harnesses.archive import Archive
from harnesses.budgets import set_budgets
from harnesses.jail import check_jail
from harnesses.sandbox import Limits
from whale.model import EMBEDDED, export_model
from whale.rollout.backends import make_backend
from whale.rollout.backends.base import Sampling
from whale.rollout.engine import Engine
from whale.run.conditions import Condition
from whale.run.settings import Settings
from whale.run.weights import Weights
from whale.store import Store, store_path
from whale.store.keys import RolloutKey
from whale.train.checkpoint import latest_checkpoint
from whale.train.rsft import RSFTConfig
from whale.types import Example, Rollout

SEEDS = Path(__file__).resolve().parents[2] / "harnesses" / "seeds"


def h0_path(settings: Settings, domain: str) -> Path:
    """The initial harness: ``harness_search.h0``, else the domain's seed harness."""
    return Path(settings.harness_search.h0 or SEEDS / f"{domain}.py")


def h0_source(settings: Settings, domain: str) -> str:
    """The initial harness's source with ``harness_search.h0_budgets`` written into it."""
    path = h0_path(settings, domain)
    budgets = settings.harness_search.h0_budgets
    return set_budgets(path.read_text(), budgets, where=str(path)) if budgets else path.read_text()


def model_dir(settings: Settings) -> Path:
    """The exported checkpoint named by params.yaml, exported on first use."""
    model = settings.model
    out = Path(model.export_dir)
    if not (out / "config.json").exists():
        print(f"exporting {'SmolLM2-135M-Instruct (embedded GGUF)' if model.source == EMBEDDED else model.source}"
              f" to {out}")
        export_model(model.source, out, model.dtype)
    return out


def make_engine(settings: Settings, domain, model: str | Path) -> Engine:
    """The engine of a run or an evaluation; refuses to start when the jail cannot."""
    check_jail(settings.sandbox.jail)
    b = settings.backend
    backend = make_backend(b.kind, str(model), settings.model.dtype, b.max_batch, b.base_url, b.kv_reuse_mb)
    return Engine(backend, domain, Sampling(**settings.sampling.model_dump()), sandbox_limits(settings))


def sandbox_limits(settings: Settings) -> Limits:
    return Limits(**settings.sandbox.model_dump())


def rsft_config(settings: Settings) -> RSFTConfig:
    r = settings.rsft
    return RSFTConfig(lr=r.lr, mini_batch=r.mini_batch, micro_batch=r.micro_batch, max_seq_len=r.max_seq_len,
                      seed=settings.seed, dtype=settings.model.dtype, processes=r.processes)


def domain_for(settings: Settings, name: str):
    """The domain ``name`` with its verifier options from params.yaml."""
    options = settings.verifier.search_qa.model_dump() if name == "search_qa" else {}
    if name == "math_reasoning":
        options = {"jail": settings.sandbox.jail, "max_processes": settings.sandbox.max_processes}
    return get_domain(name, **options)


class Run:
    """What a phase needs: settings, condition, store, archive, engine and weights."""

    def __init__(self, settings: Settings, domain: str, condition: Condition, run_id: str,
                 runs_dir: str | Path = "runs"):
        self.settings, self.domain_name, self.condition, self.run_id = settings, domain, condition, run_id
        self.dir = Path(runs_dir) / run_id
        self.domain = domain_for(settings, domain)
        self.store = Store(store_path(self.dir))
        self._check_same_run()
        self.archive = Archive(self.dir, self.store, domain)
        base_model = model_dir(settings)
        resume = latest_checkpoint(self.dir / "checkpoints")
        self.engine = make_engine(settings, self.domain, resume or base_model)
        self.weights = Weights(self.engine.backend, rsft_config(settings), base_model, self.dir,
                               settings.backend.fingerprint_tol)

    def _check_same_run(self) -> None:
        """A run id names one (domain, condition, params): refuse to resume something else."""
        row = self.store.row("SELECT domain, condition, params FROM runs WHERE run_id = ?", [self.run_id])
        params = self.settings.as_json()
        if row is None:
            self.store.insert("runs", [{"run_id": self.run_id, "domain": self.domain_name,
                                        "condition": self.condition.name, "params": params}])
        elif (row["domain"], row["condition"], json.loads(row["params"])) != (
                self.domain_name, self.condition.name, json.loads(params)):
            raise ValueError(f"run {self.run_id} exists with another domain/condition/params: "
                             "choose a new run id or delete runs/" + self.run_id)

    # -- harnesses -------------------------------------------------------------------------
    def seed_harness(self) -> str:
        source = h0_source(self.settings, self.domain_name)
        hid = self.archive.add(source, origin="seed")
        if self.archive.status(hid)[0] == "pending":
            self.archive.set_status(hid, "ok")
        return hid

    def key(self, cycle: int, phase: str, step: int, harness_id: str, examples: list[Example], k: int, seed: int,
            any_boundary: bool = False) -> RolloutKey:
        """The key of a batch of ``harness_id`` rollouts on ``examples`` under the served weights."""
        return RolloutKey(self.run_id, cycle, phase, step, harness_id, self.weights_id,
                          tuple(e.id for e in examples), k, seed, any_boundary)

    def rollouts_once(self, key: RolloutKey, examples: list[Example], desc: str) -> list[Rollout]:
        """The rollouts of ``key``, stored: read back when the store holds the complete batch (a
        resumed run), else rolled out. A rollout is never drawn, nor stored, twice."""
        stored = self.store.stored_rollouts(key)
        if stored is not None:
            return stored
        source = self.archive.source(key.harness_id)
        rollouts = self.engine.run(source, examples, key.k, key.seed, key.context, desc=desc)
        self.store.insert_rollouts(rollouts)
        return rollouts

    @property
    def weights_id(self) -> str:
        return self.weights.id

    def close(self) -> None:
        self.weights.close()
        self.store.close()
