"""Orchestration overhead of a WHALE cycle: wall time outside model compute (Prefect, DuckDB, sandbox, I/O).

Runs one fixed-schedule `whale` flow (2 weight phases + 1 harness phase) on a tiny random model in a
scratch project, timing model compute (batched generation, SFT steps, checkpoint writes) and
everything else, side by side in one run. Usage: python bench/orchestration.py [--keep DIR]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIMERS = {"generate": 0.0, "sft_step": 0.0, "trainer_init": 0.0, "checkpoint": 0.0, "hash": 0.0}


def timed(owner, name: str, key: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMERS[key] += time.perf_counter() - t0
    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", default=None, help="scratch directory to keep (default: a temp dir)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="whale-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    import os

    os.chdir(work)
    from whale.testing import make_project, tiny_model

    overrides = make_project(work, tiny_model(ROOT / "data" / "model", work / "tiny"))
    import whale.model as model
    import whale.train.checkpoint as ckpt
    from flows.whale import whale as whale_flow
    from whale.rollout.backends.hf import TransformersBackend
    from whale.train.rsft import RSFTTrainer

    timed(TransformersBackend, "generate", "generate")
    timed(RSFTTrainer, "step", "sft_step")
    timed(RSFTTrainer, "__init__", "trainer_init")
    timed(ckpt, "save_checkpoint", "checkpoint")
    timed(model, "model_weights_id", "hash")
    import whale.run.weights

    whale.run.weights.save_checkpoint = ckpt.save_checkpoint
    whale.run.weights.model_weights_id = model.model_weights_id
    from prefect import flow

    @flow
    def noop():
        return 0

    t0 = time.perf_counter()
    noop()  # the process's temporary Prefect server starts here, once
    server = time.perf_counter() - t0
    t0 = time.perf_counter()
    whale_flow(domain="chess_puzzles", condition="whale", overrides=overrides)
    wall = time.perf_counter() - t0
    compute = sum(TIMERS.values())
    print(f"Prefect temporary server start (once per process) {server:8.2f} s")
    print(f"cycle wall time            {wall:8.2f} s")
    for k, v in TIMERS.items():
        print(f"  model compute: {k:10s} {v:8.2f} s")
    print(f"outside model compute      {wall - compute:8.2f} s  ({(wall - compute) / wall:.0%} of the wall time)")
    print(f"ratio outside / model      {(wall - compute) / max(compute, 1e-9):8.2f}")


if __name__ == "__main__":
    main()
