"""The weights of a run: its one trainer, what the backend serves, and the checkpoints.

One RSFT step goes through here once: ``update`` trains on the accepted rollouts and makes the
backend serve the result; ``save`` writes a checkpoint and checks that the backend serves it.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from whale.model import model_weights_id, weights_id
from whale.rollout import fingerprint
from whale.rollout.backends.base import Backend
from whale.train.checkpoint import (
    checkpoint_dir,
    checkpoint_weights_id,
    checkpoints,
    latest_checkpoint,
    save_checkpoint,
)
from whale.train.parallel import make_trainer
from whale.train.rsft import RSFTConfig, StepStats
from whale.types import Rollout


class Weights:
    def __init__(self, backend: Backend, config: RSFTConfig, base_model: Path, run_dir: Path,
                 fingerprint_tol: float = 1e-3, served_dtype: str | None = None, keep_checkpoints: int = 0):
        self.backend, self.config, self.base_model = backend, config, base_model
        self.keep_checkpoints = keep_checkpoints  # 0: every one
        self.fingerprint_tol = fingerprint_tol
        self.fingerprint: fingerprint.Verdict | None = None  # of the last published update (a server only)
        # The dtype the server holds the weights in (the trainer's compute dtype unless it says
        # otherwise): the trainer's side of the fingerprint is rounded to it.
        self._rounded = fingerprint.Rounded(served_dtype or config.dtype)
        self.ckpt_root, self.serving = run_dir / "checkpoints", run_dir / "serving"
        self.trainer = None  # RSFTTrainer, or DataParallelTrainer over rsft.processes
        self._ids: dict[Path, str] = {}  # weights id of the base model and of serving/ as last written

    @property
    def id(self) -> str:
        """The weights id the backend serves now."""
        return self.backend.weights_id

    def resume_step(self) -> int:
        """The RSFT step the latest checkpoint was written after (0 without one)."""
        ckpt = latest_checkpoint(self.ckpt_root)
        return int(ckpt.name.split("-")[1]) if ckpt else 0

    def start_training(self) -> None:
        """Build the run's one trainer, resumed from its latest checkpoint (optimizer state included)."""
        if self.trainer is None:
            ckpt = latest_checkpoint(self.ckpt_root)
            self.trainer = make_trainer(ckpt or self.base_model, self.config, resume=ckpt is not None)
            self._publish()

    def update(self, accepted: list[Rollout]) -> StepStats:
        """One RSFT step on ``accepted``; the backend then serves the new weights (unless skipped)."""
        self.start_training()
        stats = self.trainer.step(accepted)
        if not stats.skipped:
            self._publish()
        return stats

    def save(self, step: int) -> str:
        """Checkpoint the trainer as ``step-<step>``; return its weights id, checked as the served one."""
        wid = save_checkpoint(self.trainer, checkpoint_dir(self.ckpt_root, step))
        self.backend.check_serving(wid)
        return wid

    def prune(self) -> list[Path]:
        """Remove all but the newest ``keep_checkpoints`` checkpoints (0: none). Only a stagewise
        run serves an older checkpoint again, and it keeps every one. Each is renamed out of the
        ``step-…`` namespace before it is deleted, so a crash midway leaves nothing that looks
        like a checkpoint."""
        for leftover in self.ckpt_root.glob("step-*.removed"):  # of a prune that was interrupted
            shutil.rmtree(leftover)
        removed = checkpoints(self.ckpt_root)[self.keep_checkpoints:] if self.keep_checkpoints else []
        for ckpt in removed:
            gone = ckpt.with_name(ckpt.name + ".removed")
            ckpt.rename(gone)
            shutil.rmtree(gone)
        return removed

    def serve(self, step: int) -> str:
        """Serve the checkpoint written after ``step`` (the trainer, if any, moves there too)."""
        ckpt = checkpoint_dir(self.ckpt_root, step)
        if weights_id(ckpt) != self.id:
            self.backend.load(str(ckpt))
            if self.trainer is not None:
                self.trainer.load_state(ckpt)
                self._publish()
        return self.id

    def on_disk(self) -> Path:
        """A directory holding the weights the backend serves now, for workers that load their own
        copy: the checkpoint or base model with that weights id, else the trainer's weights written
        to ``serving/`` (mid-phase, between checkpoints)."""
        wanted = self.id
        for ckpt in checkpoints(self.ckpt_root):
            if checkpoint_weights_id(ckpt) == wanted:
                return ckpt
        if self.base_model not in self._ids:
            self._ids[self.base_model] = weights_id(self.base_model)
        if self._ids[self.base_model] == wanted:
            return self.base_model
        if self._ids.get(self.serving) == wanted:
            return self.serving
        if self.trainer is None or model_weights_id(self.trainer.model) != wanted:
            raise RuntimeError(f"the weights {wanted} being served are on no disk this run can name")
        self._write_serving(wanted)
        return self.serving

    def close(self) -> None:
        """Stop the trainer's worker processes, if it has any."""
        if hasattr(self.trainer, "close"):
            self.trainer.close()

    def _write_serving(self, wid: str) -> None:
        """The trainer's weights (id ``wid``) and tokenizer into ``serving/``, replaced whole."""
        self._ids.pop(self.serving, None)
        tmp = self.serving.with_name("serving.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self.trainer.model.save_pretrained(tmp)
        self.trainer.tokenizer.save_pretrained(tmp)
        shutil.rmtree(self.serving, ignore_errors=True)
        tmp.rename(self.serving)
        self._ids[self.serving] = wid

    def _publish(self) -> None:
        """Make the backend serve the trainer's current weights and check that it does."""
        expected = model_weights_id(self.trainer.model)
        if hasattr(self.backend, "serve_model"):
            self.backend.serve_model(self.trainer.model, expected)
        else:  # a server: hand it a checkpoint directory to load
            self._write_serving(expected)
            self.backend.load(str(self.serving))
            # the server's word (its weights id, its model root) is not proof: its numbers are
            served = self._rounded(self.trainer.model)  # the trainer's weights as the server holds them
            self.fingerprint = fingerprint.verify(self.backend, served, self.trainer.tokenizer,
                                                  self.fingerprint_tol, f"the trainer's weights {expected}",
                                                  self.fingerprint)
        self.backend.check_serving(expected)
