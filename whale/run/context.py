"""The live state of one run: its store, archive, engine and weights (trainer, checkpoints).

A run is ``runs/<run_id>/``: ``rollouts.duckdb`` (every rollout, score, step and decision),
``harnesses/`` (the archive), ``checkpoints/`` (weights + trainer state), ``metrics/`` and
``plots/``. Everything needed to resume is on disk; this object is rebuilt from it on restart.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from domains import get_domain
from harnesses.archive import Archive
from harnesses.budgets import set_budgets
from harnesses.jail import check_jail
from harnesses.validate import smoke_error
from whale.model import EMBEDDED, export_model
from whale.provenance import code_version
from whale.rollout.backends import make_backend
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.vllm_server import ServerConfig
from whale.rollout.engine import Engine
from whale.run.conditions import Condition
from whale.run.guard import (
    blind_guard_verdict,
    blind_null_estimate,
    null_guard_verdict,
    null_policy_reward,
    sandbox_limits,
)
from whale.run.jobs import JobResult, LocalDispatch, RolloutJob, shard
from whale.run.settings import Settings, SettingsError, identity
from whale.run.weights import Weights
from whale.store import Store, run_queries, store_path
from whale.store.keys import RolloutKey
from whale.train.checkpoint import latest_checkpoint
from whale.train.rsft import RSFTConfig
from whale.types import Example, Rollout

log = logging.getLogger(__name__)
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


def make_engine(settings: Settings, domain, model: str | Path, log_dir: str | Path = "runs/vllm") -> Engine:
    """The engine of a run or an evaluation; refuses to start when the jail cannot."""
    check_jail(settings.sandbox.jail)
    b = settings.backend
    backend = make_backend(b.kind, str(model), settings.model.dtype, b.max_batch, b.base_url, b.kv_reuse_mb,
                           b.max_batch_tokens, vllm_config(settings, log_dir), b.vllm.url, b.vllm.max_restarts)
    return Engine(backend, domain, Sampling(**settings.sampling.model_dump()), sandbox_limits(settings),
                  per_episode=b.per_episode)


def vllm_config(settings: Settings, log_dir: str | Path = "runs/vllm") -> ServerConfig:
    """How the run starts its vLLM server (``backend.kind: vllm``)."""
    v = settings.backend.vllm
    return ServerConfig(python=v.python, dtype=settings.vllm_dtype,
                        kv_cache_gb=v.kv_cache_gb, max_num_seqs=v.max_num_seqs, max_model_len=v.max_model_len,
                        prefix_caching=v.prefix_caching, enforce_eager=v.enforce_eager,
                        start_timeout_s=v.start_timeout_s, log_dir=str(log_dir),
                        extra_args=tuple(v.extra_args))


def rsft_config(settings: Settings) -> RSFTConfig:
    r = settings.rsft
    return RSFTConfig(lr=r.lr, mini_batch=r.mini_batch, micro_batch=r.micro_batch, max_seq_len=r.max_seq_len,
                      seed=settings.seed, dtype=settings.model.dtype, processes=r.processes)


def domain_for(settings: Settings, name: str, data_dir: str | Path = "data"):
    """The domain ``name`` (examples under ``data_dir``) with its verifier options from params.yaml."""
    options = settings.verifier.search_qa.model_dump() if name == "search_qa" else {}
    if name == "math_reasoning":
        options = {"jail": settings.sandbox.jail, "max_processes": settings.sandbox.max_processes}
    return get_domain(name, str(data_dir), **options)


def _elsewhere(run_id: str) -> str:
    return f"<run {run_id}, in the run's process>"


@dataclass
class Request:
    """Rollouts a task wants: ``parts`` (a key and its examples each), rolled out in order; with
    ``smoke``, a part with an error ends the request (a broken candidate spends no more)."""

    parts: list[tuple[RolloutKey, list[Example]]]
    desc: str
    smoke: bool = False


class Run:
    """What a phase needs: settings, condition, store, archive, engine and weights."""

    def __init__(self, settings: Settings, domain: str, condition: Condition, run_id: str,
                 runs_dir: str | Path = "runs"):
        if condition.stages and settings.storage.keep_checkpoints:
            raise SettingsError(f"storage.keep_checkpoints {settings.storage.keep_checkpoints}: condition "
                                f"{condition.name} scores every checkpoint of its weight stage, so it keeps "
                                "every one; set it to 0")
        self.settings, self.domain_name, self.condition, self.run_id = settings, domain, condition, run_id
        self.dir = Path(runs_dir) / run_id
        self.domain = domain_for(settings, domain)
        self.store = Store(store_path(self.dir))
        self._check_same_run()
        self._record_start()
        self.archive = Archive(self.dir, self.store, domain)
        base_model = model_dir(settings)
        resume = latest_checkpoint(self.dir / "checkpoints")
        self.engine = make_engine(settings, self.domain, resume or base_model, self.dir / "vllm")
        self.weights = Weights(self.engine.backend, rsft_config(settings), base_model, self.dir,
                               settings.backend.fingerprint_tol, settings.served_dtype,
                               settings.storage.keep_checkpoints)
        # Where rollout jobs run: here by default; the flow may hand them to Ray workers instead.
        self.dispatch = LocalDispatch(self.engine)

    def _check_same_run(self) -> None:
        """A run id names one (domain, condition, params): refuse to resume something else."""
        row = run_queries.run_identity(self.store, self.run_id)
        params = self.settings.as_json()
        if row is None:
            self.store.insert("runs", [{"run_id": self.run_id, "domain": self.domain_name,
                                        "condition": self.condition.name, "params": params}])
        elif (row["domain"], row["condition"], identity(row["params"])) != (
                self.domain_name, self.condition.name, identity(params)):
            raise ValueError(f"run {self.run_id} exists with another domain/condition/params: "
                             "choose a new run id or delete runs/" + self.run_id)

    def _record_start(self) -> None:
        """Store this process's code; a resume under other code goes on (a fix may be why it was
        stopped) but says so, since the run's rollouts then come from two versions."""
        code = code_version()
        last = self.store.record_start(self.run_id, code)
        if last is not None and last != code:
            log.warning("run %s resumes under other code: %s (it last started under %s)", self.run_id, code, last)

    # -- harnesses -------------------------------------------------------------------------
    def seed_harness(self) -> str:
        """h0, archived. It passes the null-policy guard like every candidate (a hand-written h0 can
        play the task itself as well as a proposed one can), else the run stops before it starts."""
        source = h0_source(self.settings, self.domain_name)
        hid = self.archive.add(source, origin="seed")
        self.h0_id = hid  # candidates' null rewards are compared with this one's
        if (self.archive.status(hid)[0] == "pending" and self.passes_null_guard(hid, source)
                and self.passes_blind_guard(hid, source)):
            self.archive.set_status(hid, "ok")
        status, reason = self.archive.status(hid)
        if status != "ok":
            raise ValueError(f"h0 {h0_path(self.settings, self.domain_name)} {reason}")
        return hid

    def passes_null_guard(self, hid: str, source: str) -> bool:
        """Store the harness's null reward; refused by ``null_guard_verdict`` (against h0's null
        reward once h0 is archived) mark it ``solves_without_model``."""
        h0 = getattr(self, "h0_id", None)
        h0_null = None if h0 in (None, hid) else self.archive.null_reward(h0)
        null = null_policy_reward(self.settings, self.domain, source, self.engine.backend.tokenizer, h0_null)
        self.archive.set_null_reward(hid, null)
        reason = null_guard_verdict(self.settings, null, h0_null)
        if reason:
            self.archive.set_status(hid, "solves_without_model", reason)
        return reason is None

    def passes_blind_guard(self, hid: str, source: str) -> bool:
        """The null-policy guard again under the blind null policy (``blind_samples`` > 0): the
        larger null reward is stored; refused, the harness is marked ``solves_without_model``."""
        if not self.settings.harness_search.blind_samples:
            return True
        blind = blind_null_estimate(self.settings, self.domain, source, self.engine.backend)
        null = max(blind.mean, self.archive.null_reward(hid) or 0.0)
        self.archive.set_null_reward(hid, null)
        h0 = getattr(self, "h0_id", None)
        reason = blind_guard_verdict(self.settings, blind, None if h0 in (None, hid) else self.archive.null_reward(h0))
        if reason:
            self.archive.set_status(hid, "solves_without_model", f"blind null policy: {reason}")
        return reason is None

    def key(self, cycle: int, phase: str, step: int, harness_id: str, examples: list[Example], k: int, seed: int,
            any_boundary: bool = False) -> RolloutKey:
        """The key of a batch of ``harness_id`` rollouts on ``examples`` under the served weights."""
        return RolloutKey(self.run_id, cycle, phase, step, harness_id, self.weights_id,
                          tuple(e.id for e in examples), k, seed, any_boundary)

    def rollouts_once(self, key: RolloutKey, examples: list[Example], desc: str) -> list[Rollout]:
        """The rollouts of ``key``, stored: read back when the store holds the complete batch (a
        resumed run), else rolled out here (RSFT sampling: the weights change every step, so
        workers would have to reload them each time). A rollout is never drawn, nor stored, twice."""
        stored = self.store.stored_rollouts(key)
        if stored is not None:
            return stored
        source = self.archive.source(key.harness_id)
        rollouts = self.engine.run(source, examples, key.k, key.seed, key.context, desc=desc)
        self.store.insert_rollouts(rollouts)
        return rollouts

    def rollouts(self, requests: list[Request]) -> list[JobResult]:
        """The rollouts of every request, stored. Parts already stored are read back; the rest go
        to ``dispatch`` in rounds, each live request's next part in one round (split into
        ``dispatch.workers`` jobs, so workers run them at once), stored in request order after it.
        A smoke error ends its request; a failed job ends the run once the round's others are stored."""
        results = [self._stored(req) for req in requests]
        model = None  # where workers load the weights from: one place for the whole call
        while True:
            todo = [(req, res) for req, res in zip(requests, results, strict=True)
                    if res.error is None and len(res.parts) < len(req.parts)]
            if not todo:
                return results
            if model is None:
                model = str(self.weights.on_disk().resolve()) if self.dispatch.remote else ""
            jobs = [shard(self._job(req, len(res.parts), model), self.dispatch.workers) for req, res in todo]
            flat = self.dispatch([j for pieces in jobs for j in pieces])
            at, failed = 0, None
            for (req, res), pieces in zip(todo, jobs, strict=True):
                got, at = flat[at:at + len(pieces)], at + len(pieces)
                bad = next((g for g in got if isinstance(g, BaseException)), None)
                failed = failed or bad
                if bad:  # a part is stored whole or not at all
                    continue
                part = [r for rollouts in got for r in rollouts]
                self.store.insert_rollouts(part)
                res.parts.append(part)
                res.error = smoke_error(part) if req.smoke else None
            if failed:
                raise failed

    def _stored(self, req: Request) -> JobResult:
        """The leading parts of ``req`` the store holds (a smoke error there ends the request)."""
        done = JobResult([])
        for key, _ in req.parts:
            stored = self.store.stored_rollouts(key)
            if stored is None:
                break
            done.parts.append(stored)
            done.error = smoke_error(stored) if req.smoke else None
            if done.error:
                break
        return done

    def _job(self, req: Request, part: int, model: str) -> RolloutJob:
        key, examples = req.parts[part]
        return RolloutJob(self.settings, self.domain_name, str(self.domain.data_dir.parent.resolve()), model,
                          key.weights_id, self.archive.source(key.harness_id), tuple(examples), key.k, key.seed,
                          key.context, req.desc)

    @property
    def weights_id(self) -> str:
        return self.weights.id

    def __reduce__(self):
        # Prefect hands a task to Ray with its caller's context, this run among the caller's
        # parameters. A run (model, trainer, the store's one writer) lives in its own process only.
        return _elsewhere, (self.run_id,)

    def close(self) -> None:
        self.dispatch.close()
        self.weights.close()
        if hasattr(self.engine.backend, "close"):  # a server the run started stops with it
            self.engine.backend.close()
        self.store.close()
