"""Online rejection-sampling fine-tuning (RSFT): one weight update per step on accepted rollouts.

The trainer is TRL's ``SFTTrainer``: its collator pads the rows, its ``training_step`` runs
forward and backward (the loss, ``whale.train.loss``, projects only the target rows), and its
``create_optimizer_and_scheduler`` builds AdamW with a constant learning rate. What TRL's own
``train()`` cannot give RSFT is state that lives across calls: every ``train()`` starts a fresh
``TrainerState`` and re-seeds its sampler, while RSFT gets a new batch of accepted rollouts every
step. So the optimizer, the scheduler, the global step and the data-order generator are built once
here, and ``step`` runs the mini-/micro-batch loop itself.

Rows are the engine's own token record: ``input_ids = rollout.token_ids`` and
``labels = token id where rollout.mask is 1, else -100``. Nothing is re-rendered through a chat
template. The first token has no context, so it is never a target.

Loss, per optimizer step (mini-batch):
    total NLL over every mask-1 token of the mini-batch / number of mask-1 tokens of the mini-batch.
Not the mean of per-micro-batch means: each micro-batch's summed NLL is divided by the token count
of the whole mini-batch (TRL's ``num_items_in_batch``), and the micro-batch gradients add up.
"""
from __future__ import annotations

import contextlib
import math
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from whale.types import Rollout

IGNORE = -100  # the label value the loss skips (transformers / TRL convention)
DTYPES = ("float32", "bfloat16")


def steps_for_epochs(epochs: float, n_weight: int, prompt_batch: int) -> int:
    """RSFT steps in ``epochs`` passes over the weight split.

    Rule: ``steps = floor(epochs * floor(n_weight / prompt_batch) + 0.5)``, i.e. round half up
    (not Python's banker's ``round``), with at least 1 step whenever ``epochs > 0``. An epoch is
    ``floor(n_weight / prompt_batch)`` steps because the last partial prompt batch is dropped.
    Examples: 0.6 epoch of 18,946 at 256 (74 steps/epoch) = 44; 0.2 epoch = 15; 0.6 of 16,384 = 38.
    A tiny tolerance keeps float error (e.g. 2.4999999999) from turning a half into a round-down.
    """
    if epochs < 0:
        raise ValueError(f"epochs must be >= 0, got {epochs}")
    if prompt_batch <= 0:
        raise ValueError(f"prompt_batch must be > 0, got {prompt_batch}")
    per_epoch = n_weight // prompt_batch
    if per_epoch == 0:
        raise ValueError(f"the weight split ({n_weight} examples) is smaller than one prompt batch ({prompt_batch})")
    if epochs == 0:
        return 0
    return max(1, math.floor(epochs * per_epoch + 0.5 + 1e-9))


@dataclass
class RSFTConfig:
    """How the trainer updates weights. ``mini_batch`` rollouts per optimizer step, ``micro_batch`` per forward."""

    lr: float = 1e-5
    mini_batch: int = 16
    micro_batch: int = 4
    # Longer rollouts are cut to their first max_seq_len tokens (the context the model saw first).
    max_seq_len: int = 4096
    seed: int = 0
    # Compute dtype. bfloat16 runs the forward under autocast with float32 master weights: pure bf16
    # weights would round a 1e-5 AdamW update away.
    dtype: str = "float32"
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    # Recompute activations in the backward pass: less memory, about a third more compute.
    activation_checkpointing: bool = False
    # Data-parallel processes (whale.train.parallel): one per device; 1 = in the run's process.
    processes: int = 1

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.micro_batch < 1 or self.mini_batch < self.micro_batch:
            raise ValueError(f"need 1 <= micro_batch <= mini_batch, got {self.micro_batch} / {self.mini_batch}")
        if self.processes < 1:
            raise ValueError(f"processes must be >= 1, got {self.processes}")
        if self.lr <= 0 or self.max_seq_len < 2:
            raise ValueError(f"need lr > 0 and max_seq_len >= 2, got {self.lr} / {self.max_seq_len}")


