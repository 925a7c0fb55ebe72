"""The disk a run's checkpoints take, estimated before the run writes them.

A checkpoint holds the weights in the trainer's dtype and AdamW's two moments in the same dtype:
three copies of the parameters (1.6 GB for the embedded 135M model in float32). A run writes one
at the end of every weight phase (and every ``rsft.checkpoint_every`` steps inside one) and keeps
the newest ``storage.keep_checkpoints`` (0: all). The estimate is an upper bound: a phase whose
steps were all skipped links the previous checkpoint's files, and the first checkpoint before any
optimizer step has no moments yet.
"""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from whale.run.conditions import Condition
from whale.run.schedule import epochs_to_steps, harness_phase_rollouts
from whale.run.settings import Settings

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def parameters(config: dict) -> int:
    """Parameters of a Llama/Qwen-style decoder from its config.json (norms and biases left out)."""
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads) * config.get("head_dim", h // heads)
    embed = config["vocab_size"] * h * (1 if config.get("tie_word_embeddings", False) else 2)
    return embed + layers * (2 * h * h + 2 * h * kv + 3 * h * i)


@dataclass(frozen=True)
class DiskNeed:
    per_checkpoint: int  # bytes
    written: int  # checkpoints the run writes, at most
    at_once: int  # on disk at the same time, at most: the kept ones and the one being written
    existing: int  # bytes the run's checkpoints already take (a resumed run)
    free: int  # bytes free where the run writes

    @property
    def needed(self) -> int:
        return max(0, self.at_once * self.per_checkpoint - self.existing)

    @property
    def fits(self) -> bool:
        return self.needed <= self.free

    def describe(self, keep: int) -> str:
        if not self.written:
            return "no checkpoints (no weight phases)"
        kept = f"the newest {keep} kept" if keep else "every one kept: storage.keep_checkpoints 0"
        return (f"a checkpoint about {_gib(self.per_checkpoint)} (weights and AdamW moments); at most "
                f"{self.written} written, {self.at_once} on disk at once ({kept}): about "
                f"{_gib(self.needed)} more, {_gib(self.free)} free")

    def advice(self, where: Path) -> str:
        return (f"the run's checkpoints may need about {_gib(self.needed)}, more than the {_gib(self.free)} free "
                f"under {where}: set storage.keep_checkpoints (the newest N stay; 2 is enough to resume) "
                "or free space")


def checkpoints_written(s: Settings, condition: Condition, n_weight: int, n_harness: int) -> int:
    """How many checkpoints a run writes at most: one per weight phase the budget buys (the
    phases' fixed lengths; an adaptive run's are no longer), more with ``rsft.checkpoint_every``."""
    if not condition.trains:
        return 0
    steps = epochs_to_steps(s, n_weight, s.schedule.E)
    weight_phase = steps * s.rsft.prompt_batch * s.rsft.k
    harness_phase = harness_phase_rollouts(s, n_harness)
    alternates = condition.searches and not condition.stages
    phases = math.ceil(s.schedule.budget / (weight_phase + (harness_phase if alternates else 0)))
    every = s.rsft.checkpoint_every
    return phases * (math.ceil(steps / every) if every else 1)


def checkpoint_bytes(s: Settings, model_dir: Path) -> int:
    """A checkpoint's size: three copies of the parameters in the trainer's dtype, plus the
    model directory's other files (tokenizer, configs) as they are."""
    config = json.loads((model_dir / "config.json").read_text())
    others = sum(f.stat().st_size for f in model_dir.iterdir() if f.is_file() and f.suffix != ".safetensors")
    return 3 * BYTES.get(s.model.dtype, 4) * parameters(config) + others


def disk_need(s: Settings, condition: Condition, n_weight: int, n_harness: int, model_dir: Path,
              run_dir: Path) -> DiskNeed:
    """What the run in ``run_dir`` may still write, against the space free there."""
    written = checkpoints_written(s, condition, n_weight, n_harness)
    keep = s.storage.keep_checkpoints
    ckpts = run_dir / "checkpoints"
    existing = sum(f.stat().st_size for f in ckpts.rglob("*") if f.is_file()) if ckpts.is_dir() else 0
    where = next(p for p in (run_dir, *run_dir.parents) if p.exists())  # a relative path ends at "."
    return DiskNeed(per_checkpoint=checkpoint_bytes(s, model_dir), written=written,
                    at_once=min(written, keep + 1) if keep else written, existing=existing,
                    free=shutil.disk_usage(where).free)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
