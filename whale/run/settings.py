"""Read ``params.yaml``: the defaults, with the selected profile's overlay applied."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

DEFAULT_PATH = Path("params.yaml")


def merge(base: dict, overlay: dict) -> dict:
    """Deep-merge ``overlay`` into a copy of ``base``."""
    out = copy.deepcopy(base)
    for k, v in overlay.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_params(path: str | Path = DEFAULT_PATH, profile: str | None = None, overrides: dict | None = None) -> dict:
    """The effective configuration: defaults, then ``profiles[profile]``, then ``overrides``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (run from the project root or pass --params)")
    with path.open() as f:
        raw = yaml.safe_load(f)
    profiles = raw.pop("profiles", {}) or {}
    name = profile or raw.get("profile", "default")
    if name != "default":
        if name not in profiles:
            raise ValueError(f"{path}: unknown profile {name!r}; known: default, {', '.join(profiles)}")
        raw = merge(raw, profiles[name])
    raw["profile"] = name
    return merge(raw, overrides or {})