def rollout_row(rollout: Rollout, max_seq_len: int) -> tuple[dict, bool]:
    """The training row of one rollout (``input_ids`` + ``labels``) and whether it was truncated."""
    where = f"rollout {rollout.example_id}#{rollout.sample_idx}"
    ids, mask = list(rollout.token_ids), list(rollout.mask)
    if len(ids) != len(mask):
        raise ValueError(f"{where}: {len(ids)} token ids but {len(mask)} mask values")
    if len(ids) < 2:
        raise ValueError(f"{where}: needs at least 2 tokens, has {len(ids)}")
    if any(m not in (0, 1) for m in mask):
        raise ValueError(f"{where}: mask values must be 0 or 1")
    truncated = len(ids) > max_seq_len
    ids, mask = ids[:max_seq_len], mask[:max_seq_len]
    labels = [t if m == 1 else IGNORE for t, m in zip(ids, mask, strict=True)]
    return {"input_ids": ids, "labels": labels}, truncated


@dataclass
class StepStats:
    """What one RSFT step did. ``loss``: token-mean NLL over every trained token of the step, each
    mini-batch measured before its own update (None when nothing was trained)."""

    accepted: int  # rollouts given to the step
    loss: float | None = None
    tokens: int = 0  # mask-1 target tokens trained on
    optimizer_steps: int = 0
    truncated: int = 0  # rollouts cut to max_seq_len
    order: list[int] = field(default_factory=list)  # indices of the rollouts in training order
    global_step: int = 0
    wall_s: float = 0.0

    @property
    def skipped(self) -> bool:
        """No update happened (nothing accepted, or nothing to learn from)."""
        return self.optimizer_steps == 0


