"""The live state of one run: its store, archive, engine and (when training) trainer.

A run is ``runs/<run_id>/``: ``rollouts.duckdb`` (every rollout, score, step and decision),
``harnesses/`` (the archive), ``checkpoints/`` (weights + trainer state), ``metrics/`` and
``plots/``. Everything needed to resume is on disk; this object is rebuilt from it on restart.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from domains import get_domain
from harnesses.archive import Archive
from harnesses.sandbox import Limits
from whale.model import EMBEDDED, export_model, model_weights_id
from whale.rollout.backends import make_backend
from whale.rollout.backends.base import Sampling
from whale.rollout.engine import Engine
from whale.store import Store
from whale.train.checkpoint import latest_checkpoint

SEEDS = Path(__file__).resolve().parents[2] / "harnesses" / "seeds"


def model_dir(params: dict) -> Path:
    """The exported checkpoint named by params.yaml, exported on first use."""
    out = Path(params["model"]["export_dir"])
    if not (out / "config.json").exists():
        source = params["model"]["source"]
        print(f"exporting {'SmolLM2-135M-Instruct (embedded GGUF)' if source == EMBEDDED else source} to {out}")
        export_model(source, out, params["model"]["dtype"])
    return out


def make_engine(params: dict, domain, model: str | Path) -> Engine:
    backend = make_backend(params, str(model))
    return Engine(backend, domain, Sampling.from_params(params), Limits.from_params(params))


class Run:
    def __init__(self, params: dict, domain: str, condition: str, run_id: str, runs_dir: str | Path = "runs"):
        self.params, self.domain_name, self.condition, self.run_id = params, domain, condition, run_id
        self.dir = Path(runs_dir) / run_id
        self.store = Store(self.dir / "rollouts.duckdb")
        self._check_same_run()
        self.domain = get_domain(domain, **params.get("verifier", {}).get(domain, {}))
        self.archive = Archive(self.dir, self.store, domain)
        self.ckpt_root = self.dir / "checkpoints"
        self.base_model = model_dir(params)
        self.trainer = None
        resume = latest_checkpoint(self.ckpt_root)
        self.engine = make_engine(params, self.domain, resume or self.base_model)

    def _check_same_run(self) -> None:
        """A run id names one (domain, condition, params): refuse to resume something else."""
        row = self.store.query("SELECT domain, condition, params FROM runs WHERE run_id = ?", [self.run_id])
        me = {"domain": self.domain_name, "condition": self.condition, "params": self.params}
        if not row:
            self.store.insert("runs", [{"run_id": self.run_id, "domain": self.domain_name,
                                        "condition": self.condition, "params": json.dumps(self.params)}])
        elif (row[0][0], row[0][1], json.loads(row[0][2])) != (me["domain"], me["condition"], me["params"]):
            raise ValueError(f"run {self.run_id} exists with another domain/condition/params: "
                             "choose a new run id or delete runs/" + self.run_id)

    # -- harnesses -------------------------------------------------------------------------
    def seed_harness(self) -> str:
        path = self.params["harness_search"].get("h0") or SEEDS / f"{self.domain_name}.py"
        source = Path(path).read_text()
        hid = self.archive.add(source, origin="seed")
        if self.archive.status(hid)[0] == "pending":
            self.archive.set_status(hid, "ok")
        return hid

    def rollouts_once(self, harness_id: str, examples, k: int, seed: int, ctx, desc: str,
                      stored_where: str, stored_params: list) -> list:
        """Rollouts of ``harness_id`` on ``examples`` (k each) under the served weights, stored.

        When the rows matching ``stored_where`` are already a complete set (a resumed run), they
        are read back instead: a rollout is never drawn, nor stored, twice.
        """
        stored = self.store.load_rollouts(stored_where, stored_params)
        if len(stored) == len(examples) * k:
            return stored
        rollouts = self.engine.run(self.archive.source(harness_id), examples, k, seed, ctx, desc=desc)
        self.store.insert_rollouts(rollouts)
        return rollouts

    # -- weights ---------------------------------------------------------------------------
    @property
    def weights_id(self) -> str:
        return self.engine.backend.weights_id

    def ensure_trainer(self):
        """The run's one trainer, resumed from its latest checkpoint (optimizer state included)."""
        if self.trainer is None:
            from whale.train.rsft import RSFTConfig, RSFTTrainer

            config = RSFTConfig.from_params(self.params)
            ckpt = latest_checkpoint(self.ckpt_root)
            self.trainer = RSFTTrainer.from_checkpoint(ckpt, config) if ckpt else RSFTTrainer(self.base_model, config)
            self.publish_weights()
        return self.trainer

    def publish_weights(self) -> str:
        """Make the backend serve the trainer's current weights and check that it does."""
        expected = model_weights_id(self.trainer.model)
        backend = self.engine.backend
        if hasattr(backend, "serve_model"):
            backend.serve_model(self.trainer.model, expected)
        else:  # a server: hand it a checkpoint directory to load
            serving = self.dir / "serving"
            tmp = serving.with_name("serving.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            self.trainer.model.save_pretrained(tmp)
            self.trainer.tokenizer.save_pretrained(tmp)
            shutil.rmtree(serving, ignore_errors=True)
            tmp.rename(serving)
            backend.load(str(serving))
        backend.check_serving(expected)
        return expected

    def serve_checkpoint(self, ckpt) -> str:
        """Serve the weights of a saved checkpoint (the trainer, if any, is not moved)."""
        from whale.model import weights_id

        if weights_id(ckpt) != self.weights_id:
            self.engine.backend.load(str(ckpt))
            if self.trainer is not None:
                self.trainer.load_state(ckpt)
                self.publish_weights()
        return self.weights_id

    def close(self) -> None:
        self.store.close()
