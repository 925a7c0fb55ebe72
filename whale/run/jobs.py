"""Rollout jobs: a batch of rollouts described by value, so it can run in the run's process or in a
worker that has nothing but the job (a Ray worker on this machine or another).

A job names the weights it must be rolled out under by their content id; a worker that loads
other weights refuses the job, so a rollout is never labelled with weights that did not produce
it. Workers never write the store: they return the rollouts, and the run's process stores them
(DuckDB has one writer).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from whale.rollout.engine import Engine
from whale.run.settings import Settings
from whale.types import Example, Rollout, RolloutContext


@dataclass(frozen=True)
class RolloutJob:
    """The rollouts of one harness on ``examples``, ``k`` samples each, under one set of weights."""

    settings: Settings
    domain: str
    data_dir: str  # absolute: a worker's working directory is not the run's
    model: str  # a directory holding the weights (and tokenizer) the backend serves
    weights_id: str  # the weights the rollouts must come from
    source: str  # the harness
    examples: tuple[Example, ...]
    k: int
    seed: int
    context: RolloutContext
    desc: str = "rollouts"

    @property
    def size(self) -> int:
        return len(self.examples) * self.k


@dataclass
class JobResult:
    """What a request got: the rollouts of each of its parts that ran, and the smoke error, if any,
    that stopped it before the rest."""

    parts: list[list[Rollout]]
    error: str | None = None

    @property
    def rollouts(self) -> list[Rollout]:
        return [r for part in self.parts for r in part]


def run_job(job: RolloutJob, engine: Engine, progress: bool = True) -> list[Rollout]:
    """Roll ``job`` out on ``engine``, which must serve the job's weights."""
    if engine.backend.weights_id != job.weights_id:
        raise RuntimeError(f"rollout job {job.desc!r} is for weights {job.weights_id}, but this engine serves "
                           f"{engine.backend.weights_id} (loaded from {job.model}): stale weights")
    return engine.run(job.source, list(job.examples), job.k, job.seed, job.context, progress, job.desc)


def shard(job: RolloutJob, n: int) -> list[RolloutJob]:
    """``job`` split by examples into at most ``n`` jobs. Every rollout's seed derives from (batch
    seed, example, sample), so the shards draw the same rollouts as the whole job would, up to the
    numerics of other batch shapes."""
    if n <= 1 or len(job.examples) < 2:
        return [job]
    size = -(-len(job.examples) // n)
    return [RolloutJob(**{**vars(job), "examples": job.examples[i:i + size], "desc": f"{job.desc} [{i // size + 1}]"})
            for i in range(0, len(job.examples), size)]


class LocalDispatch:
    """Jobs run one after another in the run's process, on its own engine (the default)."""

    workers, remote = 1, False

    def __init__(self, engine: Engine):
        self.engine = engine

    def __call__(self, jobs: list[RolloutJob]) -> list[list[Rollout]]:
        return [run_job(job, self.engine) for job in jobs]

    def close(self) -> None:
        pass


_worker: tuple[tuple, Engine] | None = None  # a worker process keeps one engine between jobs


def execute(job: RolloutJob) -> list[Rollout]:
    """Run ``job`` in a worker: build (or reuse) an engine on the job's weights and roll out."""
    global _worker
    from whale.run.context import domain_for, make_engine

    key = (job.model, job.weights_id, job.domain, job.data_dir, job.settings.as_json())
    if _worker is None or _worker[0] != key:
        if _worker is not None and hasattr(_worker[1].backend, "close"):
            _worker[1].backend.close()
        _worker = None
        settings = job.settings
        domain = domain_for(settings, job.domain, job.data_dir)
        _worker = key, make_engine(settings, domain, Path(job.model))
    return run_job(job, _worker[1], progress=False)
