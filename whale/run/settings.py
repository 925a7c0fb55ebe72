"""``params.yaml`` as typed settings: the defaults, the selected profile's overlay, then overrides.

Every key is declared here, with its type and range; an unknown key, a wrong type or an
out-of-range value is refused with its key path, the line of ``params.yaml`` that set it and the
accepted values, before anything starts. params.yaml holds every default: a key missing from it
is an error too, so the file stays the one place to read the configuration.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from domains import NAMES as DOMAINS

DEFAULT_PATH = Path("params.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(Section):
    source: str
    export_dir: str
    dtype: Literal["float32", "bfloat16"]


class BackendSettings(Section):
    kind: Literal["transformers", "openai"]
    base_url: str | list[str] = Field(min_length=1)
    max_batch: int = Field(ge=1)
    kv_reuse_mb: float = Field(default=0, ge=0)
    fingerprint_tol: float = Field(default=1e-3, gt=0)


class SamplingSettings(Section):
    temperature: float = Field(ge=0)
    top_p: float = Field(gt=0, le=1)
    top_k: int = Field(ge=0)


class SandboxSettings(Section):
    cpu_s: int = Field(ge=1)
    memory_mb: int = Field(ge=64)
    hook_timeout_s: float = Field(gt=0)
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


class AcceptSettings(Section):
    rule: Literal["lcb", "margin"]
    level: float = Field(gt=0.5, lt=1)
    margin: float = Field(ge=0, le=1)


class HarnessSearchSettings(Section):
    h0: str | None
    M: int = Field(ge=1)
    proposer: Literal["auto", "claude", "openai", "offline", "replay"]
    # proposer `replay`: the run directory whose recorded proposals (proposals/c<cycle>-i<it>.json
    # and its harness archive) are proposed again, iteration by iteration, with no model call.
    replay_from: str | None = None
    smoke_examples: int = Field(ge=0)
    recheck_top: int = Field(ge=0)
    recheck_samples: int = Field(ge=1)
    accept: AcceptSettings
    max_null_reward: float = Field(ge=0, le=1)
    null_samples: int = Field(ge=1)
    claude: ClaudeSettings
    openai: OpenAIProposerSettings

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


class Settings(Section):
    """The whole configuration of a run (params.yaml after the profile and the overrides)."""

    profile: str
    data_seed: int = Field(ge=0)
    seed: int = Field(ge=0)
    model: ModelSettings
    backend: BackendSettings
    sampling: SamplingSettings
    sandbox: SandboxSettings
    data: dict[str, SplitSizes]
    generation: GenerationSettings
    sources: dict[Literal["math_reasoning", "chess_puzzles", "search_qa"], SourceFiles] = {}
    verifier: VerifierSettings
    rsft: RsftSettings
    harness_search: HarnessSearchSettings
    schedule: ScheduleSettings
    eval: EvalSettings

    @field_validator("data")
    @classmethod
    def _known_domains(cls, data: dict) -> dict:
        unknown = sorted(set(data) - set(DOMAINS))
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(unknown)}; known: {', '.join(DOMAINS)}")
        return data

    def as_json(self) -> str:
        """The settings as stored with a run (the ``runs.params`` column)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


class SettingsError(ValueError):
    """A configuration that cannot run; the message names each bad key, where it was set and why."""


def merge(base: dict, overlay: dict) -> dict:
    """Deep-merge ``overlay`` into a copy of ``base``."""
    out = copy.deepcopy(base)
    for k, v in overlay.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_settings(path: str | Path = DEFAULT_PATH, profile: str | None = None,
                  overrides: dict | None = None) -> Settings:
    """The effective configuration: defaults, then ``profiles[profile]``, then ``overrides``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (run from the project root or pass --params)")
    text = path.read_text()
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise SettingsError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: expected a mapping of sections at the top level")
    profiles = raw.pop("profiles", {}) or {}
    name = profile or raw.get("profile", "default")
    if name != "default":
        if name not in profiles:
            raise SettingsError(f"{path}: unknown profile {name!r}; known: default, {', '.join(profiles)}")
        raw = merge(raw, profiles[name])
    raw["profile"] = name
    if overrides is not None and not isinstance(overrides, dict):
        raise SettingsError(f"overrides must be a mapping of sections, got {type(overrides).__name__}")
    try:
        return Settings.model_validate(merge(raw, overrides or {}))
    except ValidationError as e:
        where = _Locator(text, name, overrides or {})
        lines = [_describe(err, where) for err in e.errors()]
        raise SettingsError(f"{path}: {len(lines)} bad setting(s):\n  " + "\n  ".join(lines)) from None


def _describe(err: dict, where: _Locator) -> str:
    keys = [str(k) for k in err["loc"]]
    dotted = ".".join(keys)
    if err["type"] == "extra_forbidden":
        return f"{dotted} ({where(keys)}): unknown key; accepted: {', '.join(_accepted(keys[:-1]))}"
    if err["type"] == "missing":
        return f"{dotted}: missing (every key must be set in params.yaml)"
    got = "" if err["type"] == "value_error" else f" (got {err.get('input')!r})"  # its message names the value
    return f"{dotted} ({where(keys)}): {err['msg']}{got}"


def _accepted(parent: list[str]) -> list[str]:
    """The keys a section accepts (the section at key path ``parent``)."""
    model: type[BaseModel] = Settings
    for key in parent:
        field = model.model_fields.get(key)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


class _Locator:
    """Where a key path was set: ``--set`` overrides, the profile's overlay, or a params.yaml line."""

    def __init__(self, text: str, profile: str, overrides: dict):
        self.root, self.profile, self.overrides = yaml.compose(text), profile, overrides

    def __call__(self, keys: list[str]) -> str:
        if _has(self.overrides, keys):
            return "from --set"
        for prefix in (["profiles", self.profile], []):
            node = _node(self.root, prefix + keys)
            if node is not None:
                return f"line {node.start_mark.line + 1}"
        return "params.yaml"


def _has(tree: dict, keys: list[str]) -> bool:
    for key in keys:
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def _node(node, keys: list[str]):
    """The YAML key node at ``keys`` under ``node``, or None."""
    found = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        match = [(k, v) for k, v in node.value if k.value == key]
        if not match:
            return None
        found, node = match[0]
    return found
