"""Domains: trusted problem families (data, environment with tools, verifier)."""
from __future__ import annotations

import importlib

NAMES = ("math_reasoning", "chess_puzzles", "search_qa")


def get_domain(name: str, data_dir: str = "data", **options):
    """The domain object for ``name``; its examples are read from ``data_dir/<name>/``.
    ``options`` are the domain's generation settings (params.yaml ``generation.<name>``)."""
    if name not in NAMES:
        raise ValueError(f"unknown domain {name!r}; choose one of {', '.join(NAMES)}")
    return importlib.import_module(f"domains.{name}").make_domain(data_dir, **options)
