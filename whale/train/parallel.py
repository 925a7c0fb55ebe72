"""Data-parallel RSFT: one trainer process per device, the run's own process being rank 0.

``rsft.processes: N`` starts N - 1 worker processes next to the run. Every process builds the same
``RSFTTrainer`` inside one ``torch.distributed`` process group (gloo on CPU, NCCL on GPUs), which
accelerate (through TRL) turns into DDP. Rank 0 sends each command (a step with its accepted
rollouts, a checkpoint to load, stop) to the workers over a gloo group, then runs it itself: every
rank holds the same rollouts and takes its own micro-batches of each mini-batch (``RSFTTrainer.
_accumulate``), gradients are summed once per mini-batch, and every rank takes the same AdamW step,
so the optimizer state lives on in every process across steps and phases, as in one process.
Rank 0's trainer is the one the run reads (weights to serve, checkpoints to write).
"""
from __future__ import annotations

import datetime
import os
import socket
from pathlib import Path

from whale.train.rsft import RSFTConfig, RSFTTrainer, StepStats
from whale.types import Rollout

ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
# A worker that died leaves the others waiting in a collective: fail after this rather than hang.
TIMEOUT = datetime.timedelta(minutes=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join(rank: int, world: int, port: int, workers=()):
    """Join the process group as ``rank``; return the gloo group that carries commands. Rank 0
    hosts the rendezvous and waits for every worker to check in, failing as soon as one has died
    (a worker that cannot start would otherwise leave it waiting out the whole timeout)."""
    import time

    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0, timeout=TIMEOUT, wait_for_workers=False)
    if rank == 0:
        while not store.check([f"up/{r}" for r in range(1, world)]):
            dead = [f"{w.name} (exit code {w.exitcode})" for w in workers if not w.is_alive()]
            if dead:
                raise RuntimeError(f"RSFT worker process(es) {', '.join(dead)} died before joining; see its output")
            time.sleep(0.2)
    else:
        store.set(f"up/{rank}", "1")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    return dist.new_group(backend="gloo", timeout=TIMEOUT)


def _reset_accelerate() -> None:
    """Forget accelerate's process-wide state (a singleton): a trainer built before or after the
    process group would otherwise inherit the other's view of how many processes there are."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def _one(source: str | Path, config: RSFTConfig, resume: bool) -> RSFTTrainer:
    return RSFTTrainer.from_checkpoint(source, config) if resume else RSFTTrainer(source, config)


def _build(source: str | Path, config: RSFTConfig, resume: bool) -> RSFTTrainer:
    """A rank's trainer, built against the process group just joined."""
    _reset_accelerate()
    return _one(source, config, resume)


def _worker(rank: int, world: int, port: int, source: str, config: RSFTConfig, resume: bool) -> None:
    import torch.distributed as dist

    commands = _join(rank, world, port)
    trainer = _build(source, config, resume)
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0, group=commands)
        name, arg = box[0]
        if name == "step":
            trainer.step(arg)
        elif name == "load":
            trainer.load_state(arg)
        else:
            break
    dist.destroy_process_group()


class DataParallelTrainer:
    """``RSFTTrainer``'s interface over ``config.processes`` processes (rank 0 in this one)."""

    def __init__(self, source: str | Path, config: RSFTConfig, resume: bool = False):
        import torch.multiprocessing as mp

        if config.processes < 2:
            raise ValueError(f"data-parallel training needs processes >= 2, got {config.processes}")
        world, port = config.processes, _free_port()
        saved = {k: os.environ.get(k) for k in ENV}
        ctx = mp.get_context("spawn")  # never fork a process that holds a model and threads
        self.workers = [ctx.Process(target=_worker, args=(rank, world, port, str(source), config, resume),
                                    daemon=True, name=f"rsft-rank{rank}") for rank in range(1, world)]
        for w in self.workers:
            w.start()
        try:
            self.commands = _join(0, world, port, self.workers)
            self.local = _build(source, config, resume)
        finally:  # the group is formed; the rest of the run need not see itself as rank 0
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        self.config = config

    @classmethod
    def from_checkpoint(cls, ckpt_dir: str | Path, config: RSFTConfig) -> DataParallelTrainer:
        return cls(ckpt_dir, config, resume=True)

    def _send(self, name: str, arg=None) -> None:
        import torch.distributed as dist

        dead = [w.name for w in self.workers if not w.is_alive()]
        if dead:
            raise RuntimeError(f"RSFT worker process(es) {', '.join(dead)} died; restart the run to resume")
        dist.broadcast_object_list([(name, arg)], src=0, group=self.commands)

    def step(self, rollouts: list[Rollout]) -> StepStats:
        self._send("step", list(rollouts))
        return self.local.step(rollouts)

    def load_state(self, ckpt_dir: str | Path) -> None:
        self._send("load", str(ckpt_dir))
        self.local.load_state(ckpt_dir)

    def close(self) -> None:
        import torch.distributed as dist

        if not self.workers:
            return
        if all(w.is_alive() for w in self.workers):
            self._send("stop")
        for w in self.workers:
            w.join(timeout=60)
            if w.is_alive():
                w.kill()
        self.workers = []
        dist.destroy_process_group()
        _reset_accelerate()

    def __getattr__(self, name: str):
        # model, tokenizer, global_step, trainer, generator, describe: rank 0's (identical on every rank)
        if name == "local":
            raise AttributeError(name)
        return getattr(self.local, name)


def make_trainer(source: str | Path, config: RSFTConfig, resume: bool = False):
    """The run's trainer: in this process, or data-parallel over ``config.processes`` processes."""
    if config.processes > 1:
        return DataParallelTrainer(source, config, resume)
    return _one(source, config, resume)
