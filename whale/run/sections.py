"""The typed sections of ``params.yaml`` (each key with its type and range); ``Settings`` joins them."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(Section):
    source: str
    export_dir: str
    dtype: Literal["float32", "bfloat16"]


class VLLMSettings(Section):
    """``backend.kind: vllm``: the server the run starts (or the external one at ``url``)."""

    python: str = Field(min_length=1)  # the interpreter that has vllm (its own venv: `make vllm`)
    url: str | None = None  # an external server started with the same flags; None: the run starts one
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"  # auto: model.dtype
    kv_cache_gb: float = Field(default=4.0, gt=0)
    max_num_seqs: int = Field(default=64, ge=1)
    max_model_len: int = Field(default=2048, ge=64)
    prefix_caching: bool = True
    enforce_eager: bool = True
    start_timeout_s: float = Field(default=300.0, gt=0)
    max_restarts: int = Field(default=2, ge=0)
    extra_args: list[str] = []


class BackendSettings(Section):
    kind: Literal["transformers", "openai", "vllm"]
    base_url: str | list[str] = Field(min_length=1)
    max_batch: int = Field(ge=1)
    kv_reuse_mb: float = Field(default=0, ge=0)
    max_batch_tokens: int = Field(default=0, ge=0)
    fingerprint_tol: float = Field(default=1e-3, gt=0)
    per_episode: bool = True
    vllm: VLLMSettings


class ParallelSettings(Section):
    """Where harness candidates, re-checks and test evaluations roll out (RSFT sampling stays in
    the run's process: its weights change every step)."""

    engine: Literal["local", "ray"] = "local"
    address: str | None = None  # a Ray cluster to join; None starts a local Ray for the run
    workers: int = Field(default=2, ge=1)  # a test evaluation or re-check is split into this many jobs
    cpus_per_job: float = Field(default=1, gt=0)
    gpus_per_job: float = Field(default=0, ge=0)


class StorageSettings(Section):
    """What a run keeps on disk (not what it computes)."""

    keep_checkpoints: int = Field(ge=0)


class SamplingSettings(Section):
    temperature: float = Field(ge=0)
    top_p: float = Field(gt=0, le=1)
    top_k: int = Field(ge=0)


class SandboxSettings(Section):
    cpu_s: int = Field(ge=1)
    memory_mb: int = Field(ge=64)
    hook_timeout_s: float = Field(gt=0)
    hook_s_per_episode: float = Field(gt=0)
    output_kb: int = Field(ge=1)
    jail: Literal["bwrap", "none"]
    max_processes: int = Field(ge=4)


class SplitSizes(Section):
    weight: int = Field(ge=1)
    harness: int = Field(ge=1)
    test: int = Field(ge=1)


class ChessSplitGeneration(Section):
    mix: dict[Literal["mate1", "mate2", "win_piece"], float] | None = None
    max_legal_moves: int | None = Field(default=None, ge=2)


class ChessGeneration(Section):
    mix: dict[Literal["mate1", "mate2", "win_piece"], float]
    max_legal_moves: int = Field(ge=2)
    splits: dict[Literal["weight", "harness", "test"], ChessSplitGeneration] = {}


class GenerationSettings(Section):
    chess_puzzles: ChessGeneration


class SearchVerifier(Section):
    judge: bool
    judge_model: str


class VerifierSettings(Section):
    search_qa: SearchVerifier


class RsftSettings(Section):
    prompt_batch: int = Field(ge=1)
    k: int = Field(ge=1)
    threshold: float
    lr: float = Field(gt=0)
    mini_batch: int = Field(ge=1)
    micro_batch: int = Field(ge=1)
    max_seq_len: int = Field(ge=2)
    checkpoint_every: int = Field(ge=0)
    processes: int = Field(default=1, ge=1)


class ClaudeSettings(Section):
    model: str
    max_tokens: int = Field(ge=1)
    timeout_s: float = Field(gt=0)
    max_turns: int = Field(ge=1)
    retries: int = Field(ge=0)


class OpenAIProposerSettings(Section):
    base_url: str
    model: str
    max_tokens: int = Field(ge=1)
    timeout_s: float = Field(gt=0)
    max_turns: int = Field(ge=1)
    retries: int = Field(ge=1)
    tool_choice: Literal["auto", "required"]


class AcceptSettings(Section):
    rule: Literal["lcb", "margin"]
    level: float = Field(gt=0.5, lt=1)
    margin: float = Field(ge=0, le=1)
    samples: Literal["all", "recheck"]


class HarnessSearchSettings(Section):
    h0: str | None
    # Budgets written into h0's source before it is archived (harnesses/budgets.py).
    h0_budgets: dict[Literal["max_turns", "token_budget", "turn_tokens"], Annotated[int, Field(ge=1)]] = {}
    M: int = Field(ge=1)
    proposer: Literal["auto", "claude", "openai", "offline", "replay"]
    # proposer `replay`: the run directory whose recorded proposals (proposals/c<cycle>-i<it>.json
    # and its harness archive) are proposed again, iteration by iteration, with no model call.
    replay_from: str | None = None
    # The offline proposer's operators besides single primitives, one candidate slot each.
    operators: list[Literal["compose", "crossover", "mutate"]]
    smoke_examples: int = Field(ge=0)
    drafts: int = Field(ge=0)
    draft_examples: int = Field(ge=1)
    skip_duplicates: bool
    rescore_frontier: int = Field(ge=0)
    recheck_top: int = Field(ge=0)
    recheck_samples: int = Field(ge=1)
    accept: AcceptSettings
    max_null_reward: float = Field(ge=0, le=1)
    null_margin: float = Field(ge=0, le=1)
    null_samples: int = Field(ge=1)
    null_refine_samples: int = Field(ge=0)
    blind_samples: int = Field(ge=0)
    blind_level: float = Field(gt=0, lt=1)
    claude: ClaudeSettings
    openai: OpenAIProposerSettings

    @model_validator(mode="after")
    def _recheck_for_fresh_samples(self):
        if self.accept.samples == "recheck" and not self.recheck_top:
            raise ValueError("harness_search.accept.samples recheck decides on the re-check's samples: "
                             "it needs recheck_top >= 1")
        return self

    @model_validator(mode="after")
    def _replay_needs_a_run(self):
        if self.proposer == "replay" and not self.replay_from:
            raise ValueError("proposer replay needs replay_from: the directory of the run to replay")
        return self


class AdaptiveSettings(Section):
    weight_min: float = Field(gt=0)
    weight_window: float = Field(gt=0)
    weight_patience: float = Field(gt=0)
    harness_min: int = Field(ge=1)
    harness_patience: int = Field(ge=1)
    harness_max: int = Field(ge=1)


class ScheduleSettings(Section):
    E: float = Field(gt=0)
    I: int = Field(ge=1)  # noqa: E741  (the paper's name)
    budget: int = Field(ge=1)
    stagewise_weight_share: float = Field(gt=0, lt=1)
    adaptive: AdaptiveSettings


class EvalSettings(Section):
    k: int = Field(ge=1)
    every: int = Field(ge=0)
    phases: bool = True


class SourceFiles(Section):
    """Real data files of one domain: a path per split (unnamed splits are generated) and, for
    search_qa, the passage corpus."""

    weight: str | None = None
    harness: str | None = None
    test: str | None = None
    corpus: str | None = None