class RSFTTrainer:
    """A persistent RSFT trainer around one ``trl.SFTTrainer``; ``step`` does one RSFT update."""

    def __init__(self, model_dir: str | Path, config: RSFTConfig):
        import torch
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import SFTConfig

        from whale.train.loss import TargetRowsTrainer

        self.config = config
        self.model_dir = Path(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32)
        args = SFTConfig(
            output_dir=str(Path(tempfile.gettempdir()) / "whale-sft"),
            learning_rate=config.lr, lr_scheduler_type="constant", warmup_steps=0, optim="adamw_torch_fused",
            weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm,
            per_device_train_batch_size=config.micro_batch, gradient_accumulation_steps=1,
            max_length=config.max_seq_len, seed=config.seed, bf16=config.dtype == "bfloat16",
            use_cpu=not torch.cuda.is_available(),  # transformers refuses bf16 on CPU unless told
            activation_checkpointing=config.activation_checkpointing, padding_free=False,
            report_to="none", logging_strategy="no", save_strategy="no", disable_tqdm=True,
            dataset_kwargs={"skip_prepare_dataset": True},
        )
        # SFTTrainer insists on a train_dataset; RSFT's data arrives per step, so it gets one row.
        seed_row = {"input_ids": [tokenizer.eos_token_id] * 2, "labels": [tokenizer.eos_token_id] * 2}
        self.trainer = TargetRowsTrainer(model=model, args=args, train_dataset=Dataset.from_list([seed_row]),
                                         processing_class=tokenizer)
        # The loss divides by num_items_in_batch: tell Trainer not to divide again.
        self.trainer.loss_is_scaled_for_ga = True
        self.trainer.create_optimizer_and_scheduler(num_training_steps=1)  # constant: length is irrelevant
        self.trainer.model_wrapped, self.trainer.optimizer = self.trainer.accelerator.prepare(
            self.trainer.model, self.trainer.optimizer)
        if config.activation_checkpointing:
            self.trainer.model.activation_checkpointing_enable({"use_reentrant": False})
        self.generator = torch.Generator().manual_seed(config.seed)

    @classmethod
    def from_checkpoint(cls, ckpt_dir: str | Path, config: RSFTConfig) -> RSFTTrainer:
        """A trainer whose next step is the one the trainer that wrote ``ckpt_dir`` would have taken."""
        from whale.train.checkpoint import load_trainer_state

        trainer = cls(ckpt_dir, config)
        load_trainer_state(trainer, ckpt_dir, weights=False)
        return trainer

    def load_state(self, ckpt_dir: str | Path) -> None:
        """Restore weights, optimizer, scheduler, global step and RNG states from a checkpoint."""
        from whale.train.checkpoint import load_trainer_state

        load_trainer_state(self, ckpt_dir, weights=True)

    @property
    def model(self):
        return self.trainer.model

    @property
    def tokenizer(self):
        return self.trainer.processing_class

    @property
    def global_step(self) -> int:
        return self.trainer.state.global_step

    def step(self, rollouts: list[Rollout]) -> StepStats:
        """One RSFT update: one shuffled pass over ``rollouts``, one optimizer step per mini-batch.
        Empty input: no update (``skipped``)."""
        t0 = time.perf_counter()
        stats = StepStats(accepted=len(rollouts))
        if rollouts:
            import torch

            rows = [rollout_row(r, self.config.max_seq_len) for r in rollouts]
            stats.order = torch.randperm(len(rows), generator=self.generator).tolist()
            stats.truncated = sum(t for _, t in rows)
            nll = 0.0
            for start in range(0, len(stats.order), self.config.mini_batch):
                batch = [rows[i][0] for i in stats.order[start:start + self.config.mini_batch]]
                loss, tokens = self._accumulate(batch)
                if tokens == 0:  # nothing to learn from: no step, so AdamW moments are not moved by zeros
                    self.trainer.optimizer.zero_grad(set_to_none=True)
                    continue
                self._optimizer_step()
                nll += loss * tokens
                stats.tokens += tokens
                stats.optimizer_steps += 1
            stats.loss = nll / stats.tokens if stats.tokens else None
        self._clear_metrics()
        stats.global_step, stats.wall_s = self.global_step, time.perf_counter() - t0
        return stats

    def _accumulate(self, rows: list[dict]) -> tuple[float, int]:
        """Forward and backward over one mini-batch; returns its token-mean loss and token count.

        Over N processes (``whale.train.parallel``) every process holds the whole mini-batch and
        takes every N-th micro-batch; DDP sums the gradients across processes once, on the last
        pass. The divisor stays the whole mini-batch's token count (TRL scales each process's loss
        by N, DDP averages over N), so the update equals the one-process update."""
        import torch

        micro = self.config.micro_batch
        # Micro-batches of similar lengths pad little; the loss is a sum over the whole mini-batch,
        # so how its rows are grouped does not change the update.
        rows = sorted(rows, key=lambda row: len(row["input_ids"]))
        batches = [self.trainer.data_collator(rows[i:i + micro]) for i in range(0, len(rows), micro)]
        tokens = sum(int((b["labels"][:, 1:] != IGNORE).sum()) for b in batches)
        if tokens == 0:
            return 0.0, 0
        acc = self.trainer.accelerator
        world, rank = acc.num_processes, acc.process_index
        mine = batches[rank::world]
        # every process makes the same number of passes (DDP's reduction waits for all): a process
        # short of a micro-batch runs one without targets, which adds nothing to the gradient
        mine += [{**batches[0], "labels": torch.full_like(batches[0]["labels"], IGNORE)}] * (
            -(-len(batches) // world) - len(mine))
        self.trainer.current_gradient_accumulation_steps = len(batches)
        loss = 0.0
        for i, batch in enumerate(mine):
            with acc.no_sync(self.trainer.model_wrapped) if i < len(mine) - 1 else contextlib.nullcontext():
                loss += float(self.trainer.training_step(self.trainer.model_wrapped, batch, num_items_in_batch=tokens))
        if world > 1:  # each process reported N x its share of the mini-batch mean
            total = acc.reduce(torch.tensor(loss / world, device=acc.device), reduction="sum")
            loss = float(total)
        return loss, tokens

    def _optimizer_step(self) -> None:
        trainer = self.trainer
        if self.config.max_grad_norm > 0:
            trainer.accelerator.clip_grad_norm_(trainer.model.parameters(), self.config.max_grad_norm)
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.state.global_step += 1

    def _clear_metrics(self) -> None:
        # compute_loss appends logging metrics on every call and nothing logs them here: keep memory flat.
        for values in getattr(self.trainer, "_metrics", {}).values():
            values.clear()

    def describe(self) -> dict:
        """The config and position, for checkpoints and logs."""
        return {"config": asdict(self.config), "global_step": self.global_step, "model_dir": str(self.model_dir)}
