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
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from domains import NAMES as DOMAINS
from whale.run.sections import (
    BackendSettings,
    EvalSettings,
    GenerationSettings,
    HarnessSearchSettings,
    ModelSettings,
    ParallelSettings,
    RsftSettings,
    SamplingSettings,
    SandboxSettings,
    ScheduleSettings,
    Section,
    SourceFiles,
    SplitSizes,
    StorageSettings,
    VerifierSettings,
)

DEFAULT_PATH = Path("params.yaml")
# Sections that say where the work runs or what it keeps, not what it computes: not part of a
# run's identity (a run started locally resumes on Ray, one whose disk filled resumes keeping fewer
# checkpoints), nor a dependency of the DVC run stages.
PLACEMENT = frozenset({"parallel", "storage"})
# Settings added after runs were stored, each with the value that does what those runs did: a run
# stored without one is the same run as one that sets it to that value (and resumes under it).
ADDED = {("harness_search", "accept", "samples"): "all"}


def identity(params: str) -> dict:
    """The settings that make a stored run what it is: all but ``PLACEMENT`` and the profile's name
    (a profile is a named overlay: the settings it gives are what count), with the ``ADDED``
    settings it predates filled in."""
    out = {k: v for k, v in json.loads(params).items() if k not in PLACEMENT and k != "profile"}
    for (*path, key), value in ADDED.items():
        node = out
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.setdefault(key, value)
    return out


class Settings(Section):
    """The whole configuration of a run (params.yaml after the profile and the overrides)."""

    profile: str
    # The domain whose `per_domain` overlay was applied (None: loaded for no domain in particular).
    domain: Literal["math_reasoning", "chess_puzzles", "search_qa"] | None = None
    data_seed: int = Field(ge=0)
    seed: int = Field(ge=0)
    model: ModelSettings
    backend: BackendSettings
    parallel: ParallelSettings
    storage: StorageSettings
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
    # Per-domain overlays (the paper's model, learning rate and lengths differ by domain), applied
    # after the profile when a run's domain is known; each is validated at load time.
    per_domain: dict[Literal["math_reasoning", "chess_puzzles", "search_qa"], dict] = {}

    @field_validator("data")
    @classmethod
    def _known_domains(cls, data: dict) -> dict:
        unknown = sorted(set(data) - set(DOMAINS))
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(unknown)}; known: {', '.join(DOMAINS)}")
        return data

    @model_validator(mode="after")
    def _one_vllm_server(self) -> Settings:
        if self.backend.kind == "vllm" and self.parallel.engine == "ray" and not self.backend.vllm.url:
            raise ValueError("backend.kind vllm with parallel.engine ray: every Ray worker would start a server of "
                             "its own. vLLM batches all episodes itself: use parallel.engine local, or start one "
                             "server and name it in backend.vllm.url")
        return self

    @property
    def vllm_dtype(self) -> str:
        """The dtype a vLLM server computes in (``backend.vllm.dtype``, ``auto``: model.dtype)."""
        v = self.backend.vllm.dtype
        return self.model.dtype if v == "auto" else v

    @property
    def served_dtype(self) -> str:
        """The dtype the rollout server holds the weights in (what the weight fingerprint rounds the
        trainer's weights to): the vLLM server's for ``backend.kind: vllm``, else model.dtype."""
        return self.vllm_dtype if self.backend.kind == "vllm" else self.model.dtype

    def check_domain(self, domain: str) -> None:
        """Refuse to run ``domain`` with settings that were not loaded for it while it has an overlay."""
        if self.domain != domain and (self.domain is not None or self.per_domain.get(domain)):
            raise ValueError(f"these settings were loaded for domain {self.domain!r}, not {domain!r}, and "
                             f"per_domain.{domain} has an overlay: load them with load_settings(..., domain=)")

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
                  overrides: dict | None = None, domain: str | None = None) -> Settings:
    """The effective configuration: defaults, then ``profiles[profile]``, then ``per_domain[domain]``
    of the result, then ``overrides``. Without a domain, every domain's overlay is still validated."""
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
    raw["profile"], raw["domain"] = name, None  # both set here, never by the file
    if overrides is not None and not isinstance(overrides, dict):
        raise SettingsError(f"overrides must be a mapping of sections, got {type(overrides).__name__}")
    if domain is not None and domain not in DOMAINS:
        raise SettingsError(f"unknown domain {domain!r}; known: {', '.join(DOMAINS)}")
    overlays = raw.get("per_domain") or {}
    where = _Locator(text, name, overrides or {})
    for d in [domain] if domain else [d for d in DOMAINS if isinstance(overlays, dict) and d in overlays]:
        overlay = overlays.get(d, {}) if isinstance(overlays, dict) else {}
        if not isinstance(overlay, dict):
            raise SettingsError(f"{path}: per_domain.{d} must be a mapping of sections")
        settings = _validate(path, merge(merge(raw, overlay), {**(overrides or {}), "domain": d}), where.within(d))
    if domain:
        return settings
    return _validate(path, merge(raw, overrides or {}), where)


def _validate(path: Path, raw: dict, where: _Locator) -> Settings:
    try:
        return Settings.model_validate(raw)
    except ValidationError as e:
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
    """Where a key path was set: ``--set`` overrides, a per-domain overlay, the profile's overlay,
    or a params.yaml line."""

    def __init__(self, text: str, profile: str, overrides: dict, domain: str | None = None):
        self.text, self.root, self.profile, self.overrides = text, yaml.compose(text), profile, overrides
        self.domain = domain

    def within(self, domain: str) -> _Locator:
        return _Locator(self.text, self.profile, self.overrides, domain)

    def __call__(self, keys: list[str]) -> str:
        if _has(self.overrides, keys):
            return "from --set"
        prefixes = [(["profiles", self.profile], ""), ([], "")]
        if self.domain:
            own = f", per_domain.{self.domain}"
            prefixes = [(["profiles", self.profile, "per_domain", self.domain], own),
                        (["per_domain", self.domain], own)] + prefixes
        for prefix, label in prefixes:
            node = _node(self.root, prefix + keys)
            if node is not None:
                return f"line {node.start_mark.line + 1}{label}"
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
