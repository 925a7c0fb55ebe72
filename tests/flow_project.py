"""A tiny project directory for flow tests: params overrides, prepared data, the tiny model."""
from __future__ import annotations

import shutil
from pathlib import Path

from domains import get_domain

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"weight": 4, "harness": 2, "test": 2}


def make_project(tmp: Path, model_dir: Path, domains=("chess_puzzles",)) -> dict:
    """Write params.yaml and data/ under ``tmp``; return the overrides that make runs tiny."""
    shutil.copy(ROOT / "params.yaml", tmp / "params.yaml")
    for name in domains:
        get_domain(name, str(tmp / "data")).prepare(SIZES, 0)
    return {
        "model": {"export_dir": str(model_dir)},
        "data": {name: SIZES for name in domains},
        "rsft": {"prompt_batch": 2, "k": 2, "mini_batch": 4, "micro_batch": 2, "lr": 1e-3},
        "harness_search": {"M": 1, "smoke_examples": 1, "h0": str(ROOT / "harnesses" / "examples" / "chess_choice.py")},
        "schedule": {"E": 0.5, "I": 2, "total_epochs": 1.0, "harness_iterations": 2},
        "eval": {"k": 1},
        "backend": {"max_batch": 8},
    }
